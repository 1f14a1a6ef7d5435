package server_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/server"
)

// GET /whoami tells a caller its principal and scopes, and exec only when
// the server executes and the principal holds exec; its answer has the
// members the OpenAPI document declares.
func TestWhoami(t *testing.T) {
	tokens, err := auth.NewTokens([]string{
		"admin=" + adminSecret,
		"agent=agent-secret-0123456789:read,runs,dispatch",
		"runner=runner-secret-0123456789:read,exec",
		"blind=blind-secret-0123456789:exec",
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	withTokens := func(allowExec bool) *env {
		return start(t, setup{opts: &server.Options{Authenticate: tokens.Authenticate, AllowExec: allowExec}})
	}
	open := func(allowExec bool) *env {
		return start(t, setup{opts: &server.Options{AllowExec: allowExec}})
	}
	executing, building := withTokens(true), withTokens(false)
	openExec, openBuild := open(true), open(false)

	doc := executing.do("GET", "/openapi.json", nil, bearer(adminSecret)...).json(t)
	schema := doc["paths"].(map[string]any)["/whoami"].(map[string]any)["get"].(map[string]any)["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	members := slices.Sorted(maps.Keys(schema["properties"].(map[string]any)))

	for _, c := range []struct {
		name      string
		e         *env
		secret    string
		principal string
		scopes    []string
		exec      bool
	}{
		{"every scope, executing server", executing, adminSecret, "admin", auth.AllScopes, true},
		{"every scope, server without --allow-exec", building, adminSecret, "admin", auth.AllScopes, false},
		{"no exec scope", executing, "agent-secret-0123456789", "agent", []string{"read", "runs", "dispatch"}, false},
		{"read and exec", executing, "runner-secret-0123456789", "runner", []string{"read", "exec"}, true},
		{"read and exec, server without --allow-exec", building, "runner-secret-0123456789", "runner", []string{"read", "exec"}, false},
		{"open server, executing", openExec, "", "anonymous", auth.AllScopes, true},
		{"open server without --allow-exec", openBuild, "", "anonymous", auth.AllScopes, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hdr []string
			if c.secret != "" {
				hdr = bearer(c.secret)
			}
			for _, path := range []string{"/whoami", "/w/expense-approval-v1/whoami"} {
				r := c.e.do("GET", path, nil, hdr...)
				if r.status != 200 {
					t.Fatalf("GET %s: %d %s", path, r.status, r.body)
				}
				m := r.json(t)
				if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, members) {
					t.Fatalf("GET %s: members %v, the document declares %v", path, got, members)
				}
				var scopes []string
				for _, s := range m["scopes"].([]any) {
					scopes = append(scopes, s.(string))
				}
				if m["principal"] != c.principal || !slices.Equal(scopes, c.scopes) || m["exec"] != c.exec {
					t.Fatalf("GET %s: %s, want principal %q, scopes %v, exec %v", path, r.body, c.principal, c.scopes, c.exec)
				}
			}
		})
	}

	// Without a token, or without read: refused with a hint.
	if r := executing.do("GET", "/whoami", nil); r.status != 401 || r.hint(t) == "" {
		t.Fatalf("no token: %d %s", r.status, r.body)
	}
	if r := executing.do("GET", "/whoami", nil, bearer("blind-secret-0123456789")...); r.status != 403 || r.json(t)["scope"] != "read" {
		t.Fatalf("a token without read: %d %s", r.status, r.body)
	}
}
