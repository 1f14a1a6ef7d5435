package clock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Its timers fire inside
// Advance and Set, in the order of their due times (ties in the order the
// timers were made or last reset), each with Now equal to its due time
// while it fires; an AfterFunc func runs synchronously in the goroutine
// that advances the clock, so when Advance returns every func that fell
// due has returned. A func may read the clock and make, stop or reset
// timers (one that falls due within the same advance fires in it), but
// must not call Advance or Set itself.
//
// A Fake is safe for concurrent use. Its zero value is not usable: make
// one with NewFake.
type Fake struct {
	advancing sync.Mutex // one Advance or Set at a time

	mu      sync.Mutex
	now     time.Time
	seq     uint64
	pending fakeHeap
	changed chan struct{} // closed and replaced when pending changes
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock that reads now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, changed: make(chan struct{})}
}

// Now returns the fake's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that sends its due time on C when the clock
// reaches it. C has room for one value, like time.Timer's.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(d, make(chan time.Time, 1), nil)
}

// AfterFunc returns a timer that calls fn when the clock reaches now+d.
// A d <= 0 fires at the next Advance or Set (Advance(0) will do), not at
// once: a Fake fires nothing outside them.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.add(d, nil, fn)
}

func (f *Fake) add(d time.Duration, ch chan time.Time, fn func()) *fakeTimer {
	t := &fakeTimer{f: f, ch: ch, fn: fn, index: -1}
	f.mu.Lock()
	f.schedule(t, d)
	f.mu.Unlock()
	return t
}

// schedule arms t at now+d; f.mu is held.
func (f *Fake) schedule(t *fakeTimer, d time.Duration) {
	f.seq++
	t.when, t.seq = f.now.Add(d), f.seq
	heap.Push(&f.pending, t)
	f.signal()
}

// signal wakes BlockUntil callers; f.mu is held.
func (f *Fake) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Pending returns the number of timers that have not fired or been
// stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// BlockUntil waits until at least n timers are pending (e.g. until the
// code under test has armed the timer a test is about to fire), or ctx
// ends. It is how a test synchronises with a goroutine that waits on the
// clock, instead of sleeping.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		ok, ch := len(f.pending) >= n, f.changed
		f.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// NextDue returns the due time of the earliest pending timer.
func (f *Fake) NextDue() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) == 0 {
		return time.Time{}, false
	}
	return f.pending[0].when, true
}

// Advance moves the clock forward by d, firing every timer due by then.
// It panics on a negative d (use Set to move back).
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Fake.Advance with a negative duration")
	}
	f.advancing.Lock()
	defer f.advancing.Unlock()
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.runUntil(target)
}

// Set moves the clock to t, firing every timer due by t. Moving forward is
// Advance(t - Now()); moving back (a wall clock stepped back) keeps the
// pending timers' due times, so they fire later by as much.
func (f *Fake) Set(t time.Time) {
	f.advancing.Lock()
	defer f.advancing.Unlock()
	f.runUntil(t)
}

// runUntil fires the timers due by target in order, then sets now to
// target. f.advancing is held.
func (f *Fake) runUntil(target time.Time) {
	for {
		f.mu.Lock()
		if len(f.pending) == 0 || f.pending[0].when.After(target) {
			f.now = target
			f.mu.Unlock()
			return
		}
		t := heap.Pop(&f.pending).(*fakeTimer)
		if t.when.After(f.now) {
			f.now = t.when // a timer made with d <= 0 fires at the time it was made
		}
		f.signal()
		when := t.when
		if t.ch != nil {
			select {
			case t.ch <- when:
			default:
			}
		}
		f.mu.Unlock()
		if t.fn != nil {
			t.fn()
		}
	}
}

// fakeTimer is a Timer of a Fake.
type fakeTimer struct {
	f     *Fake
	when  time.Time
	seq   uint64
	ch    chan time.Time
	fn    func()
	index int // in f.pending; -1 when not pending
}

func (t *fakeTimer) C() <-chan time.Time {
	if t.ch == nil {
		return nil
	}
	return t.ch
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.unschedule()
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.unschedule()
	t.f.schedule(t, d)
	return was
}

// unschedule removes t from the pending timers and drains a value it sent
// that nobody received; f.mu is held.
func (t *fakeTimer) unschedule() bool {
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.f.pending, t.index)
	t.f.signal()
	return true
}

// fakeHeap orders pending timers by due time, then by seq.
type fakeHeap []*fakeTimer

func (h fakeHeap) Len() int { return len(h) }
func (h fakeHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h fakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *fakeHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *fakeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
