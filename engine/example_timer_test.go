package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// The built-in expense approval escalates a claim nobody reviews: a run
// left in REVIEW for the review timeout moves to ESCALATED as actor
// "timer" (not a second before), where a manager approves or rejects it,
// so the run still ends; a claim reviewed in time is never escalated.
func TestExpenseApprovalEscalatesAnUnreviewedClaim(t *testing.T) {
	const timeout = 2 * time.Hour
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		ctx := context.Background()
		fc := clock.NewFake(timerT0)
		eng, err := engine.New(b.New(t).Open(t), []*workflow.Definition{examples.ExpenseApprovalWith(examples.Options{ReviewTimeout: timeout})}, &engine.Options{Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		fire := func() int {
			t.Helper()
			n, err := eng.FireDueTimers(ctx, &engine.TimerOptions{Owner: "test"})
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		submitted := func(amount int) *engine.Run {
			t.Helper()
			r, err := eng.StartRun(ctx, "expense-approval-v1", nil, engine.StartOptions{Actor: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			r, err = eng.Transition(ctx, r.ID, "submit", map[string]any{"amount": amount, "description": "Taxi"}, engine.TransitionOptions{Actor: "alice"})
			if err != nil || r.State != "REVIEW" {
				t.Fatalf("submit: %v, %+v", err, r)
			}
			return r
		}
		state := func(id string) *engine.Run {
			t.Helper()
			r, err := eng.GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		unreviewed, large, reviewed := submitted(42), submitted(5000), submitted(42)
		fc.Advance(time.Hour)
		if _, err := eng.Transition(ctx, reviewed.ID, "approve", nil, engine.TransitionOptions{Actor: "bob"}); err != nil {
			t.Fatal(err)
		}
		fc.Advance(timeout - time.Hour - time.Second)
		if n := fire(); n != 0 {
			t.Fatalf("%d timers fired a second before the review timeout", n)
		}
		if s := state(unreviewed.ID).State; s != "REVIEW" {
			t.Fatalf("a second before the timeout the claim is in %s", s)
		}
		fc.Advance(time.Second)
		if n := fire(); n != 2 {
			t.Fatalf("%d timers fired at the review timeout, want 2 (the reviewed claim's is void)", n)
		}
		for _, id := range []string{unreviewed.ID, large.ID} {
			r := state(id)
			if r.State != "ESCALATED" || r.Status() != protocol.StatusActive {
				t.Fatalf("after the timeout: %s, %s; want ESCALATED, active", r.State, r.Status())
			}
			te := timerEvents(eventsOf(t, eng, id))
			if len(te) != 1 || te[0].Action != "escalate_to_manager" || te[0].From != "REVIEW" || te[0].To != "ESCALATED" || !te[0].Time.Equal(timerT0.Add(timeout)) {
				t.Fatalf("timer events %+v, want one escalate_to_manager REVIEW→ESCALATED at %s", te, timerT0.Add(timeout))
			}
		}
		if s := state(reviewed.ID).State; s != "PAYING" {
			t.Fatalf("the claim reviewed in time is in %s", s)
		}
		if te := timerEvents(eventsOf(t, eng, reviewed.ID)); len(te) != 0 {
			t.Fatalf("the claim reviewed in time has timer events %+v", te)
		}
		// The manager decides, whatever the amount, and the run ends.
		r, err := eng.Transition(ctx, unreviewed.ID, "reject", map[string]any{"reason": "Too late"}, engine.TransitionOptions{Actor: "carol"})
		if err != nil || r.State != "REJECTED" || r.Status() != protocol.StatusCompleted {
			t.Fatalf("manager reject: %v, %+v", err, r)
		}
		if r, err := eng.Transition(ctx, large.ID, "approve", nil, engine.TransitionOptions{Actor: "carol"}); err != nil || r.State != "PAYING" {
			t.Fatalf("manager approve of 5000: %v, %+v", err, r)
		}
	})
}

func eventsOf(t *testing.T, eng *engine.Engine, id string) []store.Event {
	t.Helper()
	evs, err := eng.Events(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
