package clock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func TestFakeAdvanceFiresDueTimersInOrderAtTheirDueTime(t *testing.T) {
	c := clock.NewFake(t0)
	var got []string
	var at []time.Time
	mk := func(name string, d time.Duration) {
		c.AfterFunc(d, func() { got = append(got, name); at = append(at, c.Now()) })
	}
	mk("c", 3*time.Minute)
	mk("a", time.Minute)
	mk("b1", 2*time.Minute)
	mk("b2", 2*time.Minute) // same due time: creation order
	mk("late", 10*time.Minute)

	c.Advance(3 * time.Minute) // exactly c's due time: it fires
	want := []string{"a", "b1", "b2", "c"}
	if len(got) != len(want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fired %v, want %v", got, want)
		}
	}
	for i, d := range []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute, 3 * time.Minute} {
		if !at[i].Equal(t0.Add(d)) {
			t.Errorf("%s saw Now %v, want its due time %v", got[i], at[i], t0.Add(d))
		}
	}
	if !c.Now().Equal(t0.Add(3 * time.Minute)) {
		t.Errorf("Now after Advance = %v", c.Now())
	}
	if c.Pending() != 1 {
		t.Errorf("Pending = %d, want 1 (late)", c.Pending())
	}
	if due, ok := c.NextDue(); !ok || !due.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("NextDue = %v %v", due, ok)
	}
}

func TestFakeChannelTimer(t *testing.T) {
	c := clock.NewFake(t0)
	tm := c.NewTimer(time.Hour)
	c.Advance(59 * time.Minute)
	select {
	case v := <-tm.C():
		t.Fatalf("fired early at %v", v)
	default:
	}
	c.Advance(time.Minute)
	select {
	case v := <-tm.C():
		if !v.Equal(t0.Add(time.Hour)) {
			t.Errorf("sent %v, want the due time", v)
		}
	default:
		t.Fatal("did not fire when due")
	}
}

func TestFakeStopAndReset(t *testing.T) {
	c := clock.NewFake(t0)
	fired := 0
	tm := c.AfterFunc(time.Minute, func() { fired++ })
	if !tm.Stop() {
		t.Error("Stop of a pending timer reported false")
	}
	if tm.Stop() {
		t.Error("second Stop reported true")
	}
	c.Advance(time.Hour)
	if fired != 0 {
		t.Fatal("a stopped timer fired")
	}
	if tm.Reset(time.Minute) {
		t.Error("Reset of a stopped timer reported it pending")
	}
	c.Advance(59 * time.Second)
	if fired != 0 {
		t.Fatal("reset timer fired early")
	}
	c.Advance(time.Second)
	if fired != 1 {
		t.Fatalf("reset timer fired %d times, want 1", fired)
	}

	// A channel timer that fired unread and is then reset delivers no
	// stale value (Go 1.23 time.Timer semantics).
	ct := c.NewTimer(time.Minute)
	c.Advance(time.Minute)
	ct.Reset(time.Minute)
	select {
	case v := <-ct.C():
		t.Fatalf("stale value %v after Reset", v)
	default:
	}
	c.Advance(time.Minute)
	if v := <-ct.C(); !v.Equal(c.Now()) {
		t.Errorf("reset timer sent %v, want %v", v, c.Now())
	}
}

func TestFakeFuncMayArmATimerThatFiresInTheSameAdvance(t *testing.T) {
	c := clock.NewFake(t0)
	var ticks []time.Time
	var tick func()
	tick = func() {
		ticks = append(ticks, c.Now())
		c.AfterFunc(10*time.Second, tick)
	}
	c.AfterFunc(10*time.Second, tick)
	c.Advance(35 * time.Second)
	if len(ticks) != 3 {
		t.Fatalf("ticks %v, want 3 (10s, 20s, 30s)", ticks)
	}
	if !ticks[2].Equal(t0.Add(30 * time.Second)) {
		t.Errorf("third tick at %v", ticks[2])
	}
	if c.Pending() != 1 {
		t.Errorf("Pending = %d, want the tick at 40s", c.Pending())
	}
}

func TestFakeSet(t *testing.T) {
	c := clock.NewFake(t0)
	fired := 0
	c.AfterFunc(time.Hour, func() { fired++ })
	c.Set(t0.Add(-time.Hour)) // back: nothing fires, the timer keeps its due time
	if fired != 0 || !c.Now().Equal(t0.Add(-time.Hour)) {
		t.Fatalf("after Set back: fired %d, now %v", fired, c.Now())
	}
	c.Set(t0.Add(59 * time.Minute))
	if fired != 0 {
		t.Fatal("fired before its due time")
	}
	c.Set(t0.Add(time.Hour))
	if fired != 1 {
		t.Fatalf("fired %d, want 1", fired)
	}
}

func TestFakeAdvanceRefusesANegativeDuration(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Advance(-1) did not panic")
		}
	}()
	clock.NewFake(t0).Advance(-1)
}

// A goroutine waiting on the clock is woken by Advance; BlockUntil is how
// the test knows it is waiting, with no sleep.
func TestFakeBlockUntilSynchronisesWithAWaiter(t *testing.T) {
	c := clock.NewFake(t0)
	woke := make(chan time.Time)
	go func() {
		tm := c.NewTimer(5 * time.Minute)
		woke <- <-tm.C()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Minute)
	if got := <-woke; !got.Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("woke with %v", got)
	}

	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := c.BlockUntil(short, 1); err == nil {
		t.Error("BlockUntil with no pending timer and a done context returned nil")
	}
}

func TestFakeIsSafeForConcurrentUse(t *testing.T) {
	c := clock.NewFake(t0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				tm := c.AfterFunc(time.Duration(i+j)*time.Millisecond, func() { mu.Lock(); fired++; mu.Unlock() })
				if j%5 == 0 {
					tm.Stop()
				}
				_ = c.Now()
			}
		}()
	}
	for range 20 {
		c.Advance(time.Millisecond)
	}
	wg.Wait()
	c.Advance(time.Hour)
	mu.Lock()
	defer mu.Unlock()
	if fired+c.Pending() > 8*50 || c.Pending() != 0 {
		t.Errorf("fired %d, pending %d", fired, c.Pending())
	}
	if fired < 8*40 {
		t.Errorf("fired %d, want at least the %d timers never stopped", fired, 8*40)
	}
}

func TestRealAndOr(t *testing.T) {
	if _, ok := clock.Or(nil).(clock.Real); !ok {
		t.Error("Or(nil) is not Real")
	}
	f := clock.NewFake(t0)
	if clock.Or(f) != f {
		t.Error("Or(f) is not f")
	}
	r := clock.Real{}
	if d := time.Since(r.Now()); d < 0 || d > time.Hour {
		t.Errorf("Real.Now is off by %v", d)
	}
	tm := r.NewTimer(0)
	<-tm.C()
	done := make(chan struct{})
	ft := r.AfterFunc(0, func() { close(done) })
	<-done
	if ft.C() != nil {
		t.Error("an AfterFunc timer has a channel")
	}
	long := r.NewTimer(time.Hour)
	if !long.Stop() {
		t.Error("Stop of a pending real timer reported false")
	}
}
