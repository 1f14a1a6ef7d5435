package server_test

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/workflow"
)

type listPage struct {
	Runs []struct {
		RunID           string  `json:"run_id"`
		WorkflowID      string  `json:"workflow_id"`
		WorkflowVersion *string `json:"workflow_version"`
		State           string  `json:"state"`
		Status          string  `json:"status"`
		CreatedAt       string  `json:"created_at"`
		UpdatedAt       string  `json:"updated_at"`
		Href            string  `json:"href"`
	} `json:"runs"`
	NextCursor *string `json:"next_cursor"`
}

func (e *env) list(query string) listPage {
	e.t.Helper()
	r := e.do("GET", "/runs"+query, nil)
	if r.status != 200 {
		e.t.Fatalf("GET /runs%s: %d %s", query, r.status, r.body)
	}
	var p listPage
	if err := json.Unmarshal(r.body, &p); err != nil || p.Runs == nil || !strings.Contains(string(r.body), `"next_cursor"`) {
		e.t.Fatalf("GET /runs%s: %v %s", query, err, r.body)
	}
	return p
}

func (p listPage) ids() []string {
	out := []string{}
	for _, r := range p.Runs {
		out = append(out, r.RunID)
	}
	return out
}

var msRFC3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// GET /runs lists the stored runs newest first with their derived status,
// filtered by workflow, state, status and updated_after, page by page.
func TestListRuns(t *testing.T) {
	for name, newStore := range backends {
		t.Run(name, func(t *testing.T) {
			e := start(t, setup{newStor: newStore})
			var wizard, expense []string
			for range 3 {
				wizard = append(wizard, e.startRun("config-wizard-v1").RunID)
				expense = append(expense, e.startRun("expense-approval-v1").RunID)
			}
			frame(t, e.fire(wizard[0], "start", nil), 200)
			frame(t, e.fire(wizard[1], "start", nil), 200)
			frame(t, e.fire(wizard[1], "save", map[string]any{"value": "v"}), 200)
			frame(t, e.fire(wizard[1], "cancel", nil), 200) // CANCELLED: completed

			all := e.list("")
			if len(all.Runs) != 6 || all.NextCursor != nil {
				t.Fatalf("all runs: %+v", all)
			}
			for i, r := range all.Runs {
				if !msRFC3339.MatchString(r.CreatedAt) || !msRFC3339.MatchString(r.UpdatedAt) || r.Href != e.url+"/runs/"+r.RunID ||
					r.WorkflowVersion == nil || !strings.HasPrefix(*r.WorkflowVersion, "sha256:") {
					t.Fatalf("listed run %+v", r)
				}
				if i > 0 && r.UpdatedAt > all.Runs[i-1].UpdatedAt {
					t.Fatalf("not newest first: %v", all.Runs)
				}
			}
			if v := examples.ConfigWizard().Version(); *all.Runs[0].WorkflowVersion != v {
				t.Fatalf("a config wizard run is listed on version %s, want %s (the one it was pinned to)", *all.Runs[0].WorkflowVersion, v)
			}
			if all.Runs[0].RunID != wizard[1] || all.Runs[1].RunID != wizard[0] {
				t.Fatalf("the runs changed last are not first: %v (changed %s then %s)", all.ids(), wizard[0], wizard[1])
			}
			check := func(query string, want ...string) {
				t.Helper()
				got := e.list(query).ids()
				slices.Sort(got)
				slices.Sort(want)
				if want == nil {
					want = []string{}
				}
				if !slices.Equal(got, want) {
					t.Errorf("GET /runs%s = %v, want %v", query, got, want)
				}
			}
			check("?workflow_id=expense-approval-v1", expense...)
			check("?state=CONFIGURE", wizard[0])
			check("?workflow_id=config-wizard-v1&state=INITIAL", wizard[2])
			check("?status=completed", wizard[1])
			check("?status=awaiting_input", expense...)
			check("?status=active", wizard[0], wizard[2])
			check("?status=active&workflow_id=config-wizard-v1&state=CONFIGURE", wizard[0])
			check("?status=processing")
			// updated_after compares at the precision times are shown at
			// (milliseconds): a run listed with updated_at T is not listed
			// again by updated_after=T, and every run shown later is.
			cut := all.Runs[3].UpdatedAt
			for _, r := range all.Runs {
				listed := slices.Contains(e.list("?updated_after="+url.QueryEscape(cut)).ids(), r.RunID)
				if r.UpdatedAt > cut && !listed || r.UpdatedAt <= cut && listed {
					t.Errorf("updated_after=%s: run updated at %s listed: %v", cut, r.UpdatedAt, listed)
				}
			}
			check("?updated_after=2000-01-01T00:00:00Z", all.ids()...)
			check("?updated_after=1600-01-01T00:00:00Z", all.ids()...) // before any time stored
			check("?updated_after=2261-12-31T23:59:59Z")
			// Polling from the newest time seen finds nothing until a run changes.
			check("?updated_after=" + url.QueryEscape(all.Runs[0].UpdatedAt))
			// The workflow-scoped API lists that workflow's runs.
			if got := e.list("").ids(); len(got) != 6 {
				t.Fatal(got)
			}
			scoped := e.do("GET", "/w/config-wizard-v1/runs", nil)
			var sp listPage
			if json.Unmarshal(scoped.body, &sp); len(sp.Runs) != 3 || !strings.HasPrefix(sp.Runs[0].Href, e.url+"/w/config-wizard-v1/runs/") {
				t.Fatalf("scoped list: %s", scoped.body)
			}
			// Paging: pages of 4 then 2, the cursor continuing the order.
			p1 := e.list("?limit=4")
			if len(p1.Runs) != 4 || p1.NextCursor == nil {
				t.Fatalf("first page: %+v", p1)
			}
			p2 := e.list("?limit=4&cursor=" + url.QueryEscape(*p1.NextCursor))
			if len(p2.Runs) != 2 || p2.NextCursor != nil || !slices.Equal(append(p1.ids(), p2.ids()...), all.ids()) {
				t.Fatalf("pages %v + %v, want %v", p1.ids(), p2.ids(), all.ids())
			}
			// Paging a status that is the union of several states.
			q1 := e.list("?status=awaiting_input&limit=2")
			q2 := e.list("?status=awaiting_input&limit=2&cursor=" + url.QueryEscape(*q1.NextCursor))
			if got := append(q1.ids(), q2.ids()...); len(got) != 3 || q2.NextCursor != nil {
				t.Fatalf("status pages %v %v", q1.ids(), q2.ids())
			}
		})
	}
}

// Bad parameters of GET /runs are 400s whose hint says what to send.
func TestListRunsBadInput(t *testing.T) {
	e := start(t, setup{})
	e.startRun("")
	for query, word := range map[string]string{
		"?sort=asc":                             "sort",
		"?limit=0":                              "limit",
		"?limit=501":                            "500",
		"?limit=ten":                            "limit",
		"?cursor=nonsense":                      "cursor",
		"?cursor=cjE6MTox":                      "cursor", // r1:1:1 is fine; see below
		"?updated_after=yesterday":              "updated_after",
		"?updated_after=9999-12-31T23:59:59Z":   "before 2262",
		"?due_before=in10m":                     "due_before",
		"?due_before=2026-12-03":                "RFC 3339",
		"?due_before=":                          "due_before is empty",
		"?status=sleeping":                      "awaiting_input",
		"?workflow_id=nope":                     "config-wizard-v1",
		"?workflow_id=config-wizard-v1&state=X": "CONFIGURE",
		"?state=A&state=B":                      "once",
	} {
		r := e.do("GET", "/runs"+query, nil)
		if query == "?cursor=cjE6MTox" {
			// A well-formed cursor is accepted even when no run is there.
			if r.status != 200 {
				t.Errorf("GET /runs%s: %d %s", query, r.status, r.body)
			}
			continue
		}
		if r.status != 400 || !strings.Contains(r.hint(t), word) {
			t.Errorf("GET /runs%s: %d %s, want 400 with a hint naming %q", query, r.status, r.body, word)
		}
	}
	if r := e.do("GET", "/w/config-wizard-v1/runs?workflow_id=expense-approval-v1", nil); r.status != 400 {
		t.Errorf("scoped list with another workflow: %d %s", r.status, r.body)
	}
}

// A state filter without workflow_id must name a state some workflow
// here has: NOPE is a 400 with a hint, not an empty list. A state only an
// older stored version has is still a filter (a run pinned to that
// version may be in it), with workflow_id and without.
func TestListRunsStateMustExist(t *testing.T) {
	src := func(b string) []byte {
		return []byte("workflow_id: moved-v1\ninitial_state: INITIAL\nstates: {INITIAL: {}, " + b + ": {}, DONE: {}}\n" +
			"transitions: [{from: INITIAL, action: start, to: " + b + "}, {from: " + b + ", action: finish, to: DONE}]\n")
	}
	_, v2, st, e1 := twoVersions(t, src("BEFORE"), src("AFTER"))
	old, err := e1.StartRun(t.Context(), "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Transition(t.Context(), old.ID, "start", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{defs: append([]*workflow.Definition{v2}, examples.All()...), newStor: func(*testing.T) storeT { return st }})
	for _, q := range []string{"?state=NOPE", "?state=NOPE&status=active"} {
		r := e.do("GET", "/runs"+q, nil)
		if h := r.hint(t); r.status != 400 || !strings.Contains(h, `"NOPE"`) || !strings.Contains(h, "AFTER") || !strings.Contains(h, "workflow_id") {
			t.Errorf("GET /runs%s: %d %s, want 400 with a hint naming the states and workflow_id", q, r.status, r.body)
		}
	}
	for _, q := range []string{"?state=BEFORE", "?workflow_id=moved-v1&state=BEFORE"} {
		if got := e.list(q).ids(); !slices.Equal(got, []string{old.ID}) {
			t.Errorf("GET /runs%s = %v, want the run pinned to the version with that state, %s", q, got, old.ID)
		}
	}
	if got := e.list("?state=AFTER").ids(); len(got) != 0 {
		t.Errorf("GET /runs?state=AFTER = %v, want none", got)
	}
	if got := e.list("?state=CONFIGURE").ids(); len(got) != 0 {
		t.Errorf("GET /runs?state=CONFIGURE = %v, want none", got)
	}
}
