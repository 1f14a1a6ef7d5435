package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

var timerT0 = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

// reviewFlow is an approval that escalates when nobody reviews it within
// 10 minutes: REVIEW has a timer that fires escalate (guarded by data.level
// < 3, and writing the timer's reason), a self-loop that re-arms it, and a
// deadline from the run's data.
func reviewFlow(t testing.TB) *workflow.Definition {
	t.Helper()
	b := workflow.New("review-v1", "REVIEW")
	b.State("REVIEW").
		Timer(workflow.Timer{After: 10 * time.Minute, Action: "escalate", Data: map[string]any{"reason": "nobody reviewed in 10m"}}).
		At("data.due_at", "expire")
	b.State("ESCALATED")
	b.State("EXPIRED")
	b.State("DONE")
	b.Transition("REVIEW", "approve", "DONE")
	b.Transition("REVIEW", "touch", "REVIEW")
	b.Transition("REVIEW", "escalate", "ESCALATED").Expect("reason", "string").
		GuardExpr("(data.level ?? 0) < 3", "The run is at the top escalation level already.")
	b.Transition("REVIEW", "expire", "EXPIRED")
	b.Transition("ESCALATED", "approve", "DONE")
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type timerRig struct {
	eng   *engine.Engine
	st    store.Store
	clock *clock.Fake
}

func newTimerRig(t testing.TB, st store.Store, fc *clock.Fake) *timerRig {
	t.Helper()
	eng, err := engine.New(st, []*workflow.Definition{reviewFlow(t)}, &engine.Options{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	return &timerRig{eng: eng, st: st, clock: fc}
}

func (r *timerRig) start(t testing.TB, data map[string]any) *engine.Run {
	t.Helper()
	run, err := r.eng.StartRun(context.Background(), "", data, engine.StartOptions{Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func (r *timerRig) fire(t testing.TB) int {
	t.Helper()
	n, err := r.eng.FireDueTimers(context.Background(), &engine.TimerOptions{Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (r *timerRig) get(t testing.TB, id string) *engine.Run {
	t.Helper()
	run, err := r.eng.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func (r *timerRig) events(t testing.TB, id string) []store.Event {
	t.Helper()
	evs, err := r.eng.Events(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func timerEvents(evs []store.Event) []store.Event {
	var out []store.Event
	for _, e := range evs {
		if e.Actor == engine.ActorTimer {
			out = append(out, e)
		}
	}
	return out
}

// A timer fires its action once when it falls due, as actor "timer", with
// its data for the action's expected fields; not before, and not twice.
func TestTimerFiresOnceWhenDue(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		r := newTimerRig(t, b.New(t).Open(t), clock.NewFake(timerT0))
		run := r.start(t, nil)
		ts, err := r.eng.RunTimers(context.Background(), run)
		if err != nil || len(ts) != 1 || ts[0].Action != "escalate" || !ts[0].DueAt.Equal(timerT0.Add(10*time.Minute)) {
			t.Fatalf("pending timers after start = %+v, %v; want escalate due at %s", ts, err, timerT0.Add(10*time.Minute))
		}
		r.clock.Advance(10*time.Minute - time.Second)
		if n := r.fire(t); n != 0 {
			t.Fatalf("%d timers fired a second before the due time", n)
		}
		r.clock.Advance(time.Second)
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d timers fired at the due time, want 1", n)
		}
		got := r.get(t, run.ID)
		if got.State != "ESCALATED" || got.Data["reason"] != "nobody reviewed in 10m" {
			t.Fatalf("after the timer: state %s, data %v", got.State, got.Data)
		}
		r.clock.Advance(time.Hour)
		if n := r.fire(t); n != 0 {
			t.Fatalf("%d timers fired again", n)
		}
		te := timerEvents(r.events(t, run.ID))
		if len(te) != 1 || te[0].Action != "escalate" || te[0].Kind != store.EventTransition || !te[0].Time.Equal(timerT0.Add(10*time.Minute)) {
			t.Fatalf("timer events = %+v, want one escalate transition at the due time", te)
		}
		if ts, _ := r.eng.RunTimers(context.Background(), got); len(ts) != 0 {
			t.Fatalf("ESCALATED has no timers, but the run shows %+v", ts)
		}
	})
}

// A run that left the state before its timer fell due voids the timer;
// re-entering the state (a self-loop) starts its timers again.
func TestTimerVoidWhenTheRunMovedOn(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		r := newTimerRig(t, b.New(t).Open(t), clock.NewFake(timerT0))
		ctx := context.Background()
		left := r.start(t, nil)
		looped := r.start(t, nil)
		r.clock.Advance(6 * time.Minute)
		if _, err := r.eng.Transition(ctx, left.ID, "approve", nil, engine.TransitionOptions{Actor: "bob"}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.eng.Transition(ctx, looped.ID, "touch", nil, engine.TransitionOptions{Actor: "bob"}); err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(5 * time.Minute) // 11m: the first entry's timers were due
		if n := r.fire(t); n != 0 {
			t.Fatalf("%d timers fired after their runs left (or re-entered) the state", n)
		}
		if s := r.get(t, left.ID).State; s != "DONE" {
			t.Fatalf("the approved run is in %s", s)
		}
		r.clock.Advance(5 * time.Minute) // 16m: the re-entry's timer is due
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d timers fired 10m after the re-entry, want 1", n)
		}
		if s := r.get(t, looped.ID).State; s != "ESCALATED" {
			t.Fatalf("the re-armed run is in %s", s)
		}
		if te := timerEvents(r.events(t, left.ID)); len(te) != 0 {
			t.Fatalf("the approved run has timer events %+v", te)
		}
	})
}

// A timer claimed while its run was still in the state, and fired after
// the run moved on, does nothing (the version decides).
func TestTimerClaimedThenRunMovedOn(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		r := newTimerRig(t, st, clock.NewFake(timerT0))
		ctx := context.Background()
		run := r.start(t, nil)
		r.clock.Advance(10 * time.Minute)
		now := r.clock.Now()
		claimed, err := st.ClaimDueTimers(ctx, now, 10, "slow-replica", now.Add(time.Minute))
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		if _, err := r.eng.Transition(ctx, run.ID, "touch", nil, engine.TransitionOptions{Actor: "bob"}); err != nil {
			t.Fatal(err)
		}
		if err := r.eng.FireTimer(ctx, claimed[0]); err != nil {
			t.Fatal(err)
		}
		got := r.get(t, run.ID)
		if got.State != "REVIEW" || got.Version != 2 {
			t.Fatalf("a stale timer moved the run: %s at version %d", got.State, got.Version)
		}
		if te := timerEvents(r.events(t, run.ID)); len(te) != 0 {
			t.Fatalf("a stale timer left events %+v", te)
		}
		ts, _ := r.eng.RunTimers(ctx, got)
		if len(ts) != 1 || ts[0].Version != 2 || !ts[0].DueAt.Equal(now.Add(10*time.Minute)) {
			t.Fatalf("timers after the re-entry = %+v", ts)
		}
	})
}

// A timer whose transition is refused (here by its guard) is recorded as
// a timer_refused event with the guard's reason; the run stays, and the
// timer is done.
func TestTimerRefusedIsRecorded(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		r := newTimerRig(t, b.New(t).Open(t), clock.NewFake(timerT0))
		run := r.start(t, map[string]any{"level": 3})
		r.clock.Advance(10 * time.Minute)
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d timers handled, want 1", n)
		}
		got := r.get(t, run.ID)
		if got.State != "REVIEW" || got.Version != 2 {
			t.Fatalf("after a refused timer: %s at version %d, want REVIEW at 2", got.State, got.Version)
		}
		te := timerEvents(r.events(t, run.ID))
		if len(te) != 1 || te[0].Kind != store.EventTimerRefused || te[0].Action != "escalate" || te[0].To != "REVIEW" ||
			!strings.Contains(te[0].Reason, "top escalation level") {
			t.Fatalf("timer events = %+v, want one timer_refused naming the guard's reason", te)
		}
		log, err := r.eng.EventLog(context.Background(), got, 0, 0)
		if err != nil || log.Events[1].Kind != store.EventTimerRefused || !strings.Contains(log.Events[1].Reason, "top escalation level") {
			t.Fatalf("the event log shows %+v, %v", log, err)
		}
		if ts, _ := r.eng.RunTimers(context.Background(), got); len(ts) != 0 {
			t.Fatalf("a refused timer is still pending: %+v", ts)
		}
		r.clock.Advance(time.Hour)
		if n := r.fire(t); n != 0 {
			t.Fatalf("a refused timer fired again (%d)", n)
		}
		// The run still takes client actions.
		if _, err := r.eng.Transition(context.Background(), run.ID, "approve", nil, engine.TransitionOptions{Actor: "bob"}); err != nil {
			t.Fatal(err)
		}
	})
}

// A deadline from the run's data (at:) fires at that time; one whose
// expression fails on the data is not set, and the event says so.
func TestTimerAtDeadline(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		r := newTimerRig(t, b.New(t).Open(t), clock.NewFake(timerT0))
		due := timerT0.Add(3 * time.Minute)
		run := r.start(t, map[string]any{"due_at": due.Format(time.RFC3339)})
		bad := r.start(t, map[string]any{"due_at": "next tuesday"})
		ts, _ := r.eng.RunTimers(context.Background(), bad)
		if len(ts) != 1 || ts[0].Action != "escalate" {
			t.Fatalf("a run whose due_at is not a time has timers %+v, want escalate only", ts)
		}
		if evs := r.events(t, bad.ID); !strings.Contains(evs[0].Reason, "Timer not set") || !strings.Contains(evs[0].Reason, "expire") {
			t.Fatalf("the created event's reason = %q, want it to say the expire timer was not set", evs[0].Reason)
		}
		r.clock.Advance(3 * time.Minute)
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d timers fired at the deadline, want 1", n)
		}
		if s := r.get(t, run.ID).State; s != "EXPIRED" {
			t.Fatalf("after its deadline the run is in %s", s)
		}
	})
}

// Timers are durable: a timer that fell due while no process ran fires
// when one starts, once.
func TestTimerFiresAfterRestart(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		if !b.Durable {
			t.Skip("the in-memory store keeps nothing across a restart")
		}
		place := b.New(t)
		fc := clock.NewFake(timerT0)
		st := place.Open(t)
		r := newTimerRig(t, st, fc)
		run := r.start(t, nil)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		fc.Advance(time.Hour) // down while the timer fell due
		r2 := newTimerRig(t, place.Open(t), fc)
		loop := r2.eng.StartTimers(&engine.TimerOptions{Owner: "restarted"})
		defer loop.Stop()
		waitState(t, r2, run.ID, "ESCALATED")
		loop.Stop()
		if te := timerEvents(r2.events(t, run.ID)); len(te) != 1 {
			t.Fatalf("timer events after restart = %+v, want 1", te)
		}
	})
}

// The timer loop wakes for a timer this process stored and fires it when
// the clock reaches its due time.
func TestTimerLoopFiresOnTheClock(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(timerT0)
		r := newTimerRig(t, b.New(t).Open(t), fc)
		loop := r.eng.StartTimers(&engine.TimerOptions{Poll: time.Hour})
		defer loop.Stop()
		run := r.start(t, nil)
		// The loop waits on the clock (for the timer stored, at most its
		// poll): moving the clock to the due time wakes it.
		if err := fc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		fc.Advance(10 * time.Minute)
		waitState(t, r, run.ID, "ESCALATED")
	})
}

// Two replicas on one Postgres database, 1,000 timers due at once: each
// fires exactly once.
func TestTimersTwoReplicasFireOnce(t *testing.T) {
	b := backends.All()[2]
	if testing.Short() {
		t.Skip("-short")
	}
	place := b.New(t)
	fc := clock.NewFake(timerT0)
	r1 := newTimerRig(t, place.Open(t), fc)
	r2 := newTimerRig(t, place.Open(t), fc)
	const n = 1000
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := r1.eng.StartRun(context.Background(), "", map[string]any{"i": i}, engine.StartOptions{})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = run.ID
		}()
		if i%64 == 63 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Minute)
	var fire sync.WaitGroup
	for i, r := range []*timerRig{r1, r2} {
		fire.Add(1)
		go func() {
			defer fire.Done()
			for {
				k, err := r.eng.FireDueTimers(context.Background(), &engine.TimerOptions{Owner: fmt.Sprint("replica-", i), Batch: 50})
				if err != nil {
					t.Error(err)
					return
				}
				if k == 0 {
					return
				}
			}
		}()
	}
	fire.Wait()
	for _, id := range ids {
		if te := timerEvents(r1.events(t, id)); len(te) != 1 || te[0].Kind != store.EventTransition {
			t.Fatalf("run %s has timer events %+v, want exactly one firing", id, te)
		}
	}
}

// waitState waits (in real time: for the loop's goroutine, never for the
// fake clock) until the run is in state.
func waitState(t *testing.T, r *timerRig, id, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.get(t, id)
		if got.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is in %s after 10s, want %s", id, got.State, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A timer that falls due while the loop fires others is claimed as soon
// as they are done, not after the loop's back-off for timers it could not
// claim: here the first timer's firing moves the clock past the second's
// due time, and the clock never moves again.
func TestTimerLoopClaimsWhatFellDueWhileFiring(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(timerT0)
		var armed atomic.Bool
		wb := workflow.New("chain-v1", "WAIT")
		wb.State("WAIT").At("data.due_at", "go")
		wb.State("DONE")
		wb.Transition("WAIT", "go", "DONE").Guard(func(map[string]any) (bool, string) {
			if armed.CompareAndSwap(true, false) {
				fc.Advance(time.Millisecond) // the firing takes a millisecond
			}
			return true, ""
		})
		eng, err := engine.New(b.New(t).Open(t), []*workflow.Definition{wb.MustBuild()}, &engine.Options{Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		loop := eng.StartTimers(&engine.TimerOptions{Poll: time.Hour})
		defer loop.Stop()
		r := &timerRig{eng: eng, clock: fc}
		due := timerT0.Add(time.Minute)
		var ids []string
		for _, at := range []time.Time{due, due.Add(time.Millisecond)} {
			run, err := eng.StartRun(context.Background(), "chain-v1", map[string]any{"due_at": at.Format(time.RFC3339Nano)}, engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, run.ID)
		}
		if err := fc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		fc.Advance(time.Minute)
		waitState(t, r, ids[0], "DONE")
		waitState(t, r, ids[1], "DONE")
	})
}

// A timer refused while the state's background task runs is not recorded
// as an event (that would move the run's version under the task): the
// task's result still moves the run on.
func TestTimerRefusedDuringATaskLeavesTheTaskAlone(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(timerT0)
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		wb := workflow.New("busy-v1", "WORK")
		wb.State("WORK").Task(func(ctx context.Context, _ *workflow.TaskContext) (string, error) {
			started <- struct{}{}
			<-release
			return "", nil
		}, "finish", "").Timer(workflow.Timer{After: time.Minute, Action: "nudge"})
		wb.State("DONE")
		wb.Transition("WORK", "finish", "DONE")
		wb.Transition("WORK", "nudge", "DONE").GuardExpr("false", "Nudging is off.")
		def, err := wb.Build()
		if err != nil {
			t.Fatal(err)
		}
		st := b.New(t).Open(t)
		eng, err := engine.New(st, []*workflow.Definition{def}, &engine.Options{Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		w := eng.StartWorkers(&engine.WorkerOptions{Workers: 1, Poll: time.Hour})
		defer w.Stop(time.Second)
		run, err := eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		<-started
		fc.Advance(time.Minute)
		if n, err := eng.FireDueTimers(context.Background(), &engine.TimerOptions{Owner: "test"}); err != nil || n != 1 {
			t.Fatalf("fire: %d, %v", n, err)
		}
		close(release)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := eng.GetRun(context.Background(), run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if r.State == "DONE" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run is stuck in %s/%s after its timer was refused under its task", r.State, r.Status())
			}
			time.Sleep(2 * time.Millisecond)
		}
		if ts, _ := st.RunTimers(context.Background(), run.ID); len(ts) != 0 {
			t.Fatalf("timers left: %+v", ts)
		}
	})
}

// The loop claims the next timers while a batch still fires: once no more
// than half a batch is left to fire, it claims again, so a slow firing
// does not hold back the timers due after it. Here the batch is two
// timers, the first one's firing blocks until the third timer (not in the
// first batch) has fired.
func TestTimerLoopClaimsWhileABatchFires(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(timerT0)
		var armed atomic.Bool
		release := make(chan struct{})
		var once sync.Once
		wb := workflow.New("slow-v1", "WAIT")
		wb.State("WAIT").At("data.due_at", "go")
		wb.State("DONE")
		wb.Transition("WAIT", "go", "DONE").Guard(func(data map[string]any) (bool, string) {
			if data["slow"] == true && armed.CompareAndSwap(true, false) {
				<-release
			}
			return true, ""
		})
		eng, err := engine.New(b.New(t).Open(t), []*workflow.Definition{wb.MustBuild()}, &engine.Options{Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		loop := eng.StartTimers(&engine.TimerOptions{Batch: 2, Concurrency: 2, Poll: time.Hour})
		defer loop.Stop()
		defer once.Do(func() { close(release) }) // before Stop, which waits for the firing
		r := &timerRig{eng: eng, clock: fc}
		due := timerT0.Add(time.Minute)
		var ids []string
		for i, at := range []time.Time{due, due, due.Add(time.Millisecond)} {
			run, err := eng.StartRun(context.Background(), "slow-v1", map[string]any{"due_at": at.Format(time.RFC3339Nano), "slow": i == 0}, engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, run.ID)
		}
		// The first claim takes the two due first: the slow one is among
		// them whatever the order of their ids.
		if err := fc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		fc.Advance(2 * time.Minute)     // all due; the first two first
		waitState(t, r, ids[2], "DONE") // fired while the slow one still blocks
		if got := r.get(t, ids[0]); got.State != "WAIT" {
			t.Fatalf("the slow run is in %s while its firing blocks, want WAIT", got.State)
		}
		once.Do(func() { close(release) })
		waitState(t, r, ids[0], "DONE")
		waitState(t, r, ids[1], "DONE")
	})
}

// runsClaimer is a store that claims due timers with their runs
// (engine.TimerRunsClaimer), as read by the claim, then calls moved (if
// set) before they fire; it counts the runs read by GetRun.
type runsClaimer struct {
	store.Store
	runs  func(ctx context.Context, ts []store.Timer) []store.Run // default: each timer's run, read now
	moved func()
	reads atomic.Int64
}

func (c *runsClaimer) ClaimDueTimersWithRuns(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Timer, []store.Run, error) {
	ts, err := c.Store.ClaimDueTimers(ctx, now, limit, owner, leaseUntil)
	if err != nil {
		return nil, nil, err
	}
	var runs []store.Run
	if c.runs != nil {
		runs = c.runs(ctx, ts)
	} else {
		for _, t := range ts {
			r, err := c.Store.GetRun(ctx, t.RunID)
			if err != nil {
				return nil, nil, err
			}
			runs = append(runs, r)
		}
	}
	if c.moved != nil {
		c.moved()
	}
	return ts, runs, nil
}

func (c *runsClaimer) GetRun(ctx context.Context, id string) (store.Run, error) {
	c.reads.Add(1)
	return c.Store.GetRun(ctx, id)
}

// A store that claims due timers with their runs (engine.TimerRunsClaimer)
// has them fired on those values: no run is read to fire them, and each
// fires once.
func TestTimerFiresOnTheClaimedRun(t *testing.T) {
	st := &runsClaimer{Store: memstore.New()}
	r := newTimerRig(t, st, clock.NewFake(timerT0))
	runs := []*engine.Run{r.start(t, nil), r.start(t, nil), r.start(t, nil)}
	r.clock.Advance(10 * time.Minute)
	st.reads.Store(0)
	if n := r.fire(t); n != len(runs) {
		t.Fatalf("%d timers fired, want %d", n, len(runs))
	}
	if n := st.reads.Load(); n != 0 {
		t.Errorf("firing %d timers claimed with their runs read %d runs, want none", len(runs), n)
	}
	for _, run := range runs {
		if te := timerEvents(r.events(t, run.ID)); len(te) != 1 || r.get(t, run.ID).State != "ESCALATED" {
			t.Fatalf("run %s: timer events %+v, state %s; want one escalate", run.ID, te, r.get(t, run.ID).State)
		}
	}
}

// A timer claimed with its run's value, fired after another replica moved
// the run on (re-entering the state), does nothing: the compare-and-set on
// the claimed value's version fails, and the stored run decides.
func TestTimerClaimedWithAStaleRun(t *testing.T) {
	mem := memstore.New()
	st := &runsClaimer{Store: mem}
	r := newTimerRig(t, st, clock.NewFake(timerT0))
	other := newTimerRig(t, mem, r.clock) // another replica: this engine knows nothing of its commits
	run := r.start(t, nil)
	r.clock.Advance(10 * time.Minute)
	st.moved = func() {
		if _, err := other.eng.Transition(context.Background(), run.ID, "touch", nil, engine.TransitionOptions{Actor: "bob"}); err != nil {
			t.Error(err)
		}
	}
	if n := r.fire(t); n != 1 {
		t.Fatalf("%d timers claimed, want 1", n)
	}
	got := r.get(t, run.ID)
	if got.State != "REVIEW" || got.Version != 2 {
		t.Fatalf("a timer fired on a stale value moved the run: %s at version %d", got.State, got.Version)
	}
	if te := timerEvents(r.events(t, run.ID)); len(te) != 0 {
		t.Fatalf("a stale timer left events %+v", te)
	}
	if ts, _ := r.eng.RunTimers(context.Background(), got); len(ts) != 1 || ts[0].Version != 2 {
		t.Fatalf("timers after the re-entry = %+v, want the re-entry's", ts)
	}
}

// A claim that returns no value for a timer's run (a zero Run: it was
// gone when claimed), or fewer runs than timers, has those timers fired on
// the stored runs.
func TestTimerClaimedWithoutItsRun(t *testing.T) {
	for name, runs := range map[string]func(context.Context, []store.Timer) []store.Run{
		"zero run":  func(_ context.Context, ts []store.Timer) []store.Run { return make([]store.Run, len(ts)) },
		"too few":   func(context.Context, []store.Timer) []store.Run { return []store.Run{} },
		"other run": func(context.Context, []store.Timer) []store.Run { return []store.Run{{ID: "another"}} },
	} {
		t.Run(name, func(t *testing.T) {
			st := &runsClaimer{Store: memstore.New(), runs: runs}
			r := newTimerRig(t, st, clock.NewFake(timerT0))
			run := r.start(t, nil)
			r.clock.Advance(10 * time.Minute)
			if n := r.fire(t); n != 1 {
				t.Fatalf("%d timers claimed, want 1", n)
			}
			if got := r.get(t, run.ID); got.State != "ESCALATED" {
				t.Fatalf("the timer did not fire: the run is in %s", got.State)
			}
		})
	}
}

// Two timers of one run that are both due when the loop looks (a server
// that was down past both) fire in the order they fell due: the first
// moves the run on and voids the second, as it would have on a server
// that ran all along; they never race each other.
func TestTimersOfOneRunFireInDueOrder(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		r := newTimerRig(t, b.New(t).Open(t), clock.NewFake(timerT0))
		due := timerT0.Add(11 * time.Minute).Format(time.RFC3339) // after escalate's 10m
		ids := make([]string, 32)
		for i := range ids {
			ids[i] = r.start(t, map[string]any{"due_at": due}).ID
		}
		r.clock.Advance(time.Hour)
		r.fire(t)
		for _, id := range ids {
			if got := r.get(t, id); got.State != "ESCALATED" {
				t.Fatalf("run %s is in %s: the timer due at %s fired before escalate, due at %s; events %+v",
					id, got.State, due, timerT0.Add(10*time.Minute).Format(time.RFC3339), timerEvents(r.events(t, id)))
			}
			if te := timerEvents(r.events(t, id)); len(te) != 1 || te[0].Action != "escalate" {
				t.Fatalf("run %s: timer events %+v, want escalate alone", id, te)
			}
		}
	})
}

// Two timers of one run due together (a downtime past both), the earlier
// claimed by one replica and the later by another: the later waits for
// the earlier instead of racing it, so the earlier moves the run on and
// the later is void, as on one replica. A state's only timer never waits.
func TestTimersDueTogetherOnTwoReplicasFireInDueOrder(t *testing.T) {
	wb := workflow.New("two-v1", "WAIT")
	wb.State("WAIT").After(time.Second, "escalate").After(2*time.Second, "expire")
	wb.State("ESCALATED").After(time.Second, "close")
	wb.State("EXPIRED")
	wb.State("CLOSED")
	wb.Transition("WAIT", "escalate", "ESCALATED")
	wb.Transition("WAIT", "expire", "EXPIRED")
	wb.Transition("ESCALATED", "close", "CLOSED")
	st := memstore.New()
	fc := clock.NewFake(timerT0)
	e, err := engine.New(st, []*workflow.Definition{wb.MustBuild()}, &engine.Options{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := e.StartRun(ctx, "two-v1", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fc.Advance(3 * time.Second)
	// Replica A claims the earlier timer and has not fired it yet.
	held, err := st.ClaimDueTimers(ctx, fc.Now(), 1, "replica-a", fc.Now().Add(time.Minute))
	if err != nil || len(held) != 1 || held[0].Action != "escalate" {
		t.Fatalf("replica A's claim: %+v, %v", held, err)
	}
	// Replica B claims the later one: it must not fire before escalate.
	if n, err := e.FireDueTimers(ctx, &engine.TimerOptions{Owner: "replica-b"}); err != nil || n != 1 {
		t.Fatalf("replica B claimed %d, %v; want expire", n, err)
	}
	if cur, err := e.GetRun(ctx, r.ID); err != nil || cur.State != "WAIT" {
		t.Fatalf("after replica B's claim the run is in %s (%v), want WAIT: the later timer fired first", cur.State, err)
	}
	if err := e.FireTimer(ctx, held[0]); err != nil {
		t.Fatal(err)
	}
	// expire's lease ends; it was voided when escalate left WAIT. The
	// next state's only timer fires without waiting for anything.
	fc.Advance(2 * time.Minute)
	if _, err := e.FireDueTimers(ctx, &engine.TimerOptions{Owner: "replica-b"}); err != nil {
		t.Fatal(err)
	}
	cur, err := e.GetRun(ctx, r.ID)
	if err != nil || cur.State != "CLOSED" {
		t.Fatalf("the run ended in %s (%v), want CLOSED through ESCALATED", cur.State, err)
	}
	evs, err := e.Events(ctx, r.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fired []string
	for _, ev := range timerEvents(evs) {
		fired = append(fired, ev.Action)
	}
	if strings.Join(fired, ",") != "escalate,close" {
		t.Fatalf("timer events %v, want escalate then close", fired)
	}
}
