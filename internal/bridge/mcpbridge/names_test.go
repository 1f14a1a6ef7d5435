package mcpbridge_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/bridge/mcpbridge"
	asmpserver "github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// A workflow action named like a bridge tool never replaces it: it is
// left out of the dynamic tools (and logged); the others are offered.
func TestActionsNamedLikeBridgeToolsAreLeftOut(t *testing.T) {
	b := workflow.New("names-v1", "A")
	b.State("A").Hint("Two ways on.")
	b.State("B").Hint("Done.")
	b.Transition("A", "asmp_start_run", "B")
	b.Transition("A", "go", "B")
	eng, err := engine.New(memstore.New(), []*workflow.Definition{b.MustBuild()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(asmpserver.New(eng, nil))
	defer hs.Close()
	c, err := client.New(hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mcpbridge.Serve(ctx, c, nil, time.Hour, st) }()
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "asmp_start_run", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("start: %v %v", err, res)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	hasGo := false
	for _, n := range names {
		hasGo = hasGo || n == "go"
	}
	if !hasGo {
		t.Fatalf("tools %v lack the action go", names)
	}
	// Calling asmp_start_run still starts a run (the static tool).
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "asmp_start_run", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("start again: %v %v", err, res)
	}
	if f := structuredFrame(t, res); f["state"] != "A" {
		t.Fatalf("asmp_start_run fired the action instead of starting a run: %v", f)
	}
	cs.Close()
	cancel()
	<-done
}

func structuredFrame(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	return structured(t, res)["frame"].(map[string]any)
}
