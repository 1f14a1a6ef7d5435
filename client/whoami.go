package client

import (
	"context"
	"net/http"
	"slices"
)

// Identity is who the client's token is on the server: GET /whoami.
type Identity struct {
	// Principal is the token's name ("anonymous" on a server without
	// tokens).
	Principal string `json:"principal"`
	// Scopes are the scopes the token holds (read, runs, dispatch, exec,
	// admin).
	Scopes []string `json:"scopes"`
	// Exec reports whether an invocation this caller asks to execute
	// runs: the server executes (--allow-exec) and the token holds exec.
	Exec bool `json:"exec"`
}

// Has reports whether the identity holds scope.
func (id *Identity) Has(scope string) bool { return slices.Contains(id.Scopes, scope) }

// WhoAmI returns the caller's identity on the server (GET /whoami, read
// scope). A server that predates the route answers 404 (an *Error).
func (c *Client) WhoAmI(ctx context.Context) (*Identity, error) {
	r, err := c.do(ctx, http.MethodGet, c.baseStr+"/whoami", nil, nil)
	if err != nil {
		return nil, err
	}
	var id Identity
	if err := decodeInto(r, &id, "identity"); err != nil {
		return nil, err
	}
	return &id, nil
}
