package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/server"
)

// Options.MCP is served at /mcp through the edge: authentication, the
// read scope, 405 for other methods; the handler is given the server and
// sees the caller's principal.
func TestMCPRouteGoesThroughTheEdge(t *testing.T) {
	tokens, err := auth.NewTokens([]string{"reader=" + scopeSecrets[auth.ScopeRead] + ":read", "runner=" + scopeSecrets[auth.ScopeRuns] + ":runs"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var base string
	e := start(t, setup{opts: &server.Options{Authenticate: tokens.Authenticate,
		MCP: func(s *server.Server) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				base = s.BaseURL(r)
				w.Write([]byte(r.Method + " " + auth.FromContext(r.Context()).Name))
			})
		}}})
	if r := e.do("POST", "/mcp", map[string]any{}); r.status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/mcp", map[string]any{}, bearer(scopeSecrets[auth.ScopeRuns])...); r.status != http.StatusForbidden || !strings.Contains(r.hint(t), `"read" scope`) {
		t.Fatalf("without read: %d %s", r.status, r.body)
	}
	for _, m := range []string{"GET", "POST", "DELETE"} {
		if r := e.do(m, "/mcp", nil, bearer(scopeSecrets[auth.ScopeRead])...); r.status != 200 || string(r.body) != m+" reader" {
			t.Fatalf("%s /mcp: %d %s", m, r.status, r.body)
		}
	}
	if base != e.url {
		t.Fatalf("BaseURL = %q, want %q", base, e.url)
	}
	if r := e.do("PUT", "/mcp", nil, bearer(scopeSecrets[auth.ScopeRead])...); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("PUT /mcp: %d", r.status)
	}
}
