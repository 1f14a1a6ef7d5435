package server_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/asmp-dev/asmp/workflow"
)

// holdWorkflow's WORK state runs a task that finishes only when release
// is closed, so a test decides when the task is running.
func holdWorkflow(release <-chan struct{}) *workflow.Definition {
	b := workflow.New("hold-v1", "READY")
	b.State("READY").Hint("Go.")
	b.State("WORK").Hint("Working.").Task(func(ctx context.Context, tc *workflow.TaskContext) (string, error) {
		select {
		case <-release:
			return "", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, "ok", "")
	b.State("REVIEW").Hint("Review the work.")
	b.State("DONE").Hint("Done.")
	b.Transition("READY", "go", "WORK")
	b.Transition("WORK", "ok", "REVIEW")
	b.Transition("WORK", "cancel", "DONE")
	b.Transition("REVIEW", "finish", "DONE")
	return b.MustBuild()
}

// An action refused while a background task runs says so, and names what
// is offered meanwhile; once the task is done, the refusal no longer
// mentions a task.
func TestRefusalWhileTaskRunsSaysSo(t *testing.T) {
	release := make(chan struct{})
	e := start(t, setup{defs: []*workflow.Definition{holdWorkflow(release)}})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	id := e.startRun("").RunID
	sc := e.openStream("/runs/" + id + "/stream")
	sc.next(t, streamWait)
	if f := frame(t, e.fire(id, "go", nil), 200); f.State != "WORK" || f.Status != "processing" {
		t.Fatalf("go -> %s [%s], want WORK [processing]", f.State, f.Status)
	}
	for _, action := range []string{"ok", "finish"} { // the task's own action, and one of another state
		r := e.fire(id, action, nil)
		if r.status != 403 {
			t.Fatalf("%s while the task runs: %d %s", action, r.status, r.body)
		}
		want := `Action "` + action + `" is not available in state WORK. Offered actions: cancel. A background task is running; watch the stream for its result.`
		if h := r.hint(t); h != want {
			t.Fatalf("%s while the task runs: hint %q\nwant %q", action, h, want)
		}
		if m := r.json(t); m["error"] != "forbidden" || m["action"] != action || m["state"] != "WORK" || !reflect.DeepEqual(m["allowed"], []any{"cancel"}) {
			t.Fatalf("%s while the task runs: body %s", action, r.body)
		}
	}

	close(release)
	released = true
	for {
		m := sc.next(t, streamWait)
		if m["state"] == "REVIEW" {
			break
		}
	}
	r := e.fire(id, "ok", nil)
	want := `Action "ok" is not available in state REVIEW. Offered actions: finish.`
	if h := r.hint(t); r.status != 403 || h != want {
		t.Fatalf("ok after the task: %d, hint %q\nwant %q", r.status, h, want)
	}
}
