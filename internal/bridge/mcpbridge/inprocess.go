package mcpbridge

import (
	"context"
	"net/http"
	"strings"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/client/embedded"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
)

// engineRuns is the run backend of a /mcp session: the SDK's in-process
// backend on the server's engine (so the engine's use cases decide, with
// no HTTP request per call), for the principal of the MCP request. The
// edge authenticated that request and counted it against the limits
// once; what the edge would still check per call is the scope of each
// write, done here with the edge's own check (httpx.CheckScope) and its
// words. Reads need read, which /mcp itself needs.
type engineRuns struct {
	*embedded.Client
	p auth.Principal
}

var _ runBackend = engineRuns{}

func newEngineRuns(e *engine.Engine, base string, p auth.Principal, maxDepth int) engineRuns {
	return engineRuns{Client: embedded.NewWith(e, &embedded.Options{Base: base, Actor: p.Name, Scopes: p.Scopes, MaxDepth: maxDepth}), p: p}
}

// need checks that the principal holds scope for the request method path
// would have been over HTTP.
func (r engineRuns) need(method, path, scope string) error {
	return embedded.ClientError(httpx.CheckScope(r.p, method, path, scope))
}

// StartRun implements client.Backend (the runs scope).
func (r engineRuns) StartRun(ctx context.Context, workflowID string, data map[string]any) (*client.RunFrame, error) {
	if err := r.need(http.MethodPost, "/runs", auth.ScopeRuns); err != nil {
		return nil, err
	}
	return r.Client.StartRun(ctx, workflowID, data)
}

// Transition implements client.Backend (the runs scope).
func (r engineRuns) Transition(ctx context.Context, runID, action string, input map[string]any, opts *client.TransitionOptions) (*client.RunFrame, error) {
	if err := r.need(http.MethodPost, "/runs/"+runID+"/transitions/"+action, auth.ScopeRuns); err != nil {
		return nil, err
	}
	return r.Client.Transition(ctx, runID, action, input, opts)
}

// TransitionHref implements client.Backend (the runs scope).
func (r engineRuns) TransitionHref(ctx context.Context, href string, input map[string]any, opts *client.TransitionOptions) (*client.RunFrame, error) {
	path := strings.TrimPrefix(href, r.BaseURL())
	if err := r.need(http.MethodPost, path, auth.ScopeRuns); err != nil {
		return nil, err
	}
	return r.Client.TransitionHref(ctx, href, input, opts)
}

// InvokeTool implements client.Backend (the runs scope).
func (r engineRuns) InvokeTool(ctx context.Context, runID, tool string, input map[string]any) (any, error) {
	if err := r.need(http.MethodPost, "/runs/"+runID+"/invoke/"+tool, auth.ScopeRuns); err != nil {
		return nil, err
	}
	return r.Client.InvokeTool(ctx, runID, tool, input)
}
