package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

func toolNames(defs []client.ToolDef) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

func schemaJSON(t *testing.T, d client.ToolDef) string {
	t.Helper()
	b, err := json.Marshal(d.Parameters)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Tools lists the offered actions, then the stage tools as tool_<name>,
// with typed JSON Schema parameters; Call fires them over HTTP.
func TestToolsAndCall(t *testing.T) {
	f := httpFixture(t, nil)
	c := f.b.(*client.Client)
	ctx := ctx(t)

	run := must(c.StartRun(ctx, "expense-approval-v1", nil))(t)
	cli := must(c.CLI(ctx, run.RunID))(t)
	defs, err := client.ToolsWithCLI(run.Frame, cli)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toolNames(defs), ","); got != "submit,tool_policy_check" {
		t.Fatalf("tools = %s", got)
	}
	submit, check := defs[0], defs[1]
	if submit.Kind != client.ToolAction || submit.Target != "submit" || check.Kind != client.ToolStage || check.Target != "policy_check" {
		t.Fatalf("kinds/targets = %+v %+v", submit, check)
	}
	if s := schemaJSON(t, submit); s != `{"additionalProperties":false,"properties":{"amount":{"type":"number"},"description":{"type":"string"}},"required":["amount","description"],"type":"object"}` {
		t.Fatalf("submit parameters = %s", s)
	}
	for _, part := range []string{"Submit claim", "POST submit with amount", `"submit"`} {
		if !strings.Contains(submit.Description, part) {
			t.Errorf("submit description %q lacks %q", submit.Description, part)
		}
	}
	if !strings.Contains(check.Description, "approved directly") || !strings.Contains(check.Description, `"policy_check"`) {
		t.Errorf("stage tool description = %q", check.Description)
	}
	oa, _ := json.Marshal(submit.OpenAI())
	if !strings.HasPrefix(string(oa), `{"function":{"description":`) || !strings.Contains(string(oa), `"name":"submit","parameters":{`) || !strings.HasSuffix(string(oa), `"type":"function"}`) {
		t.Fatalf("OpenAI form = %s", oa)
	}

	// A stage tool: the result, and the run stays where it is.
	res := must(c.Call(ctx, run.Frame, "tool_policy_check", json.RawMessage(`{"amount": 5000}`)))(t)
	if m, _ := res.Result.(map[string]any); m["route"] != "escalate" || res.Frame != nil {
		t.Fatalf("policy_check = %+v", res)
	}
	// The server's type check comes back as its 400 with the hint.
	_, err = c.Call(ctx, run.Frame, "submit", json.RawMessage(`{"amount": "12", "description": "Taxi"}`))
	wantError(t, err, 400, `"amount"`, "number")
	// Arguments that are not an object, and a name not offered.
	_, err = c.Call(ctx, run.Frame, "submit", json.RawMessage(`[1]`))
	wantError(t, err, 400, "submit", "JSON object")
	_, err = c.Call(ctx, run.Frame, "approve", nil)
	if ce := wantError(t, err, 403, `"approve"`, "submit, tool_policy_check"); len(ce.Allowed()) != 2 {
		t.Fatalf("allowed = %v", ce.Allowed())
	}
	// An action: the new frame. Integers stay exact.
	res = must(c.Call(ctx, run.Frame, "submit", json.RawMessage(`{"amount": 120, "description": "Taxi"}`)))(t)
	if res.Frame == nil || res.Frame.State != "REVIEW" || res.Frame.Data["amount"] != int64(120) || res.Tool.Target != "submit" {
		t.Fatalf("submit = %+v", res)
	}
	validFrame(t, res.Frame.Frame)
	defs, _ = client.Tools(res.Frame.Frame)
	if got := strings.Join(toolNames(defs), ","); got != "approve,reject,escalate_to_manager" || !defs[1].IsCritical || defs[0].IsCritical {
		t.Fatalf("review tools = %s %+v", got, defs)
	}
	if !strings.Contains(defs[1].Description, "a person must confirm") {
		t.Fatalf("critical description = %q", defs[1].Description)
	}
	// No arguments at all: {} is sent.
	res = must(c.Call(ctx, res.Frame.Frame, "approve", nil))(t)
	if res.Frame.State != "PAYING" {
		t.Fatalf("approve = %s", res.Frame.State)
	}
}

// Names that do not fit [a-zA-Z0-9_-]{1,64} are mapped, and two names that
// map alike are told apart deterministically: the first keeps the name.
func TestToolsCollisions(t *testing.T) {
	frame := protocol.Frame{RunID: "r", State: "S", Hint: "Pick.", NextStates: []protocol.NextState{
		{Action: "a.b", Method: "POST"},
		{Action: "a_b", Method: "POST", Expects: map[string]string{"n": "int"}},
		{Action: "tool_x", Method: "POST"},
	}, Tools: []protocol.Tool{{Name: "x"}}}
	defs, err := client.Tools(frame)
	var ce *client.ToolCollisionError
	if !errors.As(err, &ce) || len(ce.Collisions) != 2 {
		t.Fatalf("err = %v", err)
	}
	names := toolNames(defs)
	if names[0] != "a_b" || names[2] != "tool_x" || !strings.HasPrefix(names[1], "a_b_") || !strings.HasPrefix(names[3], "tool_x_") {
		t.Fatalf("names = %v", names)
	}
	if c := ce.Collisions[0]; c.Name != "a_b" || c.Kept != `action "a.b"` || c.Target != `action "a_b"` || c.Renamed != names[1] {
		t.Fatalf("collision = %+v", c)
	}
	if !strings.Contains(err.Error(), `tool "x"`) {
		t.Fatalf("error = %v", err)
	}
	again, _ := client.Tools(frame)
	if strings.Join(toolNames(again), ",") != strings.Join(names, ",") {
		t.Fatalf("not deterministic: %v then %v", names, toolNames(again))
	}
	if !strings.Contains(defs[0].Description, `"a.b"`) || defs[1].Target != "a_b" || defs[3].Kind != client.ToolStage {
		t.Fatalf("defs = %+v", defs)
	}
	if s := schemaJSON(t, defs[1]); !strings.Contains(s, `"n":{"type":"integer"}`) {
		t.Fatalf("a_b parameters = %s", s)
	}
}
