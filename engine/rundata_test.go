package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// notes-v1: NOTES --a(a: string)--> NOTES, --b(b: string)--> NOTES,
// --stay--> NOTES, --mark--> MARKED (milestone "marked") --back--> NOTES, and --work--> WORK, whose task returns result as its
// output, then DONE (or FAILED on failure).
func notesDef(result string) *workflow.Definition {
	w := workflow.New("notes-v1", "NOTES")
	w.State("NOTES").Hint("Write notes.")
	w.State("MARKED").Hint("Marked.").Milestone("marked")
	w.State("WORK").Hint("Working.").Task(func(_ context.Context, tc *workflow.TaskContext) (string, error) {
		tc.Result = result
		return "", nil
	}, "ok", "broke").TaskOutput("result")
	w.State("DONE").Hint("Done.")
	w.State("FAILED").Hint("The task failed.")
	w.Transition("NOTES", "a", "NOTES").Expect("a", "string")
	w.Transition("NOTES", "b", "NOTES").Expect("b", "string")
	w.Transition("NOTES", "stay", "NOTES")
	w.Transition("NOTES", "mark", "MARKED")
	w.Transition("MARKED", "back", "NOTES")
	w.Transition("NOTES", "work", "WORK")
	w.Transition("WORK", "ok", "DONE")
	w.Transition("WORK", "broke", "FAILED")
	return w.MustBuild()
}

func notesEngine(t *testing.T, st store.Store, limit int64, result string) *engine.Engine {
	t.Helper()
	e, err := engine.New(st, []*workflow.Definition{notesDef(result)}, &engine.Options{MaxRunData: limit})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func wantTooLarge(t *testing.T, err error, limit int64) {
	t.Helper()
	if protocol.ErrorCode(err) != protocol.ETooLarge {
		t.Fatalf("err = %v, want %s", err, protocol.ETooLarge)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Fields["limit_bytes"] != limit || pe.Fields["size_bytes"].(int64) <= limit {
		t.Fatalf("details %v: want limit_bytes %d and the size over it", pe.Fields, limit)
	}
	if h := protocol.ErrorHint(err); !strings.Contains(h, "--max-run-data") {
		t.Fatalf("hint %q does not name the limit", h)
	}
}

// Many transitions, each within the body limit, cannot grow a run's data
// past the bound: the one that would is refused and writes nothing.
func TestRunDataIsBounded(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	e := notesEngine(t, st, 1000, "")
	r, err := e.StartRun(ctx, "notes-v1", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Transition(ctx, r.ID, "a", map[string]any{"a": strings.Repeat("x", 600)}, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = e.Transition(ctx, r.ID, "b", map[string]any{"b": strings.Repeat("y", 600)}, engine.TransitionOptions{})
	wantTooLarge(t, err, 1000)
	got, err := e.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || got.Data["b"] != nil {
		t.Fatalf("the refused transition was written: version %d, data %v", got.Version, got.Data)
	}
	if evs, _ := e.Events(ctx, r.ID, 0, 0); len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	// Within the bound again, it moves on.
	if _, err := e.Transition(ctx, r.ID, "b", map[string]any{"b": strings.Repeat("y", 300)}, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	// The initial data counts too.
	_, err = e.StartRun(ctx, "notes-v1", map[string]any{"a": strings.Repeat("x", 1000)}, engine.StartOptions{})
	wantTooLarge(t, err, 1000)
}

// Milestones, appended at every entry into a state that declares one,
// count with the data: a loop through such a state stops at the bound.
func TestMilestonesAreBounded(t *testing.T) {
	ctx := context.Background()
	e := notesEngine(t, memstore.New(), 200, "")
	r, err := e.StartRun(ctx, "notes-v1", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("milestones grew past the bound")
		}
		_, err := e.Transition(ctx, r.ID, "mark", nil, engine.TransitionOptions{})
		if err != nil {
			wantTooLarge(t, err, 200)
			break
		}
		if _, err := e.Transition(ctx, r.ID, "back", nil, engine.TransitionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A run stored larger under a higher bound stays readable, and moves on
// by transitions that do not make it larger.
func TestRunAboveTheBoundStaysReadable(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	big := notesEngine(t, st, 1<<20, "")
	r, err := big.StartRun(ctx, "notes-v1", map[string]any{"a": strings.Repeat("x", 5000)}, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := notesEngine(t, st, 1000, "")
	got, err := e.GetRun(ctx, r.ID)
	if err != nil || len(got.Data["a"].(string)) != 5000 {
		t.Fatalf("GetRun: %v", err)
	}
	if _, err := e.Transition(ctx, r.ID, "stay", nil, engine.TransitionOptions{}); err != nil {
		t.Fatalf("a transition keeping the run's size: %v", err)
	}
	if _, err := e.Transition(ctx, r.ID, "a", map[string]any{"a": strings.Repeat("x", 4000)}, engine.TransitionOptions{}); err != nil {
		t.Fatalf("a transition making the run smaller: %v", err)
	}
	_, err = e.Transition(ctx, r.ID, "b", map[string]any{"b": strings.Repeat("y", 2000)}, engine.TransitionOptions{})
	wantTooLarge(t, err, 1000)
}

// A task whose result would make the run too large has failed: its
// failure action fires, the result is not kept, and the reason names
// the limit.
func TestTaskResultIsBounded(t *testing.T) {
	e := notesEngine(t, memstore.New(), 1000, strings.Repeat("r", 2000))
	got := taskDone(t, e, startWorking(t, e, "notes-v1", "work"))
	if got.State != "FAILED" || got.Data["result"] != nil || !strings.Contains(got.Snapshot.Error, "--max-run-data") {
		t.Fatalf("state %s, data %v, error %q: want FAILED without the result, the reason naming the limit", got.State, got.Data, got.Snapshot.Error)
	}
}

// startWorking starts task workers on e until the test ends, starts a run
// of workflowID and fires action ("" = none) to reach its task; it
// returns the run's id.
func startWorking(t *testing.T, e *engine.Engine, workflowID, action string) string {
	t.Helper()
	workers := e.StartWorkers(&engine.WorkerOptions{Workers: 1, Poll: 10 * time.Millisecond})
	t.Cleanup(func() { workers.Stop(time.Second) })
	r, err := e.StartRun(context.Background(), workflowID, nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if action != "" {
		if _, err := e.Transition(context.Background(), r.ID, action, nil, engine.TransitionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return r.ID
}

// taskDone waits until the run's task has ended (the run left WORK, or
// failed in it) and returns the run.
func taskDone(t *testing.T, e *engine.Engine, id string) *engine.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := e.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != "WORK" || got.Snapshot.Status == protocol.StatusFailed {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The stored reason of a failed task, which quotes its error, is bounded.
func TestFailureReasonIsBounded(t *testing.T) {
	w := workflow.New("fail-v1", "WORK")
	w.State("WORK").Hint("Working.").Task(func(context.Context, *workflow.TaskContext) (string, error) {
		return "", errors.New(strings.Repeat("e", 100_000))
	}, "ok", "")
	w.State("DONE").Hint("Done.")
	w.Transition("WORK", "ok", "DONE")
	e, err := engine.New(memstore.New(), []*workflow.Definition{w.MustBuild()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := taskDone(t, e, startWorking(t, e, "", ""))
	if n := len(got.Snapshot.Error); got.Snapshot.Status != protocol.StatusFailed || n > 4100 || !strings.HasPrefix(got.Snapshot.Error, "The background task of state WORK failed: eee") {
		t.Fatalf("status %s, stored reason of %d bytes: %.80q", got.Snapshot.Status, n, got.Snapshot.Error)
	}
}
