package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

func loop(t *testing.T) *engine.Engine { return loopOn(t, memstore.New(), false) }

// loopOn returns an engine on st serving loop-v1: LOOP --tick--> LOOP,
// where tick expects an integer n when expects is set.
func loopOn(tb testing.TB, st store.Store, expects bool) *engine.Engine {
	tb.Helper()
	w := workflow.New("loop-v1", "LOOP")
	w.State("LOOP").Hint("Tick as often as you like.")
	tr := w.Transition("LOOP", "tick", "LOOP")
	if expects {
		tr.Expect("n", "integer")
	}
	e, err := engine.New(st, []*workflow.Definition{w.MustBuild()}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// A subscriber that never reads neither blocks transitions nor other
// subscribers; it is cut off and told so.
func TestSlowSubscriberIsDroppedNotBlocking(t *testing.T) {
	e := loop(t)
	ctx := context.Background()
	r, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slow := e.Hub().Subscribe(r.ID)
	fast := e.Hub().Subscribe(r.ID)
	got := make(chan int64, 10000)
	go func() {
		for m := range fast.C {
			got <- m.Event.Seq
		}
		close(got)
	}()
	n := engine.DefaultSubscriberBuffer * 2
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The writer waits for the fast subscriber after each transition
		// (so it never falls behind), never for the slow one.
		for i := 0; i < n; i++ {
			if _, err := e.Transition(ctx, r.ID, "tick", nil, engine.TransitionOptions{}); err != nil {
				t.Error(err)
				return
			}
			select {
			case seq := <-got:
				if seq != int64(i+2) {
					t.Errorf("fast subscriber got %d, want %d", seq, i+2)
					return
				}
			case <-time.After(5 * time.Second):
				t.Errorf("fast subscriber stalled at %d", i+2)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("transitions blocked behind a slow subscriber")
	}
	// The slow one was cut off after its buffer filled.
	count := 0
	for range slow.C {
		count++
	}
	if !slow.Dropped() || count != engine.DefaultSubscriberBuffer {
		t.Fatalf("slow subscriber: dropped=%v after %d messages", slow.Dropped(), count)
	}
	fast.Close()
	if e.Hub().Subscribers() != 0 {
		t.Fatalf("%d subscribers left", e.Hub().Subscribers())
	}
}
