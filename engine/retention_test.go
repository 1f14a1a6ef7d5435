package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// Prune deletes ended runs older than the cut-off, and nothing else.
func TestPruneDeletesOnlyOldEndedRuns(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	obs := newRecorder()
	e, err := engine.New(memstore.New(), []*workflow.Definition{examples.ConfigWizard()}, &engine.Options{Clock: clk, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	finish := func() string {
		r, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			action string
			input  map[string]any
		}{{"start", nil}, {"save", map[string]any{"value": "v"}}, {"confirm", nil}} {
			if _, err := e.Transition(ctx, r.ID, step.action, step.input, engine.TransitionOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return r.ID
	}
	oldDone := finish()
	oldActive, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(2 * time.Hour))
	newDone := finish()

	n, err := e.Prune(ctx, t0.Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1 (the old ended run)", n, err)
	}
	if _, err := e.GetRun(ctx, oldDone); protocol.ErrorCode(err) != protocol.ENotFound {
		t.Fatalf("pruned run: %v", err)
	}
	if got, want := obs.pruned(), []string{"config-wizard-v1 " + oldDone}; !slices.Equal(got, want) {
		t.Fatalf("the observer heard of prunes %q, want %q", got, want)
	}
	if _, err := e.Events(ctx, oldDone, 0, 0); protocol.ErrorCode(err) != protocol.ENotFound {
		t.Fatalf("pruned run's events: %v", err)
	}
	for _, id := range []string{oldActive.ID, newDone} {
		if _, err := e.GetRun(ctx, id); err != nil {
			t.Fatalf("run %s was pruned: %v", id, err)
		}
	}
	if n, err := e.Prune(ctx, t0.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("second Prune = %d, %v", n, err)
	}

	// KeepRuns prunes by itself, and returns when its context ends.
	clk.Set(t0.Add(100 * time.Hour))
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	pruned := make(chan int, 10)
	go func() {
		e.KeepRuns(kctx, time.Hour, 10*time.Millisecond, func(n int, err error) { pruned <- n })
		close(done)
	}()
	select {
	case n := <-pruned:
		if n != 1 {
			t.Fatalf("KeepRuns pruned %d, want 1 (the newer ended run, now old)", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("KeepRuns pruned nothing")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("KeepRuns did not return when its context ended")
	}
	if _, err := e.GetRun(ctx, oldActive.ID); err != nil {
		t.Fatalf("an active run was pruned: %v", err)
	}
}

// pruneBatches is a store whose PruneDeliveries deletes up to left
// deliveries, at most the limit each call, and writes down the limits
// it was called with and the cut-offs.
type pruneBatches struct {
	*memstore.Store
	left    int
	err     error
	limits  []int
	cutoffs []time.Time
}

func (p *pruneBatches) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	p.limits, p.cutoffs = append(p.limits, limit), append(p.cutoffs, before)
	if p.err != nil {
		return 0, p.err
	}
	k := min(limit, p.left)
	p.left -= k
	return k, nil
}

// PruneDeliveries deletes in batches of DeliveryPruneBatch until a batch
// comes back short, and reports a store error with what it deleted
// before it.
func TestPruneDeliveriesInBatches(t *testing.T) {
	ctx := context.Background()
	const b = engine.DeliveryPruneBatch
	for _, tc := range []struct {
		stored int
		want   []int
	}{{0, []int{b}}, {b / 2, []int{b}}, {b, []int{b, b}}, {2*b + b/2, []int{b, b, b}}} {
		st := &pruneBatches{Store: memstore.New(), left: tc.stored}
		e, err := engine.New(st, []*workflow.Definition{examples.ConfigWizard()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cut := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		n, err := e.PruneDeliveries(ctx, cut)
		if err != nil || n != tc.stored || !slices.Equal(st.limits, tc.want) {
			t.Fatalf("%d stored: PruneDeliveries = %d, %v in calls of %v; want %d in calls of %v", tc.stored, n, err, st.limits, tc.stored, tc.want)
		}
		for _, c := range st.cutoffs {
			if !c.Equal(cut) {
				t.Fatalf("a batch was cut off at %v, want %v", c, cut)
			}
		}
	}
	st := &pruneBatches{Store: memstore.New(), err: errors.New("disk full")}
	e, err := engine.New(st, []*workflow.Definition{examples.ConfigWizard()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.PruneDeliveries(ctx, time.Now()); err == nil || n != 0 || !errors.Is(err, st.err) {
		t.Fatalf("PruneDeliveries on a failing store = %d, %v", n, err)
	}
}

// KeepDeliveries prunes at once, then every interval by the engine's
// clock, with the cut-off keep before its time, and returns when its
// context ends.
func TestKeepDeliveriesFollowsTheClock(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	st := &pruneBatches{Store: memstore.New()}
	e, err := engine.New(st, []*workflow.Definition{examples.ConfigWizard()}, &engine.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		e.KeepDeliveries(kctx, time.Hour, time.Minute, nil)
		close(done)
	}()
	for range 3 {
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	want := []time.Time{t0.Add(-time.Hour), t0.Add(-59 * time.Minute), t0.Add(-58 * time.Minute), t0.Add(-57 * time.Minute)}
	if !slices.EqualFunc(st.cutoffs, want, time.Time.Equal) {
		t.Fatalf("cut-offs %v, want %v", st.cutoffs, want)
	}
}

// prunedWhileRead is a store whose delivery is deleted (by retention)
// between the read of the delivery and the read of its attempts; its
// subscription still exists.
type prunedWhileRead struct{ *memstore.Store }

func (prunedWhileRead) GetSubscription(ctx context.Context, id string) (store.Subscription, error) {
	return store.Subscription{ID: id}, nil
}

func (prunedWhileRead) GetDelivery(ctx context.Context, sub, id string) (store.Delivery, error) {
	return store.Delivery{ID: id, SubscriptionID: sub, Status: store.DeliveryDelivered, Attempts: 1}, nil
}

func (prunedWhileRead) DeliveryAttempts(ctx context.Context, id string, after, limit int) ([]store.DeliveryAttempt, error) {
	return nil, fmt.Errorf("memstore: delivery %s: %w", id, store.ErrNotFound)
}

// A delivery pruned while it is read is not found, as one pruned before:
// not an internal error.
func TestDeliveryPrunedWhileReadIsNotFound(t *testing.T) {
	e, err := engine.New(prunedWhileRead{memstore.New()}, []*workflow.Definition{examples.ConfigWizard()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.WebhookDelivery(context.Background(), "wh_1", "dlv_1", 0, 0)
	if protocol.ErrorCode(err) != protocol.ENotFound || !strings.Contains(protocol.ErrorHint(err), "retention") {
		t.Fatalf("a delivery pruned while read: %v, want not found, naming retention", err)
	}
}

// A server prunes runs and deliveries every quarter of the retention, at least
// every 10 minutes and at most every 100ms.
func TestRetentionInterval(t *testing.T) {
	for keep, want := range map[time.Duration]time.Duration{
		time.Millisecond: 100 * time.Millisecond, 200 * time.Millisecond: 100 * time.Millisecond, time.Second: 250 * time.Millisecond,
		20 * time.Minute: 5 * time.Minute, 40 * time.Minute: 10 * time.Minute, 7 * 24 * time.Hour: 10 * time.Minute,
	} {
		if got := engine.RetentionInterval(keep); got != want {
			t.Errorf("RetentionInterval(%s) = %s, want %s", keep, got, want)
		}
	}
}
