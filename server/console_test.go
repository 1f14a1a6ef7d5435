package server_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/server/console"
)

// The console's files are served under /console/ with a strict CSP, open
// without a token (they hold no data) while the API they call is not.
func TestConsoleFiles(t *testing.T) {
	tokens, err := auth.NewTokens([]string{"ops=ops-secret-0123456789abcdef"}, "")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{opts: &server.Options{Authenticate: tokens.Authenticate}})
	r := e.do("GET", "/console/", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), `src="js/app.js"`) {
		t.Fatalf("GET /console/: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	for _, path := range []string{"/console/", "/console/js/app.js", "/console/console.css", "/console/nope.js"} {
		r := e.do("GET", path, nil)
		if got := r.header.Get("Content-Security-Policy"); got != "default-src 'self'" {
			t.Errorf("%s: Content-Security-Policy %q", path, got)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
	if r := e.do("GET", "/console/js/app.js", nil); r.status != 200 || !strings.Contains(r.header.Get("Content-Type"), "javascript") {
		t.Errorf("app.js: %d %s", r.status, r.header.Get("Content-Type"))
	}
	if r := e.do("GET", "/console/nope.js", nil); r.status != 404 {
		t.Errorf("missing file: %d", r.status)
	}
	if r := e.do("GET", "/console/../runs", nil); r.status == 200 && strings.Contains(string(r.body), `"runs"`) {
		t.Errorf("a console path reached the API without a token: %s", r.body)
	}
	if r := e.do("GET", "/runs", nil); r.status != 401 {
		t.Errorf("GET /runs without a token: %d", r.status)
	}
	if r := e.do("GET", "/runs", nil, "Authorization", "Bearer ops-secret-0123456789abcdef"); r.status != 200 {
		t.Errorf("GET /runs with a token: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/console/", "{}", "Authorization", ""); r.status != 401 && r.status != 405 {
		t.Errorf("POST /console/: %d", r.status)
	}
}

// A path under /console/ that holds no file is a 404 like every other
// error of the server: a JSON body with a hint for an API client or a
// script, a small page in the console's style for a browser opening it.
func TestConsoleNotFound(t *testing.T) {
	e := start(t, setup{})
	for _, accept := range []string{"", "*/*", "application/json"} {
		r := e.do("GET", "/console/js/nope.js", nil, "Accept", accept)
		if r.status != 404 || r.header.Get("Content-Type") != "application/json" || r.json(t)["error"] != "not_found" ||
			!strings.Contains(r.hint(t), "/console/js/nope.js") || !strings.Contains(r.hint(t), "Open the console at /console/") {
			t.Errorf("Accept %q: %d %s %s", accept, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for path, root := range map[string]string{"/console/nope": "./", "/console/js/deep/nope.js": "../../", "/console/a<b>": "./"} {
		r := e.do("GET", path, nil, "Accept", browser)
		page := string(r.body)
		if r.status != 404 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || r.header.Get("Content-Security-Policy") != console.CSP ||
			!strings.Contains(page, `<h1>Not found</h1>`) || !strings.Contains(page, `href="`+root+`console.css"`) || !strings.Contains(page, `<a href="`+root+`">Open the console</a>`) {
			t.Errorf("a browser at %s: %d %s\n%s", path, r.status, r.header.Get("Content-Type"), page)
		}
		if strings.Contains(page, "a<b>") {
			t.Errorf("the path is not escaped: %s", page)
		}
	}
}

// The console loads nothing from elsewhere and has no inline script or
// style, which its CSP would refuse.
func TestConsoleFilesAreSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	inline := regexp.MustCompile(`(?i)<script(?:\s+type="module")?>|<style|\sstyle="|\son[a-z]+="|javascript:`)
	n := 0
	err := fs.WalkDir(console.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(console.Files(), p)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(b), `xmlns="http://www.w3.org/2000/svg"`, "")
		if m := external.FindString(text); m != "" {
			t.Errorf("%s refers to %q outside the server", p, m)
		}
		if strings.HasSuffix(p, ".html") || strings.HasSuffix(p, ".svg") {
			if m := inline.FindString(text); m != "" {
				t.Errorf("%s has inline code or style: %q", p, m)
			}
		}
		return nil
	})
	if err != nil || n < 5 {
		t.Fatalf("walked %d files: %v", n, err)
	}
}

// GET /visualize.svg is the diagram alone, the run's state highlighted.
func TestVisualizeSVG(t *testing.T) {
	e := start(t, setup{})
	f := e.startRun("config-wizard-v1")
	frame(t, e.fire(f.RunID, "start", nil), 200)
	r := e.do("GET", "/visualize.svg?run_id="+f.RunID, nil)
	if r.status != 200 || r.header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(string(r.body), "<svg") ||
		!strings.Contains(string(r.body), `class="state current" data-state="CONFIGURE"`) {
		t.Fatalf("GET /visualize.svg: %d %s\n%s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if r := e.do("GET", "/visualize.svg?workflow_id=expense-approval-v1", nil); r.status != 200 || strings.Contains(string(r.body), "current") {
		t.Fatalf("workflow diagram: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/visualize.svg?workflow_id=nope", nil); r.status != 404 || !strings.Contains(r.hint(t), "config-wizard-v1") {
		t.Fatalf("unknown workflow: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/visualize.svg?run_id="+f.RunID+"&workflow_id=expense-approval-v1", nil); r.status != 400 {
		t.Fatalf("run of another workflow: %d %s", r.status, r.body)
	}
	// The OpenAPI document has both methods of /runs and the new paths.
	doc := e.do("GET", "/openapi.json", nil).json(t)
	paths := doc["paths"].(map[string]any)
	runs := paths["/runs"].(map[string]any)
	if runs["get"] == nil || runs["post"] == nil || paths["/visualize.svg"] == nil || paths["/api/ledger/records"] == nil || paths["/runs#list"] != nil {
		t.Fatalf("OpenAPI /runs: %v", runs)
	}
}
