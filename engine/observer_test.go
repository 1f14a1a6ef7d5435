package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// recorder is an Observer that writes down what it is told.
type recorder struct {
	mu       sync.Mutex
	commits  []string // "workflow kind action"
	prunes   []string // "workflow run"
	notified chan struct{}
}

func newRecorder() *recorder { return &recorder{notified: make(chan struct{}, 1000)} }

func (r *recorder) Committed(workflowID, kind, action string) {
	r.mu.Lock()
	r.commits = append(r.commits, workflowID+" "+kind+" "+action)
	r.mu.Unlock()
	r.notified <- struct{}{}
}

func (r *recorder) Pruned(workflowID, runID string) {
	r.mu.Lock()
	r.prunes = append(r.prunes, workflowID+" "+runID)
	r.mu.Unlock()
}

func (r *recorder) committed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.commits)
}

func (r *recorder) pruned() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.prunes)
}

// The observers hear of every change this process commits, with its
// workflow, kind and action, from the moment they are added; refused
// transitions are not changes. A nil observer is no observer.
func TestObserversHearCommittedChanges(t *testing.T) {
	ctx := context.Background()
	first := newRecorder()
	e, err := engine.New(memstore.New(), []*workflow.Definition{examples.ConfigWizard()}, &engine.Options{Observer: first})
	if err != nil {
		t.Fatal(err)
	}
	e.Observe(nil)
	r, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	late := newRecorder()
	e.Observe(late)
	if _, err := e.Transition(ctx, r.ID, "start", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Transition(ctx, r.ID, "nope", nil, engine.TransitionOptions{}); err == nil {
		t.Fatal("an action not offered was applied")
	}
	want := []string{"config-wizard-v1 created ", "config-wizard-v1 transition start"}
	if got := first.committed(); !slices.Equal(got, want) {
		t.Errorf("the first observer heard %q, want %q", got, want)
	}
	if got := late.committed(); !slices.Equal(got, want[1:]) {
		t.Errorf("an observer added later heard %q, want %q", got, want[1:])
	}
}

// A background task that fails the run is reported as a change of kind
// failed.
func TestObserverHearsFailedTasks(t *testing.T) {
	b := workflow.New("fail-v1", "READY")
	b.State("READY").Hint("Go.")
	b.State("WORK").Hint("Working.").Task(func(context.Context, *workflow.TaskContext) (string, error) {
		return "", errors.New("disk full")
	}, "ok", "")
	b.State("DONE").Hint("Done.")
	b.Transition("READY", "go", "WORK")
	b.Transition("WORK", "ok", "DONE")
	obs := newRecorder()
	e, err := engine.New(memstore.New(), []*workflow.Definition{b.MustBuild()}, &engine.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	startWorking(t, e, "", "go")
	want := []string{"fail-v1 created ", "fail-v1 transition go", "fail-v1 " + store.EventFailed + " "}
	for range want {
		select {
		case <-obs.notified:
		case <-time.After(10 * time.Second):
			t.Fatalf("heard %q, waiting for %q", obs.committed(), want)
		}
	}
	if got := obs.committed(); !slices.Equal(got, want) {
		t.Fatalf("heard %q, want %q", got, want)
	}
}

// PureState tells which states' frames are a function of the stored run:
// not when a leaving transition has a Go guard or an expression calling
// now() (either may change its verdict with the data unchanged), nor for
// what the engine does not serve.
func TestPureState(t *testing.T) {
	w := workflow.New("pure-v1", "PLAIN")
	w.State("PLAIN").Hint("No guard.")
	w.State("DATA").Hint("A guard on the data.")
	w.State("CLOCK").Hint("A guard on the clock.")
	w.State("GO").Hint("A Go guard.")
	w.State("END").Hint("Done.")
	w.Transition("PLAIN", "next", "DATA")
	w.Transition("DATA", "next", "CLOCK").GuardExpr(`data.n > 1`, "n is too small")
	w.Transition("CLOCK", "next", "GO").GuardExpr(`now().Year() > 2000`, "too early")
	w.Transition("CLOCK", "skip", "END")
	w.Transition("GO", "next", "END").Guard(func(map[string]any) (bool, string) { return true, "" })
	e, err := engine.New(memstore.New(), []*workflow.Definition{w.MustBuild()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		workflow, state string
		pure            bool
	}{
		{"pure-v1", "PLAIN", true}, {"pure-v1", "DATA", true}, {"pure-v1", "END", true},
		{"pure-v1", "CLOCK", false}, {"pure-v1", "GO", false},
		{"pure-v1", "NOWHERE", false}, {"other-v1", "PLAIN", false},
	} {
		if got := e.PureState(c.workflow, c.state); got != c.pure {
			t.Errorf("PureState(%s, %s) = %v, want %v", c.workflow, c.state, got, c.pure)
		}
	}
}
