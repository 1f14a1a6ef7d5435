package client_test

import (
	"errors"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// WhoAmI reads the token's identity, also through a workflow-scoped base
// URL; a refusal is an *Error with the server's status.
func TestWhoAmI(t *testing.T) {
	tokens, err := auth.NewTokens([]string{"ops=ops-secret-0123456789", "agent=agent-secret-0123456789:read,runs,dispatch"}, "")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(memstore.New(), allWorkflows(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, &server.Options{Authenticate: tokens.Authenticate, AllowExec: true})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	ctx := ctx(t)

	ops := must(must(client.New(ts.URL+"/w/config-wizard-v1", &client.Options{Token: "ops-secret-0123456789"}))(t).WhoAmI(ctx))(t)
	if ops.Principal != "ops" || !ops.Exec || !slices.Equal(ops.Scopes, auth.AllScopes) || !ops.Has(auth.ScopeExec) {
		t.Fatalf("ops: %+v", ops)
	}
	agent := must(must(client.New(ts.URL, &client.Options{Token: "agent-secret-0123456789"}))(t).WhoAmI(ctx))(t)
	if agent.Principal != "agent" || agent.Exec || agent.Has(auth.ScopeExec) || !agent.Has(auth.ScopeDispatch) {
		t.Fatalf("agent: %+v", agent)
	}
	_, err = must(client.New(ts.URL, nil))(t).WhoAmI(ctx)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 401 || ce.Hint == "" {
		t.Fatalf("without a token: %v", err)
	}
}
