package cli_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/app/cli"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// A server with tokens: asmp mcp without ASMP_TOKEN (or with a wrong one)
// stops at once with an error naming ASMP_TOKEN, after one request, instead
// of polling the directory unauthenticated into a lockout of its address.
func TestMCPStopsWithoutAToken(t *testing.T) {
	eng, err := engine.New(memstore.New(), examples.All(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int32
	srv := server.New(eng, &server.Options{Authenticate: func(r *http.Request) (auth.Principal, error) {
		requests.Add(1)
		if r.Header.Get("Authorization") == "Bearer right-secret" {
			return auth.Open, nil
		}
		return auth.Principal{}, protocol.Errorf(protocol.EUnauthorized, "Send a valid token as Authorization: Bearer TOKEN.")
	}})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })

	for _, c := range []struct{ token, want string }{
		{"", "ASMP_TOKEN is not set"},
		{"wrong", "refused the token in ASMP_TOKEN"},
	} {
		requests.Store(0)
		env := map[string]string{"ASMP_TOKEN": c.token, "ASMP_STATE_DIR": t.TempDir()}
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), []string{"mcp", "--server", ts.URL},
			&cli.Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }})
		if code != 1 || !strings.Contains(errb.String(), c.want) || !strings.Contains(errb.String(), "ASMP_TOKEN") {
			t.Errorf("token %q: exit %d, stderr %q", c.token, code, errb.String())
		}
		if n := requests.Load(); n != 1 {
			t.Errorf("token %q: %d requests, want the one GET /whoami", c.token, n)
		}
		if strings.Contains(errb.String(), "wrong") && c.token == "wrong" {
			t.Errorf("the token was printed: %q", errb.String())
		}
	}

	// With the right token the bridge serves (and ends with stdin).
	env := map[string]string{"ASMP_TOKEN": "right-secret", "ASMP_STATE_DIR": t.TempDir()}
	var out, errb bytes.Buffer
	if code := cli.Main(context.Background(), []string{"mcp", "--server", ts.URL},
		&cli.Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }}); code != 0 {
		t.Errorf("with the token: exit %d, stderr %q", code, errb.String())
	}
}
