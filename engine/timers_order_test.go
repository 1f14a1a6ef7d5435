package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// gatedReads is a store whose first read of one run waits for a gate:
// a timer's firing held up before it decides.
type gatedReads struct {
	*memstore.Store
	run           string
	gate, blocked chan struct{}
	reads         atomic.Int32
	once          sync.Once
}

func (g *gatedReads) GetRun(ctx context.Context, id string) (store.Run, error) {
	if id == g.run && g.reads.Add(1) == 1 {
		g.once.Do(func() { close(g.blocked) })
		<-g.gate
	}
	return g.Store.GetRun(ctx, id)
}

// Two due timers of one run claimed by two claims (the earlier still
// firing when the later is claimed, as after a downtime with a backlog)
// fire one after the other in due order: the later waits behind the
// earlier, which moves the run on, and is then void. Fired at once, the
// later (not held up) would move the run first.
func TestTimersOfOneRunInTwoClaimsFireInDueOrder(t *testing.T) {
	wb := workflow.New("two-v1", "WAIT")
	wb.State("WAIT").After(time.Second, "escalate").After(2*time.Second, "expire")
	wb.State("ESCALATED")
	wb.State("EXPIRED")
	wb.Transition("WAIT", "escalate", "ESCALATED")
	wb.Transition("WAIT", "expire", "EXPIRED")
	st := &gatedReads{Store: memstore.New(), gate: make(chan struct{}), blocked: make(chan struct{})}
	fc := clock.NewFake(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	e, err := New(st, []*workflow.Definition{wb.MustBuild()}, &Options{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := e.StartRun(ctx, "two-v1", nil, StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st.run = r.ID
	ts, err := st.RunTimers(ctx, r.ID)
	if err != nil || len(ts) != 2 || ts[0].Action != "escalate" {
		t.Fatalf("timers %+v, %v", ts, err)
	}
	fc.Advance(3 * time.Second)
	o := e.timerDefaults(nil)
	f := newFirer(o)
	e.fireAll(ctx, o, f, ts[:1], nil) // the first claim: escalate, held up in its read
	<-st.blocked
	e.fireAll(ctx, o, f, ts[1:], nil) // the second claim: expire
	f.mu.Lock()
	queued := len(f.behind[r.ID])
	f.mu.Unlock()
	if queued != 1 {
		// Fired at once: let it move the run before escalate goes on.
		for st.reads.Load() < 2 {
			time.Sleep(time.Millisecond)
		}
		for {
			cur, err := e.GetRun(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.State != "WAIT" {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(st.gate)
	f.wait()
	cur, err := e.GetRun(ctx, r.ID)
	if err != nil || cur.State != "ESCALATED" {
		t.Fatalf("run in %s (%v), want ESCALATED: the later timer fired first", cur.State, err)
	}
	if left, _ := st.RunTimers(ctx, r.ID); len(left) != 0 {
		t.Fatalf("timers left %+v, want none (expire void)", left)
	}
}
