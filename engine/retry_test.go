package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// flaky is a Go task that fails its first fails attempts, recording the
// engine clock's time and the attempt numbers it was called with.
type flaky struct {
	mu    sync.Mutex
	clock *clock.Fake
	fails int
	calls []flakyCall
}

type flakyCall struct {
	at           time.Time
	attempt, max int
	key          string
}

func (f *flaky) run(_ context.Context, tc *workflow.TaskContext) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, flakyCall{at: f.clock.Now(), attempt: tc.Attempt, max: tc.MaxAttempts, key: tc.IdempotencyKey})
	if len(f.calls) <= f.fails {
		return "", fmt.Errorf("boom %d", len(f.calls))
	}
	return "", nil
}

func (f *flaky) called() []flakyCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]flakyCall(nil), f.calls...)
}

// retryFlow: WORK runs f's task under p, on_success DONE, on_failure
// (when onFailure) GAVE_UP.
func retryFlow(t testing.TB, f *flaky, p workflow.RetryPolicy, onFailure bool) *workflow.Definition {
	t.Helper()
	b := workflow.New("retry-v1", "WORK")
	fail := ""
	if onFailure {
		fail = "give_up"
	}
	b.State("WORK").Task(f.run, "finish", fail).TaskRetry(p)
	b.State("DONE")
	b.State("GAVE_UP")
	b.Transition("WORK", "finish", "DONE")
	if onFailure {
		b.Transition("WORK", "give_up", "GAVE_UP")
	}
	b.Transition("WORK", "cancel", "DONE")
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type retryRig struct {
	eng   *engine.Engine
	w     *engine.Workers
	clock *clock.Fake
	f     *flaky
}

func newRetryRig(t testing.TB, st store.Store, fc *clock.Fake, f *flaky, def *workflow.Definition, rnd func() float64) *retryRig {
	t.Helper()
	eng, err := engine.New(st, []*workflow.Definition{def}, &engine.Options{Clock: fc, Rand: rnd})
	if err != nil {
		t.Fatal(err)
	}
	w := eng.StartWorkers(&engine.WorkerOptions{Workers: 1, Poll: time.Hour, Owner: "w"})
	t.Cleanup(func() { w.Stop(time.Second) })
	return &retryRig{eng: eng, w: w, clock: fc, f: f}
}

// waitFor waits (on the workers' goroutines, not on the clock) until cond
// holds of the run's events.
func (r *retryRig) waitFor(t testing.TB, id, what string, cond func([]store.Event) bool) []store.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := r.eng.Events(context.Background(), id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: events %+v", what, evs)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func retries(evs []store.Event) []store.Event {
	var out []store.Event
	for _, e := range evs {
		if e.Kind == store.EventRetry {
			out = append(out, e)
		}
	}
	return out
}

func nRetries(n int) func([]store.Event) bool {
	return func(evs []store.Event) bool { return len(retries(evs)) == n }
}

func lastState(state string) func([]store.Event) bool {
	return func(evs []store.Event) bool {
		return len(evs) > 0 && evs[len(evs)-1].To == state && evs[len(evs)-1].Kind == store.EventTransition
	}
}

// A task that fails twice, then succeeds, under max_attempts 5, backoff
// 2 s: two retry events naming the attempts, the second attempt at
// +2 s, the third 4 s later (never earlier: the fake clock moves only
// when the test says), then on_success fires.
func TestTaskRetriesWithBackoff(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(timerT0)
		f := &flaky{clock: fc, fails: 2}
		r := newRetryRig(t, b.New(t).Open(t), fc, f, retryFlow(t, f, workflow.RetryPolicy{MaxAttempts: 5, Backoff: 2 * time.Second, MaxBackoff: time.Minute}, true), nil)
		run, err := r.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		evs := r.waitFor(t, run.ID, "the first retry", nRetries(1))
		if got, want := retries(evs)[0].Reason, "Attempt 1 of 5 failed: boom 1. Attempt 2 starts at "+timerT0.Add(2*time.Second).Format(time.RFC3339)+"."; got != want {
			t.Fatalf("retry reason %q\nwant %q", got, want)
		}
		if e := retries(evs)[0]; e.Actor != "task" || e.To != "WORK" {
			t.Fatalf("retry event %+v", e)
		}
		if err := fc.BlockUntil(context.Background(), 1); err != nil { // the worker waits for the retry
			t.Fatal(err)
		}
		fc.Advance(2 * time.Second)
		evs = r.waitFor(t, run.ID, "the second retry", nRetries(2))
		if got := retries(evs)[1].Reason; !strings.HasPrefix(got, "Attempt 2 of 5 failed: boom 2. Attempt 3 starts at "+timerT0.Add(6*time.Second).Format(time.RFC3339)) {
			t.Fatalf("second retry reason %q", got)
		}
		if err := fc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		fc.Advance(4 * time.Second)
		r.waitFor(t, run.ID, "on_success", lastState("DONE"))
		calls := f.called()
		want := []time.Time{timerT0, timerT0.Add(2 * time.Second), timerT0.Add(6 * time.Second)}
		if len(calls) != 3 {
			t.Fatalf("%d attempts, want 3: %+v", len(calls), calls)
		}
		for i, c := range calls {
			if !c.at.Equal(want[i]) || c.attempt != i+1 || c.max != 5 || c.key != calls[0].key {
				t.Fatalf("attempt %d: %+v, want at %s, attempt %d of 5, one idempotency key", i+1, c, want[i], i+1)
			}
		}
	})
}

// A task that always fails under max_attempts 3: three attempts, then
// on_failure fires once; without on_failure the run fails only after the
// last attempt.
func TestTaskRetriesThenOnFailure(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		for _, onFailure := range []bool{true, false} {
			fc := clock.NewFake(timerT0)
			f := &flaky{clock: fc, fails: 100}
			st := b.New(t).Open(t)
			r := newRetryRig(t, st, fc, f, retryFlow(t, f, workflow.RetryPolicy{MaxAttempts: 3, Backoff: time.Second}, onFailure), nil)
			run, err := r.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 2; i++ {
				r.waitFor(t, run.ID, fmt.Sprint("retry ", i), nRetries(i))
				if err := fc.BlockUntil(context.Background(), 1); err != nil {
					t.Fatal(err)
				}
				got, _ := r.eng.GetRun(context.Background(), run.ID)
				if got.State != "WORK" || got.Status() != "processing" {
					t.Fatalf("between attempts the run is %s/%s", got.State, got.Status())
				}
				fc.Advance(time.Duration(1<<(i-1)) * time.Second)
			}
			var evs []store.Event
			if onFailure {
				evs = r.waitFor(t, run.ID, "on_failure", lastState("GAVE_UP"))
			} else {
				evs = r.waitFor(t, run.ID, "the run failing", func(evs []store.Event) bool { return evs[len(evs)-1].Kind == store.EventFailed })
				if got, _ := r.eng.GetRun(context.Background(), run.ID); got.Status() != "failed" || !strings.Contains(got.Snapshot.Error, "boom 3") {
					t.Fatalf("after the last attempt: %s %q", got.Status(), got.Snapshot.Error)
				}
			}
			if n := len(f.called()); n != 3 {
				t.Fatalf("%d attempts, want 3", n)
			}
			if n := len(retries(evs)); n != 2 {
				t.Fatalf("%d retry events, want 2", n)
			}
			r.w.Stop(time.Second)
		}
	})
}

// Jitter takes its random number from Options.Rand: with 0.5, the first
// wait of a 10 s backoff is 5 s.
func TestTaskRetryJitterUsesOptionsRand(t *testing.T) {
	fc := clock.NewFake(timerT0)
	f := &flaky{clock: fc, fails: 1}
	r := newRetryRig(t, backends.All()[0].New(t).Open(t), fc, f, retryFlow(t, f, workflow.RetryPolicy{MaxAttempts: 2, Backoff: 10 * time.Second, Jitter: true}, true), func() float64 { return 0.5 })
	run, _ := r.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
	evs := r.waitFor(t, run.ID, "the retry", nRetries(1))
	if got := retries(evs)[0].Reason; !strings.HasSuffix(got, "Attempt 2 starts at "+timerT0.Add(5*time.Second).Format(time.RFC3339)+".") {
		t.Fatalf("reason %q, want the attempt at +5s", got)
	}
	if err := fc.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(5 * time.Second)
	r.waitFor(t, run.ID, "on_success", lastState("DONE"))
}

// Retries survive a restart: the pending attempt is stored with its
// number and not-before time, and a new process runs it when it is due.
func TestTaskRetrySurvivesRestart(t *testing.T) {
	for _, b := range backends.All() {
		if !b.Durable {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			place := b.New(t)
			st := place.Open(t)
			fc := clock.NewFake(timerT0)
			f := &flaky{clock: fc, fails: 1}
			def := retryFlow(t, f, workflow.RetryPolicy{MaxAttempts: 4, Backoff: 3 * time.Second}, true)
			r := newRetryRig(t, st, fc, f, def, nil)
			run, _ := r.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
			r.waitFor(t, run.ID, "the retry", nRetries(1))
			r.w.Stop(time.Second)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			fc.Advance(3 * time.Second)
			r2 := newRetryRig(t, place.Open(t), fc, f, def, nil)
			r2.waitFor(t, run.ID, "on_success after the restart", lastState("DONE"))
			calls := f.called()
			if len(calls) != 2 || calls[1].attempt != 2 || !calls[1].at.Equal(timerT0.Add(3*time.Second)) {
				t.Fatalf("attempts %+v, want the second one after the restart, at +3s", calls)
			}
		})
	}
}

// A run that moves on while its task waits for a retry: the retry is
// stale and does nothing.
func TestTaskRetryStaleWhenTheRunMovedOn(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(timerT0)
		f := &flaky{clock: fc, fails: 100}
		st := b.New(t).Open(t)
		r := newRetryRig(t, st, fc, f, retryFlow(t, f, workflow.RetryPolicy{MaxAttempts: 5, Backoff: time.Second}, true), nil)
		run, _ := r.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
		r.waitFor(t, run.ID, "the retry", nRetries(1))
		if _, err := r.eng.Transition(context.Background(), run.ID, "cancel", nil, engine.TransitionOptions{Actor: "alice"}); err != nil {
			t.Fatal(err)
		}
		if err := fc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		fc.Advance(time.Second)
		// The stale task is claimed and finished without running.
		deadline := time.Now().Add(5 * time.Second)
		for {
			pending, err := st.PendingTasks(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d tasks still pending", pending)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if n := len(f.called()); n != 1 {
			t.Fatalf("%d attempts, want 1 (the retry of a run that moved on is void)", n)
		}
		got, _ := r.eng.GetRun(context.Background(), run.ID)
		if got.State != "DONE" {
			t.Fatalf("state %s", got.State)
		}
	})
}
