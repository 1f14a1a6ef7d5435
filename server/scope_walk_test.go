package server_test

import (
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/server"
)

// TestEveryScopedRouteHidesOtherWorkflowsRuns walks every route of the
// edge under /w/{workflow_id}/, read from the edge itself (so a route added
// later is walked too), and names a run of another workflow in every way
// the route can take one: its {run_id}, ?run_id=, X-Run-Id, together with
// that run's workflow_id=. Each answer must be 404: under /w/A/ a run of
// workflow B does not exist (README, "Scoped API"). A route that takes no
// run must be listed in noRun with the reason, else the test fails.
func TestEveryScopedRouteHidesOtherWorkflowsRuns(t *testing.T) {
	e := start(t, setup{})
	run := e.startRun("expense-approval-v1").RunID
	const scope = "/w/config-wizard-v1"
	// Routes that name no run: what they answer under /w/ does not depend
	// on a run (their own scoping is tested in TestScopedAPI).
	noRun := map[string]string{
		"GET /w/{workflow_id}":                                   "discovery",
		"GET /w/{workflow_id}/{$}":                               "discovery",
		"POST /w/{workflow_id}":                                  "starts a run of the scoping workflow",
		"POST /w/{workflow_id}/{$}":                              "starts a run of the scoping workflow",
		"POST /w/{workflow_id}/runs":                             "starts a run of the scoping workflow",
		"GET /w/{workflow_id}/runs":                              "lists only the scoping workflow's runs",
		"GET /w/{workflow_id}/workflows":                         "the catalog",
		"GET /w/{workflow_id}/workflows/{wf}/versions/{version}": "a workflow version, not a run",
		"POST /w/{workflow_id}/workflows/{wf}/migrate":           "migrates the runs of a workflow version",
		"GET /w/{workflow_id}/skills/{path...}":                  "a skill document",
		"GET /w/{workflow_id}/openapi.json":                      "the API document",
		"GET /w/{workflow_id}/whoami":                            "the caller",
	}
	var walked []string
	for pattern := range server.EdgeScopes(e.srv) {
		method, path, _ := strings.Cut(pattern, " ")
		if !strings.HasPrefix(path, "/w/{workflow_id}") {
			continue
		}
		if _, ok := noRun[pattern]; ok {
			delete(noRun, pattern)
			continue
		}
		p := strings.TrimPrefix(path, "/w/{workflow_id}")
		p = strings.NewReplacer("{run_id}", run, "{action}", "submit", "{tool}", "policy_check", "{path...}", "policy").Replace(p)
		if strings.Contains(p, "{") {
			t.Errorf("%s: the walk does not know how to fill %s; add it here", pattern, p)
			continue
		}
		q := url.Values{"run_id": {run}, "workflow_id": {"expense-approval-v1"}}
		var body any
		if method == "POST" {
			body = map[string]any{"amount": 1, "description": "x"}
		}
		r := e.do(method, scope+p+"?"+q.Encode(), body, "X-Run-Id", run)
		if r.status != 404 {
			t.Errorf("%s with a run of another workflow: %d, want 404: %.300s", pattern, r.status, r.body)
			continue
		}
		r.hint(t)
		walked = append(walked, pattern)
	}
	for pattern := range noRun {
		t.Errorf("noRun lists %s, which the edge does not serve: remove it", pattern)
	}
	sort.Strings(walked)
	if len(walked) < 10 {
		t.Fatalf("walked only %d routes: %v", len(walked), walked)
	}
	t.Logf("walked %d routes naming a run: %v", len(walked), walked)
}

// TestVisualizeUnderScopeRefusesOtherWorkflowsRun is the case the README
// promises: /w/A/visualize?workflow_id=B&run_id=R (R a run of B) drew R.
func TestVisualizeUnderScopeRefusesOtherWorkflowsRun(t *testing.T) {
	e := start(t, setup{})
	run := e.startRun("expense-approval-v1").RunID
	for _, p := range []string{"/visualize", "/visualize.svg"} {
		r := e.do("GET", "/w/config-wizard-v1"+p+"?workflow_id=expense-approval-v1&run_id="+run, nil)
		if r.status != 404 {
			t.Fatalf("%s of another workflow's run under /w/: %d, want 404: %.300s", p, r.status, r.body)
		}
		r.hint(t)
		if r := e.do("GET", "/w/config-wizard-v1"+p+"?run_id="+run, nil); r.status != 404 || !strings.Contains(r.hint(t), "does not belong") {
			t.Fatalf("%s?run_id= of another workflow's run under /w/: %d %s", p, r.status, r.body)
		}
		if r := e.do("GET", "/w/expense-approval-v1"+p+"?run_id="+run, nil); r.status != 200 {
			t.Fatalf("%s of the scoping workflow's run: %d %s", p, r.status, r.body)
		}
		if r := e.do("GET", p+"?workflow_id=expense-approval-v1&run_id="+run, nil); r.status != 200 {
			t.Fatalf("%s at the root: %d %s", p, r.status, r.body)
		}
	}
}
