package server_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/workflow"
)

func TestVisualize(t *testing.T) {
	e := start(t, setup{})
	id := e.startRun("").RunID
	frame(t, e.fire(id, "start", nil), 200)
	r := e.do("GET", "/visualize?run_id="+id, nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("visualize: %d %s", r.status, r.header.Get("Content-Type"))
	}
	page := string(r.body)
	// The current state is highlighted, and only it.
	if !regexp.MustCompile(`<g class="state current" data-state="CONFIGURE">`).MatchString(page) || strings.Count(page, "state current") != 1 {
		t.Fatalf("CONFIGURE is not the one highlighted state:\n%s", page)
	}
	for _, st := range []string{"INITIAL", "CONFIRM", "DONE", "CANCELLED"} {
		if !strings.Contains(page, `data-state="`+st+`"`) {
			t.Errorf("state %s missing from the diagram", st)
		}
	}
	for _, label := range []string{">start<", ">save {value}<", ">confirm<", ">cancel<"} {
		if !strings.Contains(page, label) {
			t.Errorf("transition label %s missing", label)
		}
	}
	// Works offline: nothing is loaded from anywhere.
	for _, bad := range []string{"<script", "src=\"http", "href=\"http://cdn", "@import", "<link"} {
		if strings.Contains(page, bad) {
			t.Errorf("page loads external content (%s)", bad)
		}
	}
	if !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("CSP = %q", r.header.Get("Content-Security-Policy"))
	}
	// A workflow without a run; unknown workflow or run are 404 with hints.
	if r := e.do("GET", "/visualize?workflow_id=expense-approval-v1", nil); r.status != 200 || !strings.Contains(string(r.body), `data-state="PAYING"`) || strings.Contains(string(r.body), "state current") {
		t.Fatalf("workflow diagram: %d", r.status)
	}
	if r := e.do("GET", "/visualize?workflow_id=nope-v1", nil); r.status != 404 || !strings.Contains(r.hint(t), "Workflow not found") {
		t.Fatalf("unknown workflow: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/visualize?run_id=nope", nil); r.status != 404 {
		t.Fatalf("unknown run: %d", r.status)
	}
	if !strings.Contains(page, "<title>Start the config wizard.</title>") {
		t.Errorf("state hints are not shown as tooltips")
	}
}

// Hints, descriptions and labels are text, never markup.
func TestVisualizeEscapes(t *testing.T) {
	b := workflow.New("hostile-v1", "A").Description(`<img src=x onerror=alert(1)>`)
	b.State("A").Hint(`<script>alert("hint")</script>`)
	b.State("B").Hint("b")
	b.Transition("A", "go", "B").Expect(`<b>field</b>`, "string")
	e := start(t, setup{defs: []*workflow.Definition{b.MustBuild()}})
	page := string(e.do("GET", "/visualize", nil).body)
	for _, raw := range []string{"<script>", "<img", "<b>field"} {
		if strings.Contains(page, raw) {
			t.Errorf("unescaped %q in the page", raw)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;") || !strings.Contains(page, "&lt;b&gt;field") {
		t.Errorf("escaped text missing:\n%s", page)
	}
}

// A run that entered a milestone state twice (a retry) shows the
// milestone once; the diagram has a legend for its dashed edges.
func TestVisualizeMilestonesOnceAndLegend(t *testing.T) {
	b := workflow.New("retry-v1", "A")
	b.State("A").Hint("a")
	b.State("B").Hint("b").Milestone("Tried")
	b.State("END").Hint("end")
	b.Transition("A", "try", "B")
	b.Transition("B", "retry", "A").GuardExpr("true", "never refused")
	b.Transition("B", "stop", "END")
	e := start(t, setup{defs: []*workflow.Definition{b.MustBuild()}})
	id := e.startRun("").RunID
	for _, a := range []string{"try", "retry", "try"} {
		frame(t, e.fire(id, a, nil), 200)
	}
	page := string(e.do("GET", "/visualize?run_id="+id, nil).body)
	if !strings.Contains(page, `<dd id="milestones">Tried</dd>`) {
		t.Fatalf("milestones not shown once:\n%s", page)
	}
	if !strings.Contains(page, `stroke-dasharray="5 4"`) || !strings.Contains(page, "guarded transition: offered only while its guard allows it") {
		t.Fatalf("no legend for the dashed edges:\n%s", page)
	}
}
