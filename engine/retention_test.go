package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
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
