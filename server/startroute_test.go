package server_test

import (
	"strings"
	"testing"
)

// POST / is the protocol's other start route ("POST / or POST /runs"):
// it answers exactly as POST /runs does, at the root and scoped, and the
// served OpenAPI document lists it.
func TestPostRootStartsARun(t *testing.T) {
	e := start(t, setup{})
	r := e.do("POST", "/", map[string]any{"workflow_id": "expense-approval-v1", "data": map[string]any{"team": "ops"}})
	f := frame(t, r, 201)
	if f.WorkflowID != "expense-approval-v1" || f.State != "SUBMIT" || f.Data["team"] != "ops" {
		t.Fatalf("POST / frame = %+v", f)
	}
	if loc := r.header.Get("Location"); loc != e.url+"/runs/"+f.RunID {
		t.Fatalf("Location = %q", loc)
	}
	if g := frame(t, e.do("GET", "/runs/"+f.RunID, nil), 200); g.State != "SUBMIT" {
		t.Fatalf("the run POST / created is not there: %+v", g)
	}
	if d := frame(t, e.do("POST", "/", nil), 201); d.WorkflowID != "config-wizard-v1" || d.State != "INITIAL" {
		t.Fatalf("POST / without a body = %+v", d)
	}
	for _, p := range []string{"/w/config-wizard-v1", "/w/config-wizard-v1/"} {
		if s := frame(t, e.do("POST", p, nil), 201); s.WorkflowID != "config-wizard-v1" {
			t.Fatalf("POST %s = %+v", p, s)
		}
	}
	// The same checks as POST /runs.
	bad := e.do("POST", "/", map[string]any{"workflow": "x"})
	if bad.status != 400 || bad.hint(t) == "" {
		t.Fatalf("POST / with an unknown field: %d", bad.status)
	}
	if nf := e.do("POST", "/", map[string]any{"workflow_id": "nope-v1"}); nf.status != 404 {
		t.Fatalf("POST / of an unknown workflow: %d", nf.status)
	}
	// Other methods still get the JSON 405 naming both.
	if put := e.do("PUT", "/", nil); put.status != 405 || put.header.Get("Allow") != "GET, HEAD, POST" {
		t.Fatalf("PUT / = %d, Allow %q", put.status, put.header.Get("Allow"))
	}
	paths := e.do("GET", "/openapi.json", nil).json(t)["paths"].(map[string]any)
	root := paths["/"].(map[string]any)
	post, ok := root["post"].(map[string]any)
	if !ok || root["get"] == nil || post["responses"].(map[string]any)["201"] == nil {
		t.Fatalf("openapi / = %v", root)
	}
}

// Last-Event-ID may be sent quoted, as a client that keeps the reference
// servers' string ids ("id": "2") sends it back; it resumes as the bare
// number does. Anything else is still a 400 with a hint.
func TestLastEventIDQuoted(t *testing.T) {
	e := start(t, setup{})
	id := e.startRun("config-wizard-v1").RunID
	for _, a := range []struct {
		action string
		body   any
	}{{"start", nil}, {"save", map[string]any{"value": "v"}}, {"confirm", nil}} {
		if r := e.fire(id, a.action, a.body); r.status != 200 {
			t.Fatalf("%s: %d", a.action, r.status)
		}
	}
	bare := e.do("GET", "/runs/"+id+"/stream", nil, "Last-Event-ID", "2")
	quoted := e.do("GET", "/runs/"+id+"/stream", nil, "Last-Event-ID", `"2"`)
	if bare.status != 200 || quoted.status != 200 || string(bare.body) != string(quoted.body) {
		t.Fatalf("bare %d %s\nquoted %d %s", bare.status, bare.body, quoted.status, quoted.body)
	}
	if !strings.Contains(string(quoted.body), `"id":3`) || strings.Contains(string(quoted.body), `"id":2,`) {
		t.Fatalf("the replay does not start after event 2:\n%s", quoted.body)
	}
	if r := e.do("GET", "/runs/"+id+"/stream", nil, "Last-Event-ID", `"two"`); r.status != 400 || !strings.Contains(r.hint(t), "Last-Event-ID") {
		t.Fatalf("a non-number: %d", r.status)
	}
}
