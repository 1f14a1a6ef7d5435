// Package auth names who is calling and what they may do: principals with
// scopes, carried in a request's context. The server's middleware puts the
// principal there; handlers and the engine read it.
package auth

import (
	"context"
	"slices"
)

// Scopes a token can hold.
const (
	ScopeRead     = "read"     // read runs, frames, events, ledger records
	ScopeRuns     = "runs"     // start runs, fire transitions, invoke tools
	ScopeDispatch = "dispatch" // append to the OIP ledger
	ScopeExec     = "exec"     // execute directory rows
	ScopeAdmin    = "admin"    // operator actions: migrate runs between workflow versions
)

// AllScopes lists every scope.
var AllScopes = []string{ScopeRead, ScopeRuns, ScopeDispatch, ScopeExec, ScopeAdmin}

// Anonymous is the principal name used when no tokens are configured.
const Anonymous = "anonymous"

// Principal is an authenticated caller. Its Name is recorded (as the ledger
// `source` and the event `actor`); its secret never leaves the auth layer.
type Principal struct {
	Name   string
	Scopes []string
}

// Has reports whether p holds scope.
func (p Principal) Has(scope string) bool {
	return slices.Contains(p.Scopes, scope)
}

// MayExecute is the one decision of whether p may have directory rows
// executed: the server executes (serverExecutes: `asmp serve
// --allow-exec`) and p holds the exec scope. GET /whoami answers it, the
// MCP endpoint asks it for row tools, the ledger refuses an invocation's
// execution without it, and asks it of a row version's dispatcher (with
// the scopes recorded at dispatch) before a workflow runs that version.
func MayExecute(serverExecutes bool, p Principal) bool {
	return serverExecutes && p.Has(ScopeExec)
}

// Open is the principal of a server without tokens: anonymous, every scope.
var Open = Principal{Name: Anonymous, Scopes: AllScopes}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal in ctx, or Open when there is none.
func FromContext(ctx context.Context) Principal {
	if p, ok := ctx.Value(ctxKey{}).(Principal); ok {
		return p
	}
	return Open
}
