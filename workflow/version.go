package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/asmp-dev/asmp/protocol"
)

// Versions
//
// A definition's version is "sha256:" + the hex SHA-256 of its canonical
// document: the JSON below, normalised and then serialised by RFC 8785
// (JCS: keys sorted, numbers and strings in one spelling). Normalised means
// that the same workflow written two ways has one version:
//
//   - states are an object keyed by name (their order in a file does not
//     count); transitions are a list (their order is the order of
//     next_states, so it does);
//   - `expects` types are canonical (int → integer, …), and the fields'
//     constraints (minimum, maximum, enum, pattern, maxLength) are part
//     of it, so a run pinned to a version keeps its bounds; empty fields
//     are left out; a resource's mime type is the one it is served with;
//   - resource files and skill files are inlined (text, or base64 when they
//     are not UTF-8), so the document alone serves the definition after
//     its files are gone, on any replica;
//   - timers are part of it (durations in Go's spelling, 48h0m0s for 2d;
//     their data as JSON), and so is a task's retry policy (its cap filled
//     in when left out), since both change how a pinned run goes; a state
//     or task without them has no key for them, so a workflow without
//     timers or retries keeps the version it had before they existed;
//   - `migrate:` blocks and `schedules:` (they move runs or start them,
//     but are not how a run goes), file positions, comments and the
//     file's name are not part of it.
//
// Workflows defined in Go derive their version the same way, from their
// declarative part. Go funcs cannot be hashed; the document names each one
// by its place: "guard:FROM/action", "tool:STATE/name", "task:STATE" and
// "resource:STATE/path". A stored definition gets those funcs back, by
// name, from the definition of the same workflow the process serves now
// (see LoadStored). A change inside a Go func therefore does not change the
// version; give Builder.Version a new label when it should.

// docFormat is the version of the canonical document's shape.
const docFormat = 1

type docWorkflow struct {
	Format       int                  `json:"asmp_definition"`
	WorkflowID   string               `json:"workflow_id"`
	Description  string               `json:"description,omitempty"`
	Label        string               `json:"version_label,omitempty"`
	InitialState string               `json:"initial_state"`
	States       map[string]*docState `json:"states"`
	Transitions  []docTransition      `json:"transitions,omitempty"`
}

type docState struct {
	Hint      string        `json:"hint,omitempty"`
	Status    string        `json:"status,omitempty"`
	Milestone string        `json:"milestone,omitempty"`
	Skill     *docSkill     `json:"skill,omitempty"`
	CLI       *docCLI       `json:"cli,omitempty"`
	Tools     []docTool     `json:"tools,omitempty"`
	Resources []docResource `json:"resources,omitempty"`
	Task      *docTask      `json:"task,omitempty"`
	Timers    []docTimer    `json:"timers,omitempty"`
}

type docTimer struct {
	After  string         `json:"after,omitempty"`
	At     string         `json:"at,omitempty"`
	Action string         `json:"action"`
	Data   map[string]any `json:"data,omitempty"`
}

type docRetry struct {
	MaxAttempts int    `json:"max_attempts"`
	Backoff     string `json:"backoff"`
	MaxBackoff  string `json:"max_backoff"`
	Jitter      bool   `json:"jitter,omitempty"`
}

type docSkill struct {
	Name           string `json:"name"`
	Path           string `json:"path"`
	ContextSummary string `json:"context_summary,omitempty"`
	Version        string `json:"version,omitempty"`
	Content        string `json:"content,omitempty"`
	ContentBase64  string `json:"content_base64,omitempty"`
}

type docCLI struct {
	Prompt    string         `json:"prompt,omitempty"`
	Hint      string         `json:"hint,omitempty"`
	InputHint string         `json:"input_hint,omitempty"`
	Options   []docCLIOption `json:"options,omitempty"`
}

type docCLIOption struct {
	Action string `json:"action"`
	Label  string `json:"label"`
	Keys   string `json:"keys,omitempty"`
}

type docTool struct {
	Name        string                         `json:"name"`
	Description string                         `json:"description,omitempty"`
	Expects     map[string]string              `json:"expects,omitempty"`
	Constraints map[string]protocol.Constraint `json:"constraints,omitempty"`
	Row         string                         `json:"row,omitempty"`
	Go          string                         `json:"go,omitempty"`
}

type docResource struct {
	Path     string `json:"path"`
	Name     string `json:"name,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	Text     string `json:"text,omitempty"`
	Base64   string `json:"base64,omitempty"`
	Go       string `json:"go,omitempty"`
}

type docTask struct {
	Row       string    `json:"row,omitempty"`
	Go        string    `json:"go,omitempty"`
	OnSuccess string    `json:"on_success,omitempty"`
	OnFailure string    `json:"on_failure,omitempty"`
	Output    string    `json:"output,omitempty"`
	Retry     *docRetry `json:"retry,omitempty"`
}

type docTransition struct {
	From    string            `json:"from"`
	Action  string            `json:"action"`
	To      string            `json:"to"`
	Expects map[string]string `json:"expects,omitempty"`
	// Constraints bound expected fields beyond their type; they are part
	// of the version, and a run pinned to it keeps them.
	Constraints map[string]protocol.Constraint `json:"constraints,omitempty"`
	IsCritical  bool                           `json:"is_critical,omitempty"`
	Guard       *docGuard                      `json:"guard,omitempty"`
}

type docGuard struct {
	Expr   string `json:"expr,omitempty"`
	Reason string `json:"reason,omitempty"`
	Go     string `json:"go,omitempty"`
}

// Go func names in the canonical document.
func guardFuncName(from, action string) string   { return "guard:" + from + "/" + action }
func toolFuncName(state, name string) string     { return "tool:" + state + "/" + name }
func taskFuncName(state string) string           { return "task:" + state }
func resourceFuncName(state, path string) string { return "resource:" + state + "/" + path }

// Version returns the definition's version: "sha256:" + the hex SHA-256 of
// its canonical document (see Canonical).
func (d *Definition) Version() string { return d.version }

// Canonical returns the definition's canonical document (RFC 8785 JSON),
// the bytes its version hashes and what a store keeps. It is
// self-contained: LoadStored turns it back into a definition.
func (d *Definition) Canonical() []byte { return d.canonical }

// Label is the explicit version label a Go-defined workflow was given with
// Builder.Version ("" when none).
func (d *Definition) Label() string { return d.label }

// seal computes the canonical document and the version of a validated d,
// reading the files its resources and skill name.
func (d *Definition) seal() error {
	doc, err := d.document()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("workflow %s: canonical document: %w", d.ID, err)
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return fmt.Errorf("workflow %s: canonical document: %w", d.ID, err)
	}
	sum := sha256.Sum256(c)
	d.canonical = c
	d.version = "sha256:" + hex.EncodeToString(sum[:])
	return nil
}

// textOr64 returns b as a string when it is UTF-8 (JSON keeps it exactly),
// else as base64 in the second result.
func textOr64(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return "", base64.StdEncoding.EncodeToString(b)
}

func (d *Definition) document() (*docWorkflow, error) {
	doc := &docWorkflow{Format: docFormat, WorkflowID: d.ID, Description: d.Description, Label: d.label,
		InitialState: d.InitialState, States: map[string]*docState{}}
	for _, s := range d.States {
		ds := &docState{Hint: s.Hint, Status: s.Status, Milestone: s.Milestone}
		if sk := s.Skill; sk != nil {
			body := sk.Content
			if body == nil {
				b, err := readFile(sk.FS, sk.Path)
				if err != nil {
					return nil, fmt.Errorf("workflow %s: state %s: skill %s: %w", d.ID, s.Name, sk.Path, err)
				}
				body = b
			}
			ds.Skill = &docSkill{Name: sk.Name, Path: sk.Path, ContextSummary: sk.ContextSummary, Version: sk.Version}
			ds.Skill.Content, ds.Skill.ContentBase64 = textOr64(body)
		}
		if h := s.CLI; h != nil {
			dc := &docCLI{Prompt: h.Prompt, Hint: h.Hint, InputHint: h.InputHint}
			for _, o := range h.Options {
				dc.Options = append(dc.Options, docCLIOption(o))
			}
			ds.CLI = dc
		}
		for _, t := range s.Tools {
			dt := docTool{Name: t.Name, Description: t.Description, Expects: t.Expects, Constraints: docConstraints(t.Constraints), Row: t.Row}
			if t.Handler != nil {
				dt.Go = toolFuncName(s.Name, t.Name)
			}
			ds.Tools = append(ds.Tools, dt)
		}
		for _, r := range s.Resources {
			dr := docResource{Path: r.Path, Name: r.Name, MimeType: r.MimeType}
			switch {
			case r.Handler != nil:
				dr.Go = resourceFuncName(s.Name, r.Path)
			case r.File != "":
				b, err := readFile(r.FS, r.File)
				if err != nil {
					return nil, fmt.Errorf("workflow %s: state %s: resource %s: %w", d.ID, s.Name, r.Path, err)
				}
				dr.Text, dr.Base64 = textOr64(b)
			default:
				dr.Text, dr.Base64 = textOr64([]byte(r.Text))
			}
			ds.Resources = append(ds.Resources, dr)
		}
		if t := s.Task; t != nil {
			dt := &docTask{Row: t.Row, OnSuccess: t.OnSuccess, OnFailure: t.OnFailure, Output: t.Output}
			if t.Func != nil {
				dt.Go = taskFuncName(s.Name)
			}
			if r := t.Retry; r != nil {
				dt.Retry = &docRetry{MaxAttempts: r.MaxAttempts, Backoff: r.Backoff.String(), MaxBackoff: r.MaxBackoff.String(), Jitter: r.Jitter}
			}
			ds.Task = dt
		}
		for _, t := range s.Timers {
			dt := docTimer{At: t.At, Action: t.Action, Data: t.Data}
			if t.At == "" {
				dt.After = t.After.String()
			}
			ds.Timers = append(ds.Timers, dt)
		}
		doc.States[s.Name] = ds
	}
	for _, t := range d.Transitions {
		dt := docTransition{From: t.From, Action: t.Action, To: t.To, Expects: t.Expects, Constraints: docConstraints(t.Constraints), IsCritical: t.IsCritical}
		if g := t.Guard; g != nil {
			dg := &docGuard{Expr: g.Expr, Reason: g.Reason}
			if g.Func != nil {
				dg.Go, dg.Expr = guardFuncName(t.From, t.Action), ""
			}
			dt.Guard = dg
		}
		doc.Transitions = append(doc.Transitions, dt)
	}
	return doc, nil
}

// LoadStored turns a canonical document (Canonical) back into a
// definition, for a run pinned to a version this process may no longer
// serve. Its resources and skills are served from the document. The Go
// funcs it names are taken by name from registry, the definition of the
// same workflow this process serves now (nil when it serves none); a func
// registry does not have is replaced by one that refuses (a guard), or
// fails with a hint saying so (tools, tasks, resources), and is listed by
// MissingFuncs. The result has the version of body.
func LoadStored(body []byte, registry *Definition) (*Definition, error) {
	var doc docWorkflow
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("workflow: stored definition: %w", err)
	}
	if doc.Format != docFormat {
		return nil, fmt.Errorf("workflow: stored definition of %s has format %d; this server reads format %d", doc.WorkflowID, doc.Format, docFormat)
	}
	d := &Definition{ID: doc.WorkflowID, Description: doc.Description, InitialState: doc.InitialState, Source: "stored", label: doc.Label}
	missing := func(state, name string) {
		if d.missing == nil {
			d.missing = map[string][]string{}
		}
		d.missing[state] = append(d.missing[state], name)
	}
	names := make([]string, 0, len(doc.States))
	for n := range doc.States {
		names = append(names, n)
	}
	sortStrings(names)
	// The initial state first, then the others by name.
	for i, n := range names {
		if n == doc.InitialState {
			copy(names[1:i+1], names[:i])
			names[0] = n
			break
		}
	}
	for _, name := range names {
		ds := doc.States[name]
		if ds == nil {
			ds = &docState{}
		}
		s := &State{Name: name, Hint: ds.Hint, Status: ds.Status, Milestone: ds.Milestone}
		if sk := ds.Skill; sk != nil {
			content, err := fromTextOr64(sk.Content, sk.ContentBase64)
			if err != nil {
				return nil, fmt.Errorf("workflow: stored definition: skill %s: %w", sk.Path, err)
			}
			s.Skill = &Skill{Name: sk.Name, Path: sk.Path, ContextSummary: sk.ContextSummary, Version: sk.Version, Content: content}
		}
		if dc := ds.CLI; dc != nil {
			h := &CLIHook{Prompt: dc.Prompt, Hint: dc.Hint, InputHint: dc.InputHint}
			for _, o := range dc.Options {
				h.Options = append(h.Options, CLIOption(o))
			}
			s.CLI = h
		}
		for _, dt := range ds.Tools {
			t := &Tool{Name: dt.Name, Description: dt.Description, Expects: dt.Expects, Constraints: dt.Constraints, Row: dt.Row}
			if dt.Go != "" {
				if fn := registry.toolFunc(dt.Go); fn != nil {
					t.Handler = fn
				} else {
					missing(name, dt.Go)
					t.Handler = missingTool(dt.Go)
				}
			}
			s.Tools = append(s.Tools, t)
		}
		for _, dr := range ds.Resources {
			r := &Resource{Path: dr.Path, Name: dr.Name, MimeType: dr.MimeType}
			if dr.Go != "" {
				if fn := registry.resourceFunc(dr.Go); fn != nil {
					r.Handler = fn
				} else {
					missing(name, dr.Go)
					r.Handler = missingResource(dr.Go)
				}
			} else {
				b, err := fromTextOr64(dr.Text, dr.Base64)
				if err != nil {
					return nil, fmt.Errorf("workflow: stored definition: resource %s: %w", dr.Path, err)
				}
				r.Text = string(b)
				if r.Text == "" {
					r.Handler = func(ctx context.Context, req ResourceRequest) ([]byte, error) { return []byte{}, nil }
				}
			}
			s.Resources = append(s.Resources, r)
		}
		if dt := ds.Task; dt != nil {
			t := &Task{Row: dt.Row, OnSuccess: dt.OnSuccess, OnFailure: dt.OnFailure, Output: dt.Output}
			if dt.Go != "" {
				if fn := registry.taskFunc(dt.Go); fn != nil {
					t.Func = fn
				} else {
					missing(name, dt.Go)
					t.Func = missingTask(dt.Go)
				}
			}
			if r := dt.Retry; r != nil {
				t.Retry = &RetryPolicy{MaxAttempts: r.MaxAttempts, Jitter: r.Jitter, backoffText: r.Backoff, maxBackoffText: r.MaxBackoff}
			}
			s.Task = t
		}
		for _, dt := range ds.Timers {
			s.Timers = append(s.Timers, &Timer{At: dt.At, Action: dt.Action, Data: dt.Data, afterText: dt.After})
		}
		d.States = append(d.States, s)
	}
	for _, dt := range doc.Transitions {
		t := &Transition{From: dt.From, Action: dt.Action, To: dt.To, Expects: dt.Expects, Constraints: dt.Constraints, IsCritical: dt.IsCritical}
		if dg := dt.Guard; dg != nil {
			t.Guard = &Guard{Expr: dg.Expr, Reason: dg.Reason}
			if dg.Go != "" {
				if fn := registry.guardFunc(dg.Go); fn != nil {
					t.Guard.Func = fn
				} else {
					missing(dt.From, dg.Go)
					t.Guard.Func = missingGuard(dg.Go)
				}
			}
		}
		d.Transitions = append(d.Transitions, t)
	}
	if _, err := build(d, nil); err != nil {
		return nil, fmt.Errorf("workflow: stored definition of %s: %w", doc.WorkflowID, err)
	}
	c, err := jcs.Transform(body)
	if err != nil {
		return nil, fmt.Errorf("workflow: stored definition: %w", err)
	}
	sum := sha256.Sum256(c)
	d.canonical = c
	d.version = "sha256:" + hex.EncodeToString(sum[:])
	return d, nil
}

// docConstraints is the canonical form of a field's constraints: those
// that bound something, or nil (left out of the document).
func docConstraints(cs map[string]protocol.Constraint) map[string]protocol.Constraint {
	var out map[string]protocol.Constraint
	for k, c := range cs {
		if c.IsZero() {
			continue
		}
		if out == nil {
			out = map[string]protocol.Constraint{}
		}
		out[k] = c
	}
	return out
}

func fromTextOr64(text, b64 string) ([]byte, error) {
	if b64 != "" {
		return base64.StdEncoding.DecodeString(b64)
	}
	return []byte(text), nil
}

// MissingFuncs returns the Go funcs that state's transitions, tools,
// resources or task name but this process does not register (only for a
// stored definition, see LoadStored).
func (d *Definition) MissingFuncs(state string) []string { return d.missing[state] }

// readFile reads name from fsys; the name must stay inside it.
func readFile(fsys fs.FS, name string) ([]byte, error) {
	clean := path.Clean(filepath.ToSlash(name))
	if fsys == nil || !fs.ValidPath(clean) {
		return nil, fmt.Errorf("file %q cannot be read", name)
	}
	return fs.ReadFile(fsys, clean)
}

// The registry side of LoadStored: a served definition's Go funcs by the
// names the canonical document gives them. A nil definition has none.

func (d *Definition) guardFunc(name string) GuardFunc {
	if d == nil {
		return nil
	}
	for _, t := range d.Transitions {
		if t.Guard != nil && t.Guard.Func != nil && guardFuncName(t.From, t.Action) == name {
			return t.Guard.Func
		}
	}
	return nil
}

func (d *Definition) toolFunc(name string) ToolFunc {
	if d == nil {
		return nil
	}
	for _, s := range d.States {
		for _, t := range s.Tools {
			if t.Handler != nil && toolFuncName(s.Name, t.Name) == name {
				return t.Handler
			}
		}
	}
	return nil
}

func (d *Definition) resourceFunc(name string) ResourceFunc {
	if d == nil {
		return nil
	}
	for _, s := range d.States {
		for _, r := range s.Resources {
			if r.Handler != nil && resourceFuncName(s.Name, r.Path) == name {
				return r.Handler
			}
		}
	}
	return nil
}

func (d *Definition) taskFunc(name string) TaskFunc {
	if d == nil {
		return nil
	}
	for _, s := range d.States {
		if s.Task != nil && s.Task.Func != nil && taskFuncName(s.Name) == name {
			return s.Task.Func
		}
	}
	return nil
}

// ErrFuncMissing is what the stand-in of a Go func that this process does
// not register returns (see LoadStored).
var ErrFuncMissing = errors.New("workflow: the Go func this version names is not registered in this process")

func missingHint(name string) string {
	return fmt.Sprintf("This run's workflow version names Go func %s, which this server process does not register (it serves another version of the workflow); a server that has it can serve this.", name)
}

func missingGuard(name string) GuardFunc {
	return func(map[string]any) (bool, string) { return false, missingHint(name) }
}

func missingTool(name string) ToolFunc {
	return func(context.Context, ToolCall) (any, error) {
		return nil, protocol.Errorf(protocol.EUnavailable, "%s", missingHint(name))
	}
}

func missingResource(name string) ResourceFunc {
	return func(context.Context, ResourceRequest) ([]byte, error) {
		return nil, protocol.Errorf(protocol.EUnavailable, "%s", missingHint(name))
	}
}

func missingTask(name string) TaskFunc {
	return func(context.Context, *TaskContext) (string, error) {
		return "", fmt.Errorf("%s: %w", name, ErrFuncMissing)
	}
}
