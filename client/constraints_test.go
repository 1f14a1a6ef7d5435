package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// boundedWorkflow is a workflow whose submit action and stage tool bound
// their fields; max is the bound on n.
func boundedWorkflow(t *testing.T, max string) *workflow.Definition {
	t.Helper()
	src := "workflow_id: bounded-v1\ninitial_state: FORM\nstates:\n" +
		"  FORM:\n    tools: [{name: lookup, row: lookup-v1, expects: {level: {type: str, enum: [low, high]}}}]\n" +
		"  DONE: {}\n" +
		"transitions:\n  - {from: FORM, action: submit, to: DONE, expects: {n: {type: int, minimum: 1, maximum: " + max + "}, code: {type: str, pattern: '^[A-Z]{3}$'}}}\n"
	d, err := workflow.Load("bounded.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The tools of a frame carry the bounds of the run's own workflow version,
// read from the stored definition its frame links: a run started before
// the bound changed keeps the old bound, as the server holds it to.
func TestToolsCarryTheVersionsConstraints(t *testing.T) {
	st := memstore.New()
	old, err := engine.New(st, []*workflow.Definition{boundedWorkflow(t, "10")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := old.StartRun(t.Context(), "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(st, []*workflow.Definition{boundedWorkflow(t, "50")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := serveEngine(t, eng, nil)
	ctx := ctx(t)

	params := func(f protocol.Frame) map[string]string {
		t.Helper()
		cons, err := c.Constraints(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		defs, err := client.ToolsWithConstraints(f, protocol.CLI{}, cons)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, d := range defs {
			out[d.Name] = schemaJSON(t, d)
		}
		return out
	}
	fresh := must(c.StartRun(ctx, "bounded-v1", nil))(t)
	got := params(fresh.Frame)
	if want := `{"additionalProperties":false,"properties":{"code":{"pattern":"^[A-Z]{3}$","type":"string"},"n":{"maximum":50,"minimum":1,"type":"integer"}},"required":["code","n"],"type":"object"}`; got["submit"] != want {
		t.Errorf("submit of a new run: %s\nwant %s", got["submit"], want)
	}
	if !strings.Contains(got["tool_lookup"], `"enum":["low","high"]`) {
		t.Errorf("the stage tool's parameters: %s", got["tool_lookup"])
	}

	old1 := must(c.Frame(ctx, pinned.ID))(t)
	if got := params(old1.Frame)["submit"]; !strings.Contains(got, `"maximum":10`) {
		t.Errorf("submit of the run pinned to the old version: %s", got)
	}
	// The server holds that run to the old bound.
	_, err = c.Transition(ctx, pinned.ID, "submit", map[string]any{"n": 20, "code": "ABC"}, nil)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Hint, "10") {
		t.Fatalf("n=20 on the run pinned to maximum 10: %v", err)
	}

	// A frame that links no version (a reference server) has no bounds.
	bare := fresh.Frame
	bare.Links = nil
	if cons, err := c.Constraints(ctx, bare); err != nil || cons.Actions != nil || cons.Tools != nil {
		t.Fatalf("a frame without a version link: %+v, %v", cons, err)
	}
}
