package server_test

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/server"
)

var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// operation returns the operation of method on path in described, or nil.
func operation(described map[string]map[string]any, method, path string) map[string]any {
	op, _ := described[openapiPath(path)][strings.ToLower(method)].(map[string]any)
	return op
}

// openapiPath writes a route's path with its parameters unnamed, so that
// the mux's "/runs/{run_id}/resources/{path...}" and the document's
// "/runs/{run_id}/resources/{path}" compare equal.
func openapiPath(p string) string {
	p = strings.TrimSuffix(p, "{$}")
	return pathParam.ReplaceAllString(p, "{}")
}

// Every route the edge serves is described in GET /openapi.json, with its
// method, and every operation there answers errors as the API does.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	e, _ := edgeEnv(t)
	doc := e.do("GET", "/openapi.json", nil, bearer(adminSecret)...).json(t)
	described := map[string]map[string]any{}
	for p, item := range doc["paths"].(map[string]any) {
		described[openapiPath(p)] = item.(map[string]any)
	}
	for _, pattern := range slices.Sorted(maps.Keys(server.EdgeScopes(e.srv))) {
		method, path, _ := strings.Cut(pattern, " ")
		if path == "/console" || strings.HasPrefix(path, "/console/") {
			continue // the console's pages and files: HTML, CSS and JavaScript, not the API
		}
		op := operation(described, method, path)
		if rest, ok := strings.CutPrefix(path, "/w/{workflow_id}"); ok && op == nil {
			// The scoped API: GET /w/{workflow_id}/openapi.json describes
			// it, the same paths under that server URL.
			if rest == "" {
				rest = "/"
			}
			op = operation(described, method, rest)
		}
		if op == nil {
			t.Errorf("GET /openapi.json does not describe %s", pattern)
			continue
		}
		responses, _ := op["responses"].(map[string]any)
		def, _ := responses["default"].(map[string]any)
		if def == nil || !strings.Contains(def["description"].(string), "hint") {
			t.Errorf("%s has no default (error) response: %v", pattern, responses)
		}
	}
}
