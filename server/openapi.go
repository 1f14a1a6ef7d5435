package server

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/spec"
)

//go:embed openapi_extra.json
var openapiExtra []byte

var (
	openapiOnce sync.Once
	openapiDoc  map[string]any
	openapiErr  error
)

// OpenAPIDocument returns the canonical ASMP OpenAPI document extended with
// every endpoint asmp adds, with servers[0].url set to base.
func OpenAPIDocument(base string) (map[string]any, error) {
	openapiOnce.Do(func() {
		var doc, extra map[string]any
		if openapiErr = json.Unmarshal(spec.OpenAPI, &doc); openapiErr != nil {
			return
		}
		if openapiErr = json.Unmarshal(openapiExtra, &extra); openapiErr != nil {
			return
		}
		paths := doc["paths"].(map[string]any)
		for p, item := range extra["paths"].(map[string]any) {
			// "PATH#name" adds methods to a path the reference document has.
			if at := strings.IndexByte(p, '#'); at >= 0 {
				p = p[:at]
				if have, ok := paths[p].(map[string]any); ok {
					for m, op := range item.(map[string]any) {
						have[m] = op
					}
					continue
				}
			}
			paths[p] = item
		}
		// GET / does not create a run here.
		if root, ok := paths["/"].(map[string]any); ok {
			if get, ok := root["get"].(map[string]any); ok {
				get["description"] = "Discovery frame. Creates no run: run_id is the nil UUID and next_states offers one start action per served workflow, whose href is a POST that creates a run."
			}
			// POST / is the protocol's other start route: exactly POST /runs.
			if runs, ok := paths["/runs"].(map[string]any); ok && runs["post"] != nil {
				root["post"] = runs["post"]
			}
		}
		comps := doc["components"].(map[string]any)
		schemas, _ := comps["schemas"].(map[string]any)
		if schemas == nil {
			schemas = map[string]any{}
			comps["schemas"] = schemas
		}
		schemas["Error"] = errorSchema
		for _, item := range paths {
			for _, op := range item.(map[string]any) {
				op, ok := op.(map[string]any)
				if !ok {
					continue
				}
				responses, _ := op["responses"].(map[string]any)
				if responses == nil {
					responses = map[string]any{}
					op["responses"] = responses
				}
				if responses["default"] == nil {
					responses["default"] = errorResponse
				}
			}
		}
		comps["securitySchemes"] = map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "Only when the server runs with --token: Authorization: Bearer SECRET."}}
		info := doc["info"].(map[string]any)
		info["x-implementation"] = "asmp (Go)"
		openapiDoc = doc
	})
	if openapiErr != nil {
		return nil, openapiErr
	}
	// Shallow copy with this request's server URL.
	out := make(map[string]any, len(openapiDoc))
	for k, v := range openapiDoc {
		out[k] = v
	}
	out["servers"] = []any{map[string]any{"url": base, "description": "This ASMP server"}}
	return out, nil
}

// errorSchema is the body of every error answer of the API.
var errorSchema = map[string]any{
	"type":     "object",
	"required": []any{"error", "hint"},
	"properties": map[string]any{
		"error": map[string]any{"type": "string", "description": "The error code, e.g. invalid_input, not_found, version_conflict, unsupported_media_type, misdirected, insufficient_storage."},
		"hint":  map[string]any{"type": "string", "description": "What went wrong and what to do next, in a sentence or two."},
	},
	"additionalProperties": true,
}

// errorResponse is the default response of every operation: the statuses
// any request can meet besides its own (the routing and browser guards of
// SPEC section 16 included).
var errorResponse = map[string]any{
	"description": "An error, as JSON with an error code and a hint: 400 bad input, 401 no or bad token, 403 a scope the token lacks or a cross-site request, " +
		"404 unknown path or object, 405 another method (Allow names the served ones), 409 or 412 a version conflict, 413 a body over the limit, " +
		"415 a body that is not application/json, 421 a Host the server does not answer to, 422 input the workflow refuses, 429 rate limited (Retry-After), " +
		"431 request headers too large, 500 a server fault, 503 not ready, 507 the disk is full.",
	"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request, c *call) error {
	doc, err := OpenAPIDocument(c.base)
	if err != nil {
		return &protocol.Error{Code: protocol.EInternal, Hint: "openapi document", Err: err}
	}
	httpx.WriteJSON(w, http.StatusOK, doc)
	return nil
}
