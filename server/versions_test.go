package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// Migrating runs is an operator action: a token without the admin scope
// gets 403 naming it; one with it (or with every scope, the default) may.
func TestMigrateNeedsTheAdminScope(t *testing.T) {
	const opsSecret = "ops-secret-0123456789ab"
	tokens, err := auth.NewTokens([]string{"all=" + adminSecret, "ops=" + opsSecret + ":read,admin", "runner=" + runnerSecret + ":read,runs,dispatch,exec"}, "")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{opts: &server.Options{Authenticate: tokens.Authenticate}})
	v := examples.ConfigWizard().Version()
	body := map[string]any{"from": v, "to": v, "dry_run": true}
	bearer := func(s string) []string { return []string{"Authorization", "Bearer " + s} }
	r := e.do("POST", "/workflows/config-wizard-v1/migrate", body, bearer(runnerSecret)...)
	if r.status != 403 || !strings.Contains(r.hint(t), `needs the "admin" scope`) {
		t.Fatalf("a token without admin: %d %s", r.status, r.body)
	}
	for _, s := range []string{opsSecret, adminSecret} {
		if r := e.do("POST", "/workflows/config-wizard-v1/migrate", body, bearer(s)...); r.status != 200 {
			t.Fatalf("a token with admin: %d %s", r.status, r.body)
		}
	}
}

func TestWorkflowVersionsOverHTTP(t *testing.T) {
	e := start(t, setup{})
	f := frame(t, e.do("POST", "/runs", map[string]any{"workflow_id": "config-wizard-v1"}), 201)
	link := f.Links["workflow_version"]
	v := examples.ConfigWizard().Version()
	if link.Version != v || link.Href != e.url+"/workflows/config-wizard-v1/versions/"+v || link.Method != "GET" {
		t.Fatalf("workflow_version link %+v, want version %s", link, v)
	}

	// The link serves the stored definition, whose canonical form hashes to the version.
	r := e.do("GET", link.Href, nil)
	var sd struct {
		WorkflowID string          `json:"workflow_id"`
		Version    string          `json:"version"`
		Definition json.RawMessage `json:"definition"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &sd) != nil {
		t.Fatalf("GET %s: %d %s", link.Href, r.status, r.body)
	}
	c, err := jcs.Transform(sd.Definition)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	if sd.WorkflowID != "config-wizard-v1" || sd.Version != v || "sha256:"+hex.EncodeToString(sum[:]) != v {
		t.Fatalf("the stored definition does not hash to its version %s", v)
	}
	// Under the scoped API too; another workflow's versions are not there.
	if r := e.do("GET", "/w/config-wizard-v1/workflows/config-wizard-v1/versions/"+v, nil); r.status != 200 {
		t.Fatalf("scoped version URL: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/w/expense-approval-v1/workflows/config-wizard-v1/versions/"+v, nil); r.status != 404 {
		t.Fatalf("another workflow's version under a scoped API: %d %s", r.status, r.body)
	}

	// An unknown version: 404 listing the known ones.
	r = e.do("GET", "/workflows/config-wizard-v1/versions/sha256:00", nil)
	if r.status != 404 || !strings.Contains(r.hint(t), v) {
		t.Fatalf("an unknown version: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/workflows/config-wizard-v1/migrate", map[string]any{"from": "sha256:00", "to": v})
	if r.status != 404 || !strings.Contains(r.hint(t), v) {
		t.Fatalf("migrating from an unknown version: %d %s", r.status, r.body)
	}
	// A mapping to a state the target lacks: 400. Bad bodies: 400.
	for _, b := range []any{
		map[string]any{"from": v, "to": v, "states": map[string]any{"INITIAL": "NOPE"}},
		map[string]any{"from": v, "to": 7},
		map[string]any{"from": v, "to": v, "dry_run": "yes"},
		map[string]any{"from": v, "to": v, "extra": true},
		map[string]any{"to": v},
		"[]",
	} {
		if r := e.do("POST", "/workflows/config-wizard-v1/migrate", b); r.status != 400 || r.hint(t) == "" {
			t.Errorf("migrate %v: %d %s", b, r.status, r.body)
		}
	}

	// The catalog keeps its fields and adds the versions with their active runs.
	var cat struct {
		Workflows []struct {
			WorkflowID   string   `json:"workflow_id"`
			InitialState string   `json:"initial_state"`
			States       []string `json:"states"`
			StartHref    string   `json:"start_href"`
			Version      string   `json:"version"`
			Versions     []struct {
				Version    string `json:"version"`
				ActiveRuns int64  `json:"active_runs"`
				Served     bool   `json:"served"`
				Href       string `json:"href"`
			} `json:"versions"`
		} `json:"workflows"`
	}
	if err := json.Unmarshal(e.do("GET", "/workflows", nil).body, &cat); err != nil {
		t.Fatal(err)
	}
	for _, w := range cat.Workflows {
		if w.InitialState == "" || len(w.States) == 0 || w.StartHref == "" || len(w.Versions) != 1 || w.Versions[0].Version != w.Version || !w.Versions[0].Served {
			t.Errorf("catalog entry %+v", w)
		}
		if w.WorkflowID == "config-wizard-v1" && (w.Versions[0].ActiveRuns != 1 || w.Versions[0].Href != link.Href) {
			t.Errorf("config-wizard-v1 versions %+v, want 1 active run at %s", w.Versions, link.Href)
		}
	}
}

// The visualizer draws a run on the version it is pinned to and names it.
func TestVisualizeShowsThePinnedVersion(t *testing.T) {
	src := func(b string) []byte {
		return []byte("workflow_id: viz-v1\ninitial_state: INITIAL\nstates: {INITIAL: {}, " + b + ": {}, DONE: {}}\n" +
			"transitions: [{from: INITIAL, action: start, to: " + b + "}, {from: " + b + ", action: finish, to: DONE}]\n")
	}
	v1, v2, st, e1 := twoVersions(t, src("BEFORE"), src("AFTER"))
	r, err := e1.StartRun(t.Context(), "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Transition(t.Context(), r.ID, "start", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{defs: []*workflow.Definition{v2}, newStor: func(*testing.T) storeT { return st }})
	page := string(e.do("GET", "/visualize?run_id="+r.ID, nil).body)
	if !strings.Contains(page, `<code id="workflow-version">`+v1.Version()+`</code>`) || !strings.Contains(page, `<strong id="current-state">BEFORE</strong>`) || strings.Contains(page, ">AFTER<") {
		t.Fatalf("the visualizer of a run pinned to v1:\n%s", page)
	}
	page = string(e.do("GET", "/visualize?workflow_id=viz-v1", nil).body)
	if !strings.Contains(page, v2.Version()) || strings.Contains(page, ">BEFORE<") {
		t.Fatalf("the visualizer of the served version:\n%s", page)
	}
	page = string(e.do("GET", "/visualize?workflow_id=viz-v1&version="+v1.Version(), nil).body)
	if !strings.Contains(page, v1.Version()) || !strings.Contains(page, ">BEFORE<") {
		t.Fatalf("the visualizer of a stored version:\n%s", page)
	}
}

// A stream replayed from the start renders each event with the version the
// run had then: before a migration the old one, after it the new one.
func TestStreamReplaysEachEventOnItsVersion(t *testing.T) {
	src := func(b string) []byte {
		return []byte("workflow_id: replay-v1\ninitial_state: INITIAL\nstates: {INITIAL: {}, " + b + ": {hint: In " + b + ".}, DONE: {}}\n" +
			"transitions: [{from: INITIAL, action: start, to: " + b + "}, {from: " + b + ", action: finish, to: DONE}]\n")
	}
	v1, _ := workflow.Load("v1.yaml", src("B"), nil)
	v2, err := workflow.Load("v2.yaml", src("B2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	e1, err := engine.New(st, []*workflow.Definition{v1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := e1.StartRun(t.Context(), "", nil, engine.StartOptions{})
	if _, err := e1.Transition(t.Context(), r.ID, "start", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{defs: []*workflow.Definition{v2}, newStor: func(*testing.T) storeT { return st }})
	if _, err := e.eng.Migrate(t.Context(), "replay-v1", v1.Version(), v2.Version(), engine.MigrateOptions{States: map[string]string{"B": "B2"}}); err != nil {
		t.Fatal(err)
	}
	frame(t, e.do("POST", "/runs/"+r.ID+"/transitions/finish", nil), 200)
	body := e.do("GET", "/runs/"+r.ID+"/stream", nil, "Last-Event-ID", "0").body
	type line struct {
		State string `json:"state"`
		Hint  string `json:"hint"`
		Links map[string]struct {
			Version string `json:"version"`
		} `json:"_links"`
	}
	var lines []line
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		checkStreamFrame(t, l)
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("stream line %q: %v", l, err)
		}
		lines = append(lines, x)
	}
	want := []struct{ state, hint, version string }{
		{"INITIAL", "", v1.Version()}, {"B", "In B.", v1.Version()}, {"B2", "In B2.", v2.Version()}, {"DONE", "", v2.Version()},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d stream lines, want %d:\n%s", len(lines), len(want), body)
	}
	for i, w := range want {
		if l := lines[i]; l.State != w.state || l.Hint != w.hint || l.Links["workflow_version"].Version != w.version {
			t.Errorf("line %d: %s %q on %s; want %s %q on %s", i+1, l.State, l.Hint, l.Links["workflow_version"].Version, w.state, w.hint, w.version)
		}
	}
}

// The skill URL of a run pinned to an older version serves that version's skill.
func TestPinnedSkillOverHTTP(t *testing.T) {
	build := func(content string) *workflow.Definition {
		b := workflow.New("skill-v1", "WORK")
		b.State("WORK").Skill(workflow.Skill{Name: "worker", Path: "work/SKILL.md", Content: []byte(content)})
		b.State("DONE")
		b.Transition("WORK", "done", "DONE")
		return b.MustBuild()
	}
	st := memstore.New()
	e1, err := engine.New(st, []*workflow.Definition{build("old\n")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := e1.StartRun(t.Context(), "", nil, engine.StartOptions{})
	e := start(t, setup{defs: []*workflow.Definition{build("new\n")}, newStor: func(*testing.T) storeT { return st }})
	f := frame(t, e.do("GET", "/runs/"+r.ID, nil), 200)
	if got := e.do("GET", f.ActiveSkill.URL, nil); got.status != 200 || string(got.body) != "old\n" {
		t.Fatalf("GET %s: %d %q, want the pinned version's skill", f.ActiveSkill.URL, got.status, got.body)
	}
	if got := e.do("GET", "/skills/work/SKILL.md", nil); got.status != 200 || string(got.body) != "new\n" {
		t.Fatalf("the served skill: %d %q", got.status, got.body)
	}
	if got := e.do("GET", "/skills/work/SKILL.md?workflow_id=skill-v1&version=sha256:00", nil); got.status != 404 || got.hint(t) == "" {
		t.Fatalf("an unknown version's skill: %d %s", got.status, got.body)
	}
}

// GET /runs shows, and filters by, the status a run's state has in the
// version the run is pinned to: here PARKED ends a run in v1 but not in
// v2, so a v1 run there is completed while a v2 run there is active, as
// GET /runs/{id} says.
func TestListRunsStatusOfThePinnedVersion(t *testing.T) {
	src := func(more string) []byte {
		return []byte("workflow_id: park-v1\ninitial_state: INITIAL\nstates: {INITIAL: {}, PARKED: {}, DONE: {}}\n" +
			"transitions: [{from: INITIAL, action: park, to: PARKED}" + more + "]\n")
	}
	_, v2, st, e1 := twoVersions(t, src(""), src(", {from: PARKED, action: resume, to: DONE}"))
	var old []string
	for range 20 { // more than one page's rounds of store reads at limit=1
		r, err := e1.StartRun(t.Context(), "", nil, engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e1.Transition(t.Context(), r.ID, "park", nil, engine.TransitionOptions{}); err != nil {
			t.Fatal(err)
		}
		old = append(old, r.ID)
	}
	e := start(t, setup{defs: []*workflow.Definition{v2}, newStor: func(*testing.T) storeT { return st }})
	newer := frame(t, e.do("POST", "/runs", map[string]any{"workflow_id": "park-v1"}), 201).RunID
	frame(t, e.do("POST", "/runs/"+newer+"/transitions/park", nil), 200)
	if f := frame(t, e.do("GET", "/runs/"+old[0], nil), 200); f.Status != "completed" {
		t.Fatalf("GET /runs/{id} of a v1 run in PARKED: status %s", f.Status)
	}

	list := func(query string) map[string]string {
		t.Helper()
		got := map[string]string{}
		cursor := ""
		for {
			r := e.do("GET", "/runs?"+query+cursor, nil)
			var page struct {
				Runs []struct {
					RunID  string `json:"run_id"`
					Status string `json:"status"`
				} `json:"runs"`
				NextCursor *string `json:"next_cursor"`
			}
			if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
				t.Fatalf("GET /runs?%s: %d %s", query, r.status, r.body)
			}
			for _, lr := range page.Runs {
				got[lr.RunID] = lr.Status
			}
			if page.NextCursor == nil {
				return got
			}
			cursor = "&cursor=" + *page.NextCursor
		}
	}
	all := list("limit=2")
	for _, id := range old {
		if all[id] != "completed" {
			t.Errorf("v1 run %s listed as %q, want completed", id, all[id])
		}
	}
	if all[newer] != "active" || len(all) != 21 {
		t.Errorf("the list: %v (v2 run %s should be active)", all, newer)
	}
	// Pages of one run each, so that filtering runs out of some pages.
	completed := list("status=completed&limit=1")
	if len(completed) != 20 || completed[newer] != "" {
		t.Errorf("status=completed: %v, want the twenty v1 runs", completed)
	}
	active := list("status=active&limit=1")
	if len(active) != 1 || active[newer] != "active" {
		t.Errorf("status=active: %v, want only the v2 run %s", active, newer)
	}
}

// twoVersions loads two versions of a workflow and returns them with a
// store holding its definitions and an engine that serves the first: runs
// it starts are pinned to v1, and a server started on st with v2 serves
// them beside new runs of v2.
func twoVersions(t *testing.T, src1, src2 []byte) (v1, v2 *workflow.Definition, st *memstore.Store, old *engine.Engine) {
	t.Helper()
	v1, err := workflow.Load("v1.yaml", src1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v2, err = workflow.Load("v2.yaml", src2, nil); err != nil {
		t.Fatal(err)
	}
	st = memstore.New()
	if old, err = engine.New(st, []*workflow.Definition{v1}, nil); err != nil {
		t.Fatal(err)
	}
	return v1, v2, st, old
}

// A page merges its filters' runs only as far as every filter has been
// read: here the first store reads of PARKED hold only v1 runs (completed,
// dropped), and the active v2 run behind them is newer than the INITIAL
// run the other filter gave, so it must come first, not be skipped.
func TestListRunsMergesOnlyWhatEveryFilterRead(t *testing.T) {
	src := func(more string) []byte {
		return []byte("workflow_id: park-v1\ninitial_state: INITIAL\nstates: {INITIAL: {}, PARKED: {}, DONE: {}}\n" +
			"transitions: [{from: INITIAL, action: park, to: PARKED}" + more + "]\n")
	}
	_, v2, st, e1 := twoVersions(t, src(""), src(", {from: PARKED, action: resume, to: DONE}"))
	ctx := t.Context()
	initial, err := e1.StartRun(ctx, "", nil, engine.StartOptions{}) // the oldest: active in INITIAL
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{defs: []*workflow.Definition{v2}, newStor: func(*testing.T) storeT { return st }})
	parked := frame(t, e.do("POST", "/runs", map[string]any{"workflow_id": "park-v1"}), 201).RunID
	frame(t, e.do("POST", "/runs/"+parked+"/transitions/park", nil), 200) // active in v2
	// The newest: v1 runs in PARKED, completed.
	for range 2 {
		r, err := e1.StartRun(ctx, "", nil, engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e1.Transition(ctx, r.ID, "park", nil, engine.TransitionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	cursor := ""
	for range 10 {
		r := e.do("GET", "/runs?status=active&limit=1"+cursor, nil)
		var page struct {
			Runs []struct {
				RunID string `json:"run_id"`
			} `json:"runs"`
			NextCursor *string `json:"next_cursor"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("GET /runs: %d %s", r.status, r.body)
		}
		for _, lr := range page.Runs {
			got = append(got, lr.RunID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	if want := []string{parked, initial.ID}; !slices.Equal(got, want) {
		t.Fatalf("status=active, one run a page: %v, want %v (newest first)", got, want)
	}
}
