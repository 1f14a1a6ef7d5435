package httpx_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func serve(t *testing.T, h http.Handler, method, path string, p *auth.Principal) answer {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if p != nil {
		r = r.WithContext(auth.WithPrincipal(r.Context(), *p))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := answer{status: w.Code, header: w.Header()}
	if w.Body.Len() > 0 && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(w.Body.Bytes(), &a.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, w.Body)
		}
	}
	return a
}

// The steps of a route run in one order: the edge's checks, the API's
// checks, the scope check, the handler; the first error is the answer.
func TestEdgeRunsChecksThenScopeThenHandler(t *testing.T) {
	var steps []string
	step := func(name string, fail func(r *http.Request) bool) httpx.Check {
		return func(r *http.Request, rt *httpx.Route) error {
			steps = append(steps, name)
			if fail(r) {
				return protocol.Errorf(protocol.EInvalid, "%s refused %s %s.", name, rt.Method, rt.Path)
			}
			return nil
		}
	}
	query := func(k string) func(r *http.Request) bool {
		return func(r *http.Request) bool { return r.URL.Query().Has(k) }
	}
	e := httpx.NewEdge(nil, step("edge", query("edge")))
	e.Mount(httpx.API{
		Checks: []httpx.Check{step("api", query("api"))},
		Routes: []httpx.Route{{Method: "POST", Path: "/x", Scope: auth.ScopeRuns, Handle: func(w http.ResponseWriter, r *http.Request) error {
			steps = append(steps, "handler")
			httpx.WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
			return nil
		}}},
	})
	reader := &auth.Principal{Name: "reader", Scopes: []string{auth.ScopeRead}}
	for _, c := range []struct {
		query  string
		p      *auth.Principal
		status int
		steps  string
	}{
		{"", nil, 200, "edge api handler"},
		{"?edge", nil, 400, "edge"},
		{"?api", nil, 400, "edge api"},
		{"?api", reader, 400, "edge api"}, // a check's error comes before the scope's
		{"", reader, 403, "edge api"},
	} {
		steps = nil
		a := serve(t, e, "POST", "/x"+c.query, c.p)
		if a.status != c.status || strings.Join(steps, " ") != c.steps {
			t.Errorf("POST /x%s: %d after %q; want %d after %q", c.query, a.status, steps, c.status, c.steps)
		}
	}
}

// An API's ErrorStyle words every error of its routes, of its 405s and of
// its prefix's 404s; internal errors never carry the style's status (nor
// their cause).
func TestEdgeErrorStyle(t *testing.T) {
	e := httpx.NewEdge(nil)
	fail := func(err error) httpx.HandlerFunc {
		return func(http.ResponseWriter, *http.Request) error { return err }
	}
	e.Mount(httpx.API{
		Errors: httpx.ErrorStyle{Status: "error"},
		Prefix: "/api/",
		Routes: []httpx.Route{
			{Method: "GET", Path: "/api/bad", Handle: fail(protocol.Errorf(protocol.EInvalid, "Bad.").With("field", "f"))},
			{Method: "GET", Path: "/api/fault", Handle: fail(errors.New("secret cause"))},
			{Method: "GET", Path: "/api/limit", Handle: fail(protocol.Errorf(protocol.ERateLimited, "Slow down.").With("retry_after", 3))},
		},
	})
	e.Mount(httpx.API{Routes: []httpx.Route{{Method: "GET", Path: "/plain", Handle: fail(protocol.Errorf(protocol.EConflict, "Stale."))}}})
	for _, c := range []struct {
		method, path string
		status       int
		want         map[string]any
	}{
		{"GET", "/api/bad", 400, map[string]any{"status": "error", "error": "invalid", "hint": "Bad.", "field": "f"}},
		{"GET", "/api/fault", 500, map[string]any{"error": "internal", "hint": protocol.ErrorHint(nil)}},
		{"GET", "/api/limit", 429, map[string]any{"status": "error", "error": "rate_limited", "hint": "Slow down.", "retry_after": 3.0}},
		{"POST", "/api/bad", 405, map[string]any{"status": "error", "error": "method_not_allowed", "hint": "POST is not allowed on /api/bad; use GET, HEAD."}},
		{"GET", "/api/nope", 404, map[string]any{"status": "error", "error": "not_found", "hint": "No endpoint at GET /api/nope."}},
		{"GET", "/plain", 409, map[string]any{"error": "conflict", "hint": "Stale."}},
		{"PUT", "/plain", 405, map[string]any{"error": "method_not_allowed", "hint": "PUT is not allowed on /plain; use GET, HEAD."}},
	} {
		a := serve(t, e, c.method, c.path, nil)
		got, _ := json.Marshal(a.body)
		want, _ := json.Marshal(c.want)
		if a.status != c.status || string(got) != string(want) {
			t.Errorf("%s %s: %d %s; want %d %s", c.method, c.path, a.status, got, c.status, want)
		}
		if a.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s: Cache-Control %q", c.method, c.path, a.header.Get("Cache-Control"))
		}
		if c.status == 405 && a.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", c.method, c.path, a.header.Get("Allow"))
		}
	}
	if a := serve(t, e, "GET", "/api/limit", nil); a.header.Get("Retry-After") != "3" {
		t.Errorf("429 without Retry-After: %v", a.header)
	}
}

// RequireScope refuses a caller without the scope, naming both, and lets
// through one holding it (and anyone when the route needs none).
func TestRequireScope(t *testing.T) {
	r := httptest.NewRequest("POST", "/runs", nil)
	as := func(p auth.Principal) *http.Request { return r.WithContext(auth.WithPrincipal(r.Context(), p)) }
	reader := auth.Principal{Name: "ci-reader", Scopes: []string{auth.ScopeRead}}
	err := httpx.RequireScope(as(reader), auth.ScopeRuns)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.EForbidden || pe.Fields["scope"] != auth.ScopeRuns ||
		pe.Hint != `POST /runs needs the "runs" scope, which "ci-reader" does not hold; use a token with it.` {
		t.Fatalf("reader needing runs: %#v", err)
	}
	if err := httpx.RequireScope(as(reader), auth.ScopeRead); err != nil {
		t.Errorf("reader needing read: %v", err)
	}
	if err := httpx.RequireScope(as(auth.Principal{Name: "nobody"}), ""); err != nil {
		t.Errorf("no scope needed: %v", err)
	}
	if err := httpx.RequireScope(r, auth.ScopeExec); err != nil {
		t.Errorf("no principal is auth.Open, which holds every scope: %v", err)
	}
}
