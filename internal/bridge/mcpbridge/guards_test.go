package mcpbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/bridge/mcpbridge"
	"github.com/asmp-dev/asmp/oip"
	asmpserver "github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// inproc is an asmp server with the OIP ledger (which executes nothing)
// in this process, whose one principal holds the scopes in scopes, and a
// stdio-like bridge session over it (mcpbridge.Serve).
type inproc struct {
	t      *testing.T
	c      *client.Client
	cs     *mcp.ClientSession
	logs   *syncBuf
	mu     sync.Mutex
	scopes []string
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newInproc serves def with AllowExec set, dispatches rows (key → body),
// then connects a bridge session with opts (its Logger is set here).
func newInproc(t *testing.T, def *workflow.Definition, rows map[string]string, opts *mcpbridge.Options) *inproc {
	t.Helper()
	p := &inproc{t: t, logs: &syncBuf{}, scopes: auth.AllScopes}
	st := memstore.New()
	ledger, err := oip.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(st, []*workflow.Definition{def}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := asmpserver.New(eng, &asmpserver.Options{API: ledger.API(), AllowExec: true,
		Authenticate: func(*http.Request) (auth.Principal, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			return auth.Principal{Name: "ops", Scopes: p.scopes}, nil
		}})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); hs.Close() })
	if p.c, err = client.New(hs.URL, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for key, body := range rows {
		if _, err := p.c.Dispatch(ctx, key, json.RawMessage(body)); err != nil {
			t.Fatalf("dispatching %s: %v", key, err)
		}
	}
	if opts == nil {
		opts = &mcpbridge.Options{}
	}
	opts.Logger = slog.New(slog.NewTextHandler(p.logs, nil))
	ct, stt := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- mcpbridge.Serve(ctx, p.c, opts, time.Hour, stt) }()
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	if p.cs, err = cl.Connect(ctx, ct, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cs.Close()
		cancel()
		<-done
	})
	return p
}

func (p *inproc) setScopes(scopes ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scopes = scopes
}

func (p *inproc) call(name string, args any) *mcp.CallToolResult {
	p.t.Helper()
	res, err := p.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		p.t.Fatalf("%s: protocol error %v", name, err)
	}
	return res
}

func (p *inproc) tools() map[string]*mcp.Tool {
	p.t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range p.cs.Tools(context.Background(), nil) {
		if err != nil {
			p.t.Fatal(err)
		}
		out[tool.Name] = tool
	}
	return out
}

func (p *inproc) size() int64 {
	p.t.Helper()
	ck, err := p.c.Checkpoint(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	return ck.TreeSize
}

func oneStep(id string, actions ...string) *workflow.Definition {
	b := workflow.New(id, "A")
	b.State("A").Hint("On.")
	b.State("B").Hint("Done.")
	for _, a := range actions {
		b.Transition("A", a, "B")
	}
	return b.MustBuild()
}

const probeRow = `{"type": "directory_row", "command": "echo", "description": "Print words.", "args": [{"name": "words", "type": "array", "required": true}]}`

// The stdio bridge reads the token's identity again when an executing
// call is refused: a token that lost exec since then gets the built
// command (the call made again without execution); one that still holds
// it gets the refusal, with the server's reason.
func TestExecutionFollowsATokenThatChanged(t *testing.T) {
	p := newInproc(t, oneStep("gate-v1", "go"), map[string]string{"probe": probeRow}, nil)
	args := map[string]any{"words": []any{"hi"}}

	// exec held, the ledger executes nothing: refused, and still refused
	// after the identity is read again.
	res := p.call("row_probe", args)
	if !res.IsError || !strings.Contains(text(res), "--allow-exec") {
		t.Fatalf("an executing call on a ledger without execution: %s", text(res))
	}

	// exec taken away: the call that still asked to execute is refused,
	// then made again to build.
	p.setScopes(auth.ScopeRead, auth.ScopeRuns, auth.ScopeDispatch)
	res = p.call("row_probe", args)
	sc := structured(t, res)
	if res.IsError || sc["executed"] != false || strings.Join(strs2(sc["argv"]), " ") != "echo hi" {
		t.Fatalf("after the token lost exec: %s", text(res))
	}
	// And from now on the bridge builds at once: one record per call.
	before := p.size()
	if res = p.call("row_probe", args); res.IsError {
		t.Fatalf("building: %s", text(res))
	}
	if got := p.size() - before; got != 1 {
		t.Fatalf("a call appended %d records, want 1", got)
	}
}

// Of two row keys that map to one tool name, the later is left out and
// logged; the session still serves the first and every other tool.
func TestRowToolNamesCollide(t *testing.T) {
	p := newInproc(t, oneStep("collide-v1", "go"), map[string]string{"dup.a": probeRow, "dup:a": probeRow, "probe": probeRow}, nil)
	tools := p.tools()
	tool := tools["row_dup_a"]
	if tool == nil || tools["row_probe"] == nil || tools["asmp_start_run"] == nil {
		t.Fatalf("tools: %v", tools)
	}
	if !strings.Contains(tool.Description, `"dup.a"`) {
		t.Fatalf("row_dup_a is not the first row's (dup.a): %q", tool.Description)
	}
	if l := p.logs.String(); !strings.Contains(l, "row tool names collide") || !strings.Contains(l, "left_out=dup:a") {
		t.Fatalf("the collision is not logged: %s", l)
	}
}

// A workflow action named like a row tool never replaces it: the row
// tool stays the row's, and the action is left out (and logged).
func TestActionsNamedLikeRowToolsAreLeftOut(t *testing.T) {
	p := newInproc(t, oneStep("shadow-v1", "row_probe", "go"), map[string]string{"probe": probeRow}, &mcpbridge.Options{Execute: func(context.Context) bool { return false }})
	if res := p.call("asmp_start_run", map[string]any{}); res.IsError {
		t.Fatalf("start: %s", text(res))
	}
	tools := p.tools()
	if tools["go"] == nil || !strings.Contains(tools["row_probe"].Description, "directory row") {
		t.Fatalf("tools after the start: %v (row_probe: %+v)", tools, tools["row_probe"])
	}
	sc := structured(t, p.call("row_probe", map[string]any{"words": []any{"x"}}))
	if strings.Join(strs2(sc["argv"]), " ") != "echo x" {
		t.Fatalf("row_probe fired the action instead of the row: %v", sc)
	}
	if !strings.Contains(p.logs.String(), "a workflow tool is left out") {
		t.Fatalf("the left-out action is not logged: %s", p.logs.String())
	}
}
