package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store/memstore"
)

// narrowStore hides everything of a store but what the engine declares
// it needs (engine.Store): no ledger, no Close, no optional capability.
type narrowStore struct{ engine.Store }

func newNarrowEngine(t *testing.T) *engine.Engine {
	t.Helper()
	eng, err := engine.New(narrowStore{memstore.New()}, examples.All(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// The engine runs on the narrow store it declares, and the use cases work
// on it: Submit in its documented order, Lookup in a scope, Follow.
func TestUseCasesOnTheNarrowStore(t *testing.T) {
	eng := newNarrowEngine(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	run, err := eng.StartRun(ctx, "config-wizard-v1", nil, engine.StartOptions{Actor: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := eng.Ping(ctx); ok || err != nil {
		t.Fatalf("a store without a readiness check: Ping = %v, %v", ok, err)
	}
	if _, err := eng.Lookup(ctx, run.ID, "expense-approval-v1"); protocol.ErrorCode(err) != protocol.ENotFound {
		t.Fatalf("a run of another workflow in scope: %v", err)
	}
	order := []struct {
		req  engine.TransitionRequest
		code string
		hint string
	}{
		{engine.TransitionRequest{RunID: "nope", Action: "start", IfMatch: "x", Body: []byte("[")}, protocol.ENotFound, "Run not found"},
		{engine.TransitionRequest{RunID: run.ID, Action: "start", IfMatch: "x", Body: []byte("[")}, protocol.EInvalid, "If-Match"},
		{engine.TransitionRequest{RunID: run.ID, Action: "save", IfMatch: `"9"`, Body: []byte("[")}, protocol.EForbidden, "start"},
		{engine.TransitionRequest{RunID: run.ID, Action: "start", IfMatch: `"9"`, Body: []byte("[")}, protocol.EInvalid, ""},
		{engine.TransitionRequest{RunID: run.ID, Action: "start", IfMatch: `"9"`}, protocol.EConflict, "version 1"},
		{engine.TransitionRequest{RunID: run.ID, Action: "start", IfMatch: `W/"1"`}, protocol.EConflict, "weak"},
		{engine.TransitionRequest{RunID: run.ID, Action: "start", Scope: "expense-approval-v1"}, protocol.ENotFound, "does not belong"},
	}
	for _, o := range order {
		_, err := eng.Submit(ctx, o.req)
		if protocol.ErrorCode(err) != o.code || !strings.Contains(protocol.ErrorHint(err), o.hint) {
			t.Fatalf("Submit %+v = %v, want %s with %q", o.req, err, o.code, o.hint)
		}
	}
	fl, err := eng.Follow(ctx, engine.FollowRequest{RunID: run.ID, Base: "b"})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for it := range fl.Items(ctx) {
		if it.Frame == nil {
			t.Fatalf("unexpected item %+v", it)
		}
		f, err := it.Frame.Frame()
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, f.State)
		switch f.State {
		case "INITIAL":
			if _, err := eng.Submit(ctx, engine.TransitionRequest{RunID: run.ID, Action: "exit", IfMatch: `"1"`}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Join(states, " ") != "INITIAL CANCELLED" {
		t.Fatalf("followed %v", states)
	}
	// Resuming past the run's end is refused before anything is sent;
	// resuming at its end yields nothing.
	if _, err := eng.Follow(ctx, engine.FollowRequest{RunID: run.ID, After: 3, Resume: true}); protocol.ErrorCode(err) != protocol.EInvalid {
		t.Fatalf("resume ahead: %v", err)
	}
	fl, err = eng.Follow(ctx, engine.FollowRequest{RunID: run.ID, After: 2, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	for it := range fl.Items(ctx) {
		t.Fatalf("resumed at the end, got %+v", it)
	}
}
