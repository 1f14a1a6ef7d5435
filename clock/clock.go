// Package clock is the time source of the engine: Now, and the timers it
// waits on until the next due time. Real is the system clock; Fake is a
// clock a test moves by hand (Advance, Set), firing the timers that fall
// due on the way in a deterministic order, so tests of timers, retries and
// schedules never wait for wall-clock time to pass.
//
// A library user injects one into the engine through its options; a nil
// clock there means Real.
package clock

import "time"

// Clock tells the time and makes timers that fire by it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel C once
	// d has passed (at once when d <= 0).
	NewTimer(d time.Duration) Timer
	// AfterFunc returns a timer that calls f once d has passed. Its C is
	// nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending timer of a Clock. Stop and Reset follow time.Timer
// (Go 1.23 semantics): after either returns, no value sent for the old
// expiry is received from C.
type Timer interface {
	// C is the channel a NewTimer timer sends its expiry time on; nil for
	// an AfterFunc timer.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether the timer
	// was still pending.
	Stop() bool
	// Reset makes the timer fire d from now (the clock's now); it reports
	// whether the timer was still pending.
	Reset(d time.Duration) bool
}

// Real is the system clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f), fn: true}
}

type realTimer struct {
	t  *time.Timer
	fn bool
}

func (r realTimer) C() <-chan time.Time {
	if r.fn {
		return nil
	}
	return r.t.C
}

func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Or returns c, or Real when c is nil: what a component given an optional
// clock uses.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
