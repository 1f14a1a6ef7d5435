package main_test

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func actionsOf(f map[string]any) []string {
	var out []string
	ns, _ := f["next_states"].([]any)
	for _, n := range ns {
		out = append(out, n.(map[string]any)["action"].(string))
	}
	return out
}

// number-facts-v1 under a bare serve (exec off): input beyond the declared
// bounds is refused with a hint naming the bound, and the failed
// multiplication offers a way out, so the run can end.
func TestNumberFactsHasAWayOut(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	id := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}), 201).RunID
	r := jsonOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 2000000, "b": 5}), 400)
	if h, _ := r["hint"].(string); h != `Field "a" must be at most 1000000, got 2000000.` {
		t.Fatalf("out-of-bounds submit: %v", r)
	}
	jsonOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 6, "b": 0}), 400)
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 6, "b": 7}), 200)
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/multiply", nil), 200)
	f := waitRun(t, p, id, nil, 20*time.Second)
	if f["state"] != "FAILED" || !slices.Equal(actionsOf(f), []string{"retry", "change", "cancel"}) {
		t.Fatalf("after the refused task: %v", f)
	}
	// change goes back to SUBMIT for other numbers.
	if g := frameOf(t, p.do("POST", "/runs/"+id+"/transitions/change", nil), 200); g.State != "SUBMIT" {
		t.Fatalf("change: %+v", g)
	}
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 3, "b": 4}), 200)
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/multiply", nil), 200)
	if f := waitRun(t, p, id, nil, 20*time.Second); f["state"] != "FAILED" {
		t.Fatalf("second try: %v", f)
	}
	if g := frameOf(t, p.do("POST", "/runs/"+id+"/transitions/cancel", nil), 200); g.State != "CANCELLED" || g.Status != "completed" {
		t.Fatalf("cancel: %+v", g)
	}
}

// A workflow with a state no run can leave for a terminal state still
// serves (a benchmark's endless loop), with a warning naming it.
func TestServeWarnsAboutDeadEnds(t *testing.T) {
	p := serve(t, "--db", ":memory:", "testdata/loop.yaml")
	if log := p.stderr.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "no terminal state can be reached from state LOOP (path LOOP)") {
		t.Fatalf("no dead-end warning:\n%s", log)
	}
	id := frameOf(t, p.do("POST", "/runs", nil), 201).RunID
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/tick", map[string]any{"n": 1}), 200)
}
