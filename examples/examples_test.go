package examples_test

import (
	"testing"
	"time"

	"github.com/asmp-dev/asmp/examples"
)

// Options change how the built-in workflows behave, not what they are:
// expense-approval-v1 with short payment steps is the same version, so a
// test serving it serves what asmp serve does.
func TestOptionsKeepTheVersion(t *testing.T) {
	t.Parallel()
	short := examples.AllWith(examples.Options{PaymentStep: time.Millisecond})
	for i, d := range examples.All() {
		if short[i].ID != d.ID || short[i].Version() != d.Version() {
			t.Fatalf("%s with options: %s %s, want %s %s", d.ID, short[i].ID, short[i].Version(), d.ID, d.Version())
		}
	}
}
