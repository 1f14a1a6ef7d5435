package workflow

import (
	"time"

	"github.com/asmp-dev/asmp/protocol"
)

// Builder assembles a Definition in Go. Methods record what they are given;
// Build validates the whole definition once, exactly as a file is validated.
//
//	b := workflow.New("approval-v1", "DRAFT")
//	b.State("DRAFT").Hint("Write the request, then submit it.")
//	b.State("DONE").Hint("Approved.")
//	b.Transition("DRAFT", "submit", "DONE").Expect("text", "string")
//	def, err := b.Build()
type Builder struct {
	def   *Definition
	state map[string]*State
}

// New starts a workflow with the given id and initial state.
func New(id, initialState string) *Builder {
	return &Builder{
		def:   &Definition{ID: id, InitialState: initialState, Source: "go"},
		state: map[string]*State{},
	}
}

// Description sets the workflow's description (shown in /workflows).
func (b *Builder) Description(text string) *Builder {
	b.def.Description = text
	return b
}

// Version gives the workflow an explicit version label. The label is part
// of the definition's canonical document, so it is part of its version:
// change it when a Go func (guard, tool, resource or task) changes in a
// way runs must not see mid-way, since the version is derived from the
// declarative part only and names Go funcs by their place, not their code.
func (b *Builder) Version(label string) *Builder {
	b.def.label = label
	return b
}

// State declares a state (or returns the one declared before under name)
// for further configuration. States appear in declaration order.
func (b *Builder) State(name string) *StateBuilder {
	s, ok := b.state[name]
	if !ok {
		s = &State{Name: name}
		b.state[name] = s
		b.def.States = append(b.def.States, s)
	}
	return &StateBuilder{s: s}
}

// Transition declares From --action--> to. Declaration order is the order
// of next_states.
func (b *Builder) Transition(from, action, to string) *TransitionBuilder {
	t := &Transition{From: from, Action: action, To: to}
	b.def.Transitions = append(b.def.Transitions, t)
	return &TransitionBuilder{t: t}
}

// CLI sets the CLI hook of state, like the Python and TypeScript SDKs'
// workflow.cli(state, ...).
func (b *Builder) CLI(state string, hook CLIHook) *Builder {
	b.State(state).CLI(hook)
	return b
}

// Schedule adds a schedule that starts a run at every tick of s.Cron (see
// Schedule), as a file's `schedules:` entry does.
func (b *Builder) Schedule(s Schedule) *Builder {
	b.def.Schedules = append(b.def.Schedules, &s)
	return b
}

// Build validates and returns the definition. The error is a
// *ValidationError listing every problem.
func (b *Builder) Build() (*Definition, error) {
	return build(b.def, nil)
}

// MustBuild is Build for definitions known to be valid; it panics otherwise.
func (b *Builder) MustBuild() *Definition {
	d, err := b.Build()
	if err != nil {
		panic(err)
	}
	return d
}

// build validates d, resolving positions with pos when given.
func build(d *Definition, pos func(path string) (line, col int)) (*Definition, error) {
	problems := finish(d)
	var errs []Problem
	d.Warnings = nil
	for _, p := range problems {
		if pos != nil {
			p.Line, p.Col = pos(p.Path)
		}
		if p.Warning {
			d.Warnings = append(d.Warnings, p)
		} else {
			errs = append(errs, p)
		}
	}
	if len(errs) > 0 {
		if pos != nil {
			sortProblems(errs)
		}
		return nil, &ValidationError{Source: d.Source, Problems: errs}
	}
	if err := d.seal(); err != nil {
		return nil, &ValidationError{Source: d.Source, Problems: []Problem{{Message: err.Error()}}}
	}
	return d, nil
}

// StateBuilder configures one state.
type StateBuilder struct{ s *State }

// Hint sets the hint shown in frames at this state.
func (sb *StateBuilder) Hint(text string) *StateBuilder { sb.s.Hint = text; return sb }

// Status declares the state's status (active, awaiting_input, completed, failed).
func (sb *StateBuilder) Status(status string) *StateBuilder { sb.s.Status = status; return sb }

// Milestone sets the label appended to the run's milestones on entry.
func (sb *StateBuilder) Milestone(label string) *StateBuilder { sb.s.Milestone = label; return sb }

// Skill sets the skill the frame's active_skill points at.
func (sb *StateBuilder) Skill(s Skill) *StateBuilder { sb.s.Skill = &s; return sb }

// CLI sets the state's CLI hook.
func (sb *StateBuilder) CLI(hook CLIHook) *StateBuilder { sb.s.CLI = &hook; return sb }

// Tool adds a Go tool to the state.
func (sb *StateBuilder) Tool(name, description string, expects map[string]string, fn ToolFunc) *StateBuilder {
	sb.s.Tools = append(sb.s.Tools, &Tool{Name: name, Description: description, Expects: expects, Handler: fn})
	return sb
}

// ToolConstraint bounds the expected field of the state's tool named tool
// (declared before with Tool or RowTool) beyond its type.
func (sb *StateBuilder) ToolConstraint(tool, field string, c protocol.Constraint) *StateBuilder {
	t, ok := sb.s.Tool(tool)
	if !ok {
		// Validation reports a tool without an implementation.
		t = &Tool{Name: tool}
		sb.s.Tools = append(sb.s.Tools, t)
	}
	if t.Constraints == nil {
		t.Constraints = map[string]protocol.Constraint{}
	}
	t.Constraints[field] = c
	return sb
}

// RowTool adds a tool implemented by an OIP directory row: rowKey is KEY
// (the row's current version) or KEY@inv_ID (one version, see PinRow).
func (sb *StateBuilder) RowTool(name, description string, expects map[string]string, rowKey string) *StateBuilder {
	sb.s.Tools = append(sb.s.Tools, &Tool{Name: name, Description: description, Expects: expects, Row: rowKey})
	return sb
}

// Resource adds a resource to the state.
func (sb *StateBuilder) Resource(r Resource) *StateBuilder {
	sb.s.Resources = append(sb.s.Resources, &r)
	return sb
}

// Task sets the state's background task: fn runs when a run enters the
// state and returns the action to fire ("" = onSuccess). A failing task
// fires onFailure, or marks the run failed when onFailure is "".
func (sb *StateBuilder) Task(fn TaskFunc, onSuccess, onFailure string) *StateBuilder {
	sb.s.Task = &Task{Func: fn, OnSuccess: onSuccess, OnFailure: onFailure}
	return sb
}

// RowTask sets a background task that invokes an OIP directory row with the
// run's matching data keys as input; rowKey is KEY or KEY@inv_ID (PinRow).
func (sb *StateBuilder) RowTask(rowKey, onSuccess, onFailure string) *StateBuilder {
	sb.s.Task = &Task{Row: rowKey, OnSuccess: onSuccess, OnFailure: onFailure}
	return sb
}

// TaskOutput names the run data key that receives the state's task result
// when it succeeds (see Task.Output). Call it after Task or RowTask.
func (sb *StateBuilder) TaskOutput(key string) *StateBuilder {
	if sb.s.Task != nil {
		sb.s.Task.Output = key
	}
	return sb
}

// TaskReceipt names the run data key that receives a row task's ledger
// record when it succeeds (see Task.Receipt). Call it after RowTask.
func (sb *StateBuilder) TaskReceipt(key string) *StateBuilder {
	if sb.s.Task != nil {
		sb.s.Task.Receipt = key
	}
	return sb
}

// TaskRetry retries the state's task when an attempt fails (see
// RetryPolicy). Call it after Task or RowTask.
func (sb *StateBuilder) TaskRetry(p RetryPolicy) *StateBuilder {
	if sb.s.Task != nil {
		sb.s.Task.Retry = &p
	}
	return sb
}

// After adds a timer that fires action once a run has stayed in the state
// for d, as `timers: [{after: d, action: action}]` in a file does.
func (sb *StateBuilder) After(d time.Duration, action string) *StateBuilder {
	return sb.Timer(Timer{After: d, Action: action})
}

// At adds a deadline: a timer that fires action at the time expression (an
// expr-lang expression over data, e.g. "data.due_at") yields, as `timers:
// [{at: expression, action: action}]` in a file does.
func (sb *StateBuilder) At(expression, action string) *StateBuilder {
	return sb.Timer(Timer{At: expression, Action: action})
}

// Timer adds a timer with every field given (see Timer), e.g. with Data.
func (sb *StateBuilder) Timer(t Timer) *StateBuilder {
	sb.s.Timers = append(sb.s.Timers, &t)
	return sb
}

// TransitionBuilder configures one transition.
type TransitionBuilder struct{ t *Transition }

// Expect adds one expected field and its type (string, number, integer,
// boolean, array, object; aliases int, float, bool, str).
func (tb *TransitionBuilder) Expect(field, typ string) *TransitionBuilder {
	if tb.t.Expects == nil {
		tb.t.Expects = map[string]string{}
	}
	tb.t.Expects[field] = typ
	return tb
}

// ExpectWith adds one expected field with its type and the bounds its value
// must keep (see protocol.Constraint), as an `expects: {field: {type: ...,
// minimum: ...}}` entry of a workflow file does.
func (tb *TransitionBuilder) ExpectWith(field, typ string, c protocol.Constraint) *TransitionBuilder {
	tb.Expect(field, typ)
	if tb.t.Constraints == nil {
		tb.t.Constraints = map[string]protocol.Constraint{}
	}
	tb.t.Constraints[field] = c
	return tb
}

// Expects sets all expected fields at once.
func (tb *TransitionBuilder) Expects(fields map[string]string) *TransitionBuilder {
	for k, v := range fields {
		tb.Expect(k, v)
	}
	return tb
}

// Critical marks the transition is_critical.
func (tb *TransitionBuilder) Critical() *TransitionBuilder { tb.t.IsCritical = true; return tb }

// Guard sets a Go guard: the transition is offered only when fn allows it.
func (tb *TransitionBuilder) Guard(fn GuardFunc) *TransitionBuilder {
	tb.t.Guard = &Guard{Func: fn}
	return tb
}

// GuardExpr sets an expr-lang guard over `data`, as in workflow files.
func (tb *TransitionBuilder) GuardExpr(expression, reason string) *TransitionBuilder {
	tb.t.Guard = &Guard{Expr: expression, Reason: reason}
	return tb
}
