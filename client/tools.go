package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
)

// Kinds of ToolDef.
const (
	// ToolAction is a tool that fires one of the frame's next_states.
	ToolAction = "action"
	// ToolStage is a tool that calls a stage-bound tool of the frame.
	ToolStage = "tool"
)

// ToolDef is one tool a model or an MCP host may call in a frame's state:
// an offered action or a stage tool, with the JSON Schema of what it
// expects. Name is what the host sees ([a-zA-Z0-9_-]{1,64}); Target is the
// action or stage tool it stands for.
type ToolDef struct {
	// Name is the tool name: the action's name, or "tool_" and the stage
	// tool's name, mapped by protocol.ToolName (and made unique).
	Name string `json:"name"`
	// Description says what the tool does (the CLI label and hint of an
	// action, the description of a stage tool) and names the original.
	Description string `json:"description"`
	// Parameters is the JSON Schema object of the arguments
	// (protocol.ExpectsSchema of the expects map).
	Parameters map[string]any `json:"parameters"`
	// Kind is ToolAction or ToolStage.
	Kind string `json:"kind"`
	// Target is the action or the stage tool's name as the frame has it.
	Target string `json:"target"`
	// IsCritical marks an action the frame flags is_critical: a person
	// should confirm it before it is called.
	IsCritical bool `json:"is_critical,omitempty"`
}

// OpenAI returns the tool as an OpenAI-style Chat Completions tool:
// {"type": "function", "function": {name, description, parameters}}.
func (t ToolDef) OpenAI() map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{
		"name": t.Name, "description": t.Description, "parameters": t.Parameters,
	}}
}

// ToolCollision reports that two tools of a frame map to one tool name.
// The first keeps the name; the other is renamed (Renamed).
type ToolCollision struct {
	Name    string // the contested tool name
	Kept    string // kind and target of the tool that kept it, e.g. `action "a.b"`
	Renamed string // the tool name given to the other
	Target  string // kind and target of the renamed tool
}

// ToolCollisionError lists a frame's tool-name collisions. Tools returns it
// together with the complete list (in which every tool has a unique name),
// so a caller may log it and go on.
type ToolCollisionError struct {
	Collisions []ToolCollision
}

// Error names every collision.
func (e *ToolCollisionError) Error() string {
	parts := make([]string, len(e.Collisions))
	for i, c := range e.Collisions {
		parts[i] = fmt.Sprintf("%s and %s both map to tool name %q; %s is offered as %q", c.Kept, c.Target, c.Name, c.Target, c.Renamed)
	}
	return "tool names collide: " + strings.Join(parts, "; ")
}

// Tools returns the tools of frame: one per offered action (next_states, in
// order), then one per stage tool ("tool_" and its name), each with the
// JSON Schema of its expects as parameters. A frame's actions and stage
// tools never change the list's order, so the names are deterministic:
// when two map to one name (protocol.ToolName), the first keeps it and the
// later one gets a hash suffix, and the error is a *ToolCollisionError
// naming them; the list is complete either way. Descriptions use the
// frame's hint; ToolsWithCLI adds the CLI object's labels.
func Tools(frame protocol.Frame) ([]ToolDef, error) {
	return ToolsWithCLI(frame, protocol.CLI{})
}

// ToolsWithCLI is Tools with descriptions from the run's CLI object too:
// an action's description is its option label and the frame's hint (the
// one written for agents; the CLI hint is the human one, used only when
// the frame has none).
func ToolsWithCLI(frame protocol.Frame, cli protocol.CLI) ([]ToolDef, error) {
	return ToolsWithConstraints(frame, cli, Constraints{})
}

// ToolsWithConstraints is ToolsWithCLI whose parameter schemas also carry
// the fields' constraints (minimum, maximum, enum, pattern, maxLength; see
// (*Client).Constraints), so that a model is told the bounds a call must
// keep instead of learning them from refusals.
func ToolsWithConstraints(frame protocol.Frame, cli protocol.CLI, cons Constraints) ([]ToolDef, error) {
	labels := make(map[string]string, len(cli.Options))
	for _, o := range cli.Options {
		labels[o.Action] = o.Label
	}
	hint := frame.Hint
	if hint == "" {
		hint = cli.Hint
	}
	taken := map[string]bool{}
	owner := map[string]string{}
	var collisions []ToolCollision
	out := make([]ToolDef, 0, len(frame.NextStates)+len(frame.Tools))
	add := func(d ToolDef, original string) {
		plain := protocol.ToolName(original)
		d.Name = protocol.UniqueToolName(d.Kind, original, taken)
		who := fmt.Sprintf("%s %q", d.Kind, d.Target)
		if d.Name != plain {
			collisions = append(collisions, ToolCollision{Name: plain, Kept: owner[plain], Renamed: d.Name, Target: who})
		}
		taken[d.Name] = true
		owner[d.Name] = who
		out = append(out, d)
	}
	for _, ns := range frame.NextStates {
		add(ToolDef{
			Description: actionDescription(ns, labels[ns.Action], hint),
			Parameters:  protocol.ExpectsSchema(ns.Expects, cons.Actions[ns.Action]),
			Kind:        ToolAction, Target: ns.Action, IsCritical: ns.IsCritical,
		}, ns.Action)
	}
	for _, t := range frame.Tools {
		add(ToolDef{
			Description: stageDescription(t, frame.State),
			Parameters:  protocol.ExpectsSchema(t.Expects, cons.Tools[t.Name]),
			Kind:        ToolStage, Target: t.Name,
		}, protocol.StageToolPrefix+t.Name)
	}
	if len(collisions) > 0 {
		return out, &ToolCollisionError{Collisions: collisions}
	}
	return out, nil
}

func actionDescription(ns protocol.NextState, label, hint string) string {
	var b strings.Builder
	if label != "" && label != ns.Action {
		b.WriteString(label)
		b.WriteString(". ")
	}
	if hint != "" {
		b.WriteString(strings.TrimSpace(hint))
		if !strings.HasSuffix(b.String(), ".") {
			b.WriteString(".")
		}
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "Fires the action %q", ns.Action)
	if len(ns.Expects) > 0 {
		fmt.Fprintf(&b, " with %s", protocol.DescribeExpects(ns.Expects))
	}
	b.WriteString(".")
	if ns.IsCritical {
		b.WriteString(" Critical: a person must confirm it first.")
	}
	return b.String()
}

func stageDescription(t protocol.Tool, state string) string {
	var b strings.Builder
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString(d)
		if !strings.HasSuffix(d, ".") {
			b.WriteString(".")
		}
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "Calls the stage tool %q of state %s; the run stays where it is.", t.Name, state)
	return b.String()
}

// CallResult is what Call did: it fired an action (Frame is the run's new
// frame) or called a stage tool (Result is its result).
type CallResult struct {
	Tool   ToolDef
	Frame  *RunFrame
	Result any
}

// Call calls the tool name of Tools(frame) with arguments (a JSON object;
// empty or null = {}): it fires the action it stands for (through the
// action's href) or calls the stage tool. It does not ask anyone to
// confirm an is_critical action: a caller that drives runs for a person
// checks ToolDef.IsCritical first. A name the frame does not offer is a 403
// *Error whose hint lists the tools offered; arguments that are not a JSON
// object are a 400 *Error; the server's refusals come back as its *Error
// (400 wrong type, 403 not offered or guard, 404, 409).
func (c *Client) Call(ctx context.Context, frame protocol.Frame, name string, arguments json.RawMessage) (*CallResult, error) {
	return CallOn(ctx, c, frame, name, arguments)
}

// CallOn is (*Client).Call on any Backend (an in-process one included).
func CallOn(ctx context.Context, b Backend, frame protocol.Frame, name string, arguments json.RawMessage) (*CallResult, error) {
	defs, _ := Tools(frame) // collisions are resolved in the list itself
	var def *ToolDef
	for i := range defs {
		if defs[i].Name == name {
			def = &defs[i]
			break
		}
	}
	if def == nil {
		names := make([]string, len(defs))
		for i, d := range defs {
			names[i] = d.Name
		}
		sort.Strings(names)
		offered := "none"
		if len(names) > 0 {
			offered = strings.Join(names, ", ")
		}
		return nil, &Error{Status: http.StatusForbidden, Code: protocol.EForbidden,
			Hint:   fmt.Sprintf("No tool %q in state %s: the tools offered now are %s.", name, frame.State, offered),
			Fields: map[string]any{"allowed": names}}
	}
	input, err := callArguments(def.Name, arguments)
	if err != nil {
		return nil, err
	}
	res := &CallResult{Tool: *def}
	if def.Kind == ToolStage {
		res.Result, err = b.InvokeTool(ctx, frame.RunID, def.Target, input)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	ns, _ := frame.Action(def.Target)
	if ns.Href != "" {
		res.Frame, err = b.TransitionHref(ctx, ns.Href, input, nil)
	} else {
		res.Frame, err = b.Transition(ctx, frame.RunID, ns.Action, input, nil)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// callArguments decodes a tool call's arguments as the server would:
// integers stay exact.
func callArguments(name string, arguments json.RawMessage) (map[string]any, error) {
	a := bytes.TrimSpace(arguments)
	if len(a) == 0 || bytes.Equal(a, []byte("null")) {
		return map[string]any{}, nil
	}
	m, err := protocol.DecodeObject(a, 0)
	if err != nil {
		return nil, &Error{Status: http.StatusBadRequest, Code: protocol.EInvalid,
			Hint: fmt.Sprintf("The arguments of %s must be a JSON object: %s", name, protocol.ErrorHint(err))}
	}
	return m, nil
}

// Skill reads a skill document (a frame's active_skill.url; relative URLs
// are taken against the server). The token goes only to the server's own
// origin, as for every request.
func (c *Client) Skill(ctx context.Context, rawURL string) (*Content, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("skill URL %q: %w", rawURL, err)
	}
	if !u.IsAbs() {
		u = c.base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("skill URL %q: only http and https are read", rawURL)
	}
	r, err := c.do(ctx, http.MethodGet, u.String(), nil, http.Header{"Accept": {"text/markdown, text/plain;q=0.9, */*;q=0.5"}})
	if err != nil {
		return nil, err
	}
	return &Content{Body: r.body, MimeType: r.header.Get("Content-Type")}, nil
}
