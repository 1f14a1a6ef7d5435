package server_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// The engine's reports reach /metrics under the names and labels they
// always had: committed changes in asmp_transitions_total, retention in
// asmp_runs_pruned_total.
func TestMetricsCountTransitionsAndPrunes(t *testing.T) {
	e := start(t, setup{})
	id := e.startRun("config-wizard-v1").RunID
	frame(t, e.fire(id, "start", nil), 200)
	frame(t, e.fire(id, "save", map[string]any{"value": "v"}), 200)
	frame(t, e.fire(id, "confirm", nil), 200)
	e.fire(id, "confirm", nil) // refused: not a change
	if n, err := e.eng.Prune(context.Background(), time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the completed run", n, err)
	}
	m := string(e.do("GET", "/metrics", nil).body)
	for _, want := range []string{
		"# HELP asmp_transitions_total Committed run changes by workflow, kind (created, transition, failed) and action.\n# TYPE asmp_transitions_total counter\n",
		`asmp_transitions_total{action="",kind="created",workflow="config-wizard-v1"} 1` + "\n",
		`asmp_transitions_total{action="start",kind="transition",workflow="config-wizard-v1"} 1` + "\n",
		`asmp_transitions_total{action="save",kind="transition",workflow="config-wizard-v1"} 1` + "\n",
		`asmp_transitions_total{action="confirm",kind="transition",workflow="config-wizard-v1"} 1` + "\n",
		"# HELP asmp_runs_pruned_total Ended runs deleted by retention, with their events and tasks.\n# TYPE asmp_runs_pruned_total counter\nasmp_runs_pruned_total 1\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// A run deleted by retention leaves no answer behind in the server: a new
// run given its id (the engine's NewRunID may repeat ids) is answered with
// its own frame and CLI object, even at the same version.
func TestPrunedRunsAnswersAreForgotten(t *testing.T) {
	const id = "01900000-0000-7000-8000-000000000001"
	w := workflow.New("once-v1", "DONE")
	w.State("DONE").Hint("Nothing to do.")
	for _, opts := range []*server.Options{nil, {DisableMetrics: true}} {
		st := memstore.New()
		eng, err := engine.New(st, []*workflow.Definition{w.MustBuild(), examples.ConfigWizard()}, &engine.Options{NewRunID: func() string { return id }})
		if err != nil {
			t.Fatal(err)
		}
		srv := server.New(eng, opts)
		hs := httptest.NewServer(srv)
		e := &env{t: t, url: hs.URL, eng: eng, st: st, srv: srv}
		get := func(n float64) {
			t.Helper()
			f := frame(t, e.do("GET", "/runs/"+id, nil), 200)
			if f.Data["n"] != n {
				t.Fatalf("GET /runs/{id} answered %v, want n = %v (metrics off: %v)", f, n, opts != nil)
			}
			if c := cliObj(t, e.do("GET", "/runs/"+id+"/cli", nil)); c.RunID != id {
				t.Fatalf("GET /runs/{id}/cli: %+v", c)
			}
		}
		e.do("POST", "/runs", map[string]any{"workflow_id": "once-v1", "data": map[string]any{"n": 1}})
		get(1)
		get(1) // from the cache
		if n, err := eng.Prune(context.Background(), time.Now().Add(time.Hour)); err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v", n, err)
		}
		e.do("POST", "/runs", map[string]any{"workflow_id": "once-v1", "data": map[string]any{"n": 2}})
		get(2)
		srv.Shutdown()
		hs.Close()
		st.Close()
	}
}
