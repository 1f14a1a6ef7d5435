package workflow

import "time"

// SetGuardClock sets the clock of guard deadlines until the test ends.
func SetGuardClock(cleanup func(func()), now func() time.Time) {
	old := guardNow
	guardNow = now
	cleanup(func() { guardNow = old })
}
