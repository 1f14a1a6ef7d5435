// Package workflow defines ASMP workflows: finite state machines whose states
// carry hints, statuses, milestones, skills, CLI hooks, tools, resources,
// background tasks (with retry policies) and timers, and whose transitions
// carry typed `expects` and guards; a workflow may also carry schedules that
// start its runs. Time is computed here, purely: when a timer is due
// (State.DueTimers), how long a retry waits (RetryPolicy.Delay), a schedule's
// next and latest missed tick (Schedule.Next, Schedule.Missed).
//
// A Definition comes from the Go Builder (for embedding in Go services) or
// from a YAML/JSON file (Load, LoadFile). Both paths end in the same
// validation, so a Definition that exists is valid: every state it names is
// declared, every (state, action) pair is unique, every type is known and
// every guard compiles.
package workflow

import (
	"context"
	"io/fs"
	"regexp"
	"time"

	"github.com/asmp-dev/asmp/protocol"
)

// Patterns for identifiers, from the State Frame schema and our URL rules.
var (
	workflowIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*[a-z0-9]$`)
	statePattern      = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	namePattern       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
	pathPattern       = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$`)
)

// Definition is a validated workflow. Treat it as read-only: the engine
// shares one Definition between all runs of the workflow.
type Definition struct {
	ID           string
	Description  string
	InitialState string
	// States in declaration order.
	States []*State
	// Transitions in declaration order: the order of next_states.
	Transitions []*Transition
	// Source names where the definition came from (a file path, or "go").
	Source string
	// Warnings are non-fatal findings of validation (unreachable states).
	Warnings []Problem
	// Migrations are the file's `migrate:` blocks: how runs of older
	// versions move to this one. They are not part of the version.
	Migrations []Migration
	// Schedules start runs of the workflow at cron ticks (the file's
	// `schedules:`). They are not part of the version.
	Schedules []*Schedule

	byName map[string]*State
	from   map[string][]*Transition

	version   string              // see Version
	canonical []byte              // see Canonical
	label     string              // see Label
	missing   map[string][]string // state -> Go funcs a stored definition lacks
}

// Migration maps the states of runs pinned to version From to states of
// this definition: a `migrate:` block of a workflow file.
type Migration struct {
	From   string
	States map[string]string
}

// MigrationFrom returns the migration block for runs of version from.
func (d *Definition) MigrationFrom(from string) (Migration, bool) {
	for _, m := range d.Migrations {
		if m.From == from {
			return m, true
		}
	}
	return Migration{}, false
}

// State returns the declared state with that name.
func (d *Definition) State(name string) (*State, bool) {
	s, ok := d.byName[name]
	return s, ok
}

// From returns the transitions leaving state, in declaration order.
func (d *Definition) From(state string) []*Transition {
	return d.from[state]
}

// Transition returns the transition (state, action), if declared.
func (d *Definition) Transition(state, action string) (*Transition, bool) {
	for _, t := range d.from[state] {
		if t.Action == action {
			return t, true
		}
	}
	return nil, false
}

// State is one node of the machine with everything a frame shows there.
type State struct {
	Name string
	Hint string
	// Status is the declared status; "" means derived (see StatusOf).
	Status    string
	Milestone string
	Skill     *Skill
	CLI       *CLIHook
	Tools     []*Tool
	Resources []*Resource
	Task      *Task
	// Timers fire actions of this state when a run has stayed in it long
	// enough, or at a time its data names (see Timer).
	Timers []*Timer
}

// Tool returns the state's tool with that name.
func (s *State) Tool(name string) (*Tool, bool) {
	for _, t := range s.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// Resource returns the state's resource at path.
func (s *State) Resource(path string) (*Resource, bool) {
	for _, r := range s.Resources {
		if r.Path == path {
			return r, true
		}
	}
	return nil, false
}

// StatusOf returns the status a run shows in state s: the declared status,
// else completed for a state with no outgoing transitions, else active.
func (d *Definition) StatusOf(s *State) string {
	if s.Status != "" {
		return s.Status
	}
	if len(d.from[s.Name]) == 0 && s.Task == nil {
		return "completed"
	}
	return "active"
}

// Skill is the SKILL.md a state asks the agent to load. Its content comes
// from Content, else from the file Path inside FS.
type Skill struct {
	Name           string
	Path           string // the URL path under /skills/, and the file path in FS
	ContextSummary string
	Version        string
	Content        []byte
	FS             fs.FS
}

// CLIHook customises the CLI object of one state.
type CLIHook struct {
	Prompt    string
	Hint      string
	InputHint string
	Options   []CLIOption
}

// CLIOption is one option of a CLI hook.
type CLIOption struct {
	Action string
	Label  string
	Keys   string
}

// Tool is a stage-bound tool. Exactly one of Handler (Go) and Row (an OIP
// directory row key, invoked through the dispatch ledger) is set.
type Tool struct {
	Name        string
	Description string
	Expects     map[string]string
	// Constraints bound some Expects fields beyond their type (field ->
	// constraint; nil when none). The engine checks them when the tool is
	// called; tool schemas for models and MCP hosts carry them.
	Constraints map[string]protocol.Constraint
	Row         string
	Handler     ToolFunc
}

// ToolFunc implements a Go tool. Its result is returned as {"result": …}.
// A returned *protocol.Error keeps its code and hint; other errors are 500s.
type ToolFunc func(ctx context.Context, call ToolCall) (any, error)

// ToolCall is what a tool handler receives.
type ToolCall struct {
	RunID string
	State string
	Data  map[string]any // the run's data; do not modify
	Input map[string]any // the request body, checked against Expects
}

// Resource is a stage-bound resource, read from a Go Handler, a File inside
// FS, or inline Text.
type Resource struct {
	Path     string
	Name     string
	MimeType string
	File     string
	FS       fs.FS
	Text     string
	Handler  ResourceFunc
}

// ResourceFunc produces a resource's content for one run.
type ResourceFunc func(ctx context.Context, req ResourceRequest) ([]byte, error)

// ResourceRequest is what a resource handler receives.
type ResourceRequest struct {
	RunID string
	State string
	Path  string
	Data  map[string]any
}

// Task is a state's background work. Entering the state sets the run's status
// to processing; a worker runs Func (or invokes Row), then fires OnSuccess
// (or the action Func returns) or, on failure, OnFailure; without a failure
// action the run's status becomes failed.
type Task struct {
	Func      TaskFunc
	Row       string
	OnSuccess string
	OnFailure string
	// Output, when set, is the run data key that receives the task's
	// result when it succeeds, in the same commit as the OnSuccess (or
	// returned) action: a row's parsed JSON output (output_format json),
	// else its standard output; a Go task's TaskContext.Result.
	Output string
	// Receipt, when set, is the run data key that receives a row task's
	// ledger record when it succeeds: {"key": the invocation's ledger key,
	// "inv_ID": its receipt}. Hints may quote it, e.g. {data.receipt.key}.
	Receipt string
	// Retry, when set, retries a failed attempt with backoff; OnFailure
	// fires only after the last attempt fails. Nil means one attempt.
	Retry *RetryPolicy
}

// TaskFunc runs a background task. It returns the action to fire (""
// means the task's OnSuccess) or an error (the task failed). It may be run
// more than once for the same entry into the state (after a crash), so it
// should be idempotent per tc.IdempotencyKey.
type TaskFunc func(ctx context.Context, tc *TaskContext) (action string, err error)

// TaskContext is what a task receives.
type TaskContext struct {
	RunID string
	State string
	Data  map[string]any
	// IdempotencyKey is the same for every attempt of one entry into State:
	// its retries (Task.Retry) and its re-runs after a crash.
	IdempotencyKey string
	// Attempt is the attempt of this entry's task under the state's retry
	// policy, from 1 (a re-run after a crash keeps its attempt's number).
	Attempt int
	// MaxAttempts is the retry policy's bound on attempts: 1 without a
	// policy, so Attempt == MaxAttempts on the last attempt.
	MaxAttempts int
	// Report publishes progress to the run's stream subscribers.
	Report func(progress, hint string)
	// Result, set by the task, is stored under the state's Task.Output
	// data key when the task succeeds (ignored without an Output key).
	Result any
}

// Progress reports pct (0–100) and a hint to the run's stream subscribers.
func (tc *TaskContext) Progress(pct float64, hint string) {
	if tc == nil || tc.Report == nil {
		return
	}
	tc.Report(formatPct(pct), hint)
}

// Transition is one edge: From --Action--> To.
type Transition struct {
	From    string
	Action  string
	To      string
	Expects map[string]string // field -> canonical type
	// Constraints bound some Expects fields beyond their type (field ->
	// constraint; nil when none): checked when the transition fires (a 400
	// naming the bound), carried by tool schemas for models and MCP hosts,
	// never by frames (frames show Expects only).
	Constraints map[string]protocol.Constraint
	IsCritical  bool
	Guard       *Guard
}

// Guard decides whether a transition is offered for the run's current data.
// In Go it is Func; in files it is an expr-lang Expr with a Reason.
type Guard struct {
	Expr   string
	Reason string
	Func   GuardFunc
	// Clock times an expression's evaluation against GuardTimeout (nil:
	// the real clock); tests give it a clock they move.
	Clock func() time.Time
	prog  guardProgram
}

// GuardFunc returns whether the transition is allowed for data, and when it
// is not, the reason shown as the hint of the 403.
type GuardFunc func(data map[string]any) (ok bool, reason string)

// Pure reports whether the guard's verdict depends on the run's data alone,
// so that the same data always gets the same verdict: true for a nil guard
// and for an expression that does not call now(), false for a Go Func
// (which may consult anything).
func (g *Guard) Pure() bool {
	return g == nil || g.Func == nil && !g.prog.usesNow
}

// Allow evaluates the guard against data. A nil guard allows everything.
func (g *Guard) Allow(data map[string]any) (bool, string) {
	if g == nil {
		return true, ""
	}
	if g.Func != nil {
		ok, reason := g.Func(data)
		if !ok && reason == "" {
			reason = g.Reason
		}
		if !ok && reason == "" {
			reason = "This action is not allowed now."
		}
		return ok, reason
	}
	return g.prog.eval(data, g.Expr, g.Reason, g.Clock)
}
