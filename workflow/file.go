package workflow

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// The file format (YAML, or the same shape in JSON). Field names are the
// wire names of SPEC section 5; unknown fields are errors.
type fileWorkflow struct {
	WorkflowID   string                `yaml:"workflow_id"`
	Description  string                `yaml:"description"`
	InitialState string                `yaml:"initial_state"`
	States       map[string]*fileState `yaml:"states"`
	Transitions  []fileTransition      `yaml:"transitions"`
	// Migrate is not part of the definition's version (see Version).
	Migrate []fileMigration `yaml:"migrate"`
	// Schedules are not part of the definition's version either.
	Schedules []fileSchedule `yaml:"schedules"`
}

type fileSchedule struct {
	Cron     string         `yaml:"cron"`
	Timezone string         `yaml:"timezone"`
	Data     map[string]any `yaml:"data"`
}

type fileTimer struct {
	After  string         `yaml:"after"`
	At     string         `yaml:"at"`
	Action string         `yaml:"action"`
	Data   map[string]any `yaml:"data"`
}

type fileRetry struct {
	MaxAttempts wholeNumber `yaml:"max_attempts"`
	Backoff     string      `yaml:"backoff"`
	MaxBackoff  string      `yaml:"max_backoff"`
	Jitter      bool        `yaml:"jitter"`
}

type fileMigration struct {
	From   string            `yaml:"from"`
	States map[string]string `yaml:"states"`
}

type fileState struct {
	Hint      string         `yaml:"hint"`
	Status    string         `yaml:"status"`
	Milestone string         `yaml:"milestone"`
	Skill     *fileSkill     `yaml:"skill"`
	CLI       *fileCLI       `yaml:"cli"`
	Tools     []fileTool     `yaml:"tools"`
	Resources []fileResource `yaml:"resources"`
	Task      *fileTask      `yaml:"task"`
	Timers    []fileTimer    `yaml:"timers"`
}

type fileSkill struct {
	Name           string `yaml:"name"`
	Path           string `yaml:"path"`
	ContextSummary string `yaml:"context_summary"`
	Version        string `yaml:"version"`
}

type fileCLI struct {
	Prompt    string          `yaml:"prompt"`
	Hint      string          `yaml:"hint"`
	InputHint string          `yaml:"input_hint"`
	Options   []fileCLIOption `yaml:"options"`
}

type fileCLIOption struct {
	Action string `yaml:"action"`
	Label  string `yaml:"label"`
	Keys   string `yaml:"keys"`
}

type fileTool struct {
	Name        string                `yaml:"name"`
	Description string                `yaml:"description"`
	Expects     map[string]fileExpect `yaml:"expects"`
	Row         string                `yaml:"row"`
}

type fileResource struct {
	Path     string `yaml:"path"`
	Name     string `yaml:"name"`
	MimeType string `yaml:"mime_type"`
	File     string `yaml:"file"`
	Text     string `yaml:"text"`
}

type fileTask struct {
	Row       string     `yaml:"row"`
	OnSuccess string     `yaml:"on_success"`
	OnFailure string     `yaml:"on_failure"`
	Output    string     `yaml:"output"`
	Receipt   string     `yaml:"receipt"`
	Retry     *fileRetry `yaml:"retry"`
}

type fileTransition struct {
	From       string                `yaml:"from"`
	Action     string                `yaml:"action"`
	To         string                `yaml:"to"`
	Expects    map[string]fileExpect `yaml:"expects"`
	IsCritical bool                  `yaml:"is_critical"`
	Guard      *fileGuard            `yaml:"guard"`
}

type fileGuard struct {
	Expr   string `yaml:"expr"`
	Reason string `yaml:"reason"`
}

// LoadFile reads and validates a workflow file (YAML or JSON). Files named
// by resources and skills are resolved relative to the file's directory and
// can never escape it.
func LoadFile(name string) (*Definition, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1)) // Load refuses what is longer
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(name))
	if err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	return Load(name, src, root.FS())
}

// Load parses and validates a workflow from src. source names it in
// messages; fsys (may be nil) is where `file` and skill `path` entries are
// read from.
func Load(source string, src []byte, fsys fs.FS) (*Definition, error) {
	body, fw, unknown, err := decodeFile(source, src)
	if err != nil {
		return nil, err
	}
	d := &Definition{
		ID:           fw.WorkflowID,
		Description:  fw.Description,
		InitialState: fw.InitialState,
		Source:       source,
	}
	var problems []Problem
	for _, name := range stateOrder(body, fw.States) {
		fs := fw.States[name]
		if fs == nil {
			fs = &fileState{}
		}
		s, ps := fs.toState(name, fsys)
		problems = append(problems, ps...)
		d.States = append(d.States, s)
	}
	for i, ft := range fw.Transitions {
		expects, constraints, ps := splitExpects(fmt.Sprintf("transitions[%d].expects", i), ft.Expects)
		problems = append(problems, ps...)
		t := &Transition{From: ft.From, Action: ft.Action, To: ft.To, Expects: expects, Constraints: constraints, IsCritical: ft.IsCritical}
		if ft.Guard != nil {
			t.Guard = &Guard{Expr: ft.Guard.Expr, Reason: ft.Guard.Reason}
		}
		d.Transitions = append(d.Transitions, t)
	}
	for _, m := range fw.Migrate {
		d.Migrations = append(d.Migrations, Migration(m))
	}
	for _, fs := range fw.Schedules {
		d.Schedules = append(d.Schedules, &Schedule{Cron: fs.Cron, Timezone: fs.Timezone, Data: fs.Data})
	}
	pos := func(p string) (int, int) { return position(body, p) }
	def, err := build(d, pos)
	if len(problems) > 0 || len(unknown) > 0 {
		for i := range problems {
			problems[i].Line, problems[i].Col = pos(problems[i].Path)
		}
		problems = append(problems, unknown...)
		var ve *ValidationError
		if errors.As(err, &ve) {
			problems = append(problems, ve.Problems...)
		}
		sortProblems(problems)
		return nil, &ValidationError{Source: source, Problems: problems}
	}
	return def, err
}

// decodeFile parses src into the file format. The YAML library can panic on
// some malformed documents; that becomes an error here, never a crash.
//
// Keys the format does not have are returned as problems (unknown), with
// the file decoded without them, so that they are reported beside every
// other problem; a value of the wrong kind still stops decoding.
func decodeFile(source string, src []byte) (body ast.Node, fw fileWorkflow, unknown []Problem, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &ValidationError{Source: source, Problems: []Problem{{Message: fmt.Sprintf("the file's structure cannot be decoded (a value has the wrong shape, e.g. a scalar where a list belongs): %v", v)}}}
		}
	}()
	if len(src) > MaxFileSize {
		return nil, fw, nil, &ValidationError{Source: source, Problems: []Problem{{Message: fmt.Sprintf("the file is %d bytes, over the limit of %d (4 MiB) for a workflow file; move long texts into resource and skill files", len(src), MaxFileSize)}}}
	}
	file, perr := parser.ParseBytes(src, 0)
	if perr != nil {
		return nil, fw, nil, yamlError(source, perr)
	}
	if len(file.Docs) != 1 || file.Docs[0].Body == nil {
		return nil, fw, nil, &ValidationError{Source: source, Problems: []Problem{{Message: "the file must hold exactly one workflow document"}}}
	}
	body = file.Docs[0].Body
	if p := checkExpansion(body); p != nil {
		return nil, fw, nil, &ValidationError{Source: source, Problems: []Problem{*p}}
	}
	unknown = unknownFields(body, reflect.TypeFor[fileWorkflow](), "")
	opts := []yaml.DecodeOption{yaml.Strict()}
	if len(unknown) > 0 {
		opts = nil // reported as problems, beside the others
	}
	if derr := yaml.NodeToValue(body, &fw, opts...); derr != nil {
		return nil, fw, nil, yamlError(source, derr)
	}
	return body, fw, unknown, nil
}

func (fs *fileState) toState(name string, fsys fs.FS) (*State, []Problem) {
	var problems []Problem
	p := "states." + name
	s := &State{Name: name, Hint: fs.Hint, Status: fs.Status, Milestone: fs.Milestone}
	if fs.Skill != nil {
		s.Skill = &Skill{Name: fs.Skill.Name, Path: fs.Skill.Path, ContextSummary: fs.Skill.ContextSummary, Version: fs.Skill.Version}
		if err := checkFile(fsys, fs.Skill.Path); err != nil {
			problems = append(problems, Problem{Path: p + ".skill.path", Message: err.Error()})
		} else {
			s.Skill.FS = fsys
		}
	}
	if fs.CLI != nil {
		h := &CLIHook{Prompt: fs.CLI.Prompt, Hint: fs.CLI.Hint, InputHint: fs.CLI.InputHint}
		for _, o := range fs.CLI.Options {
			h.Options = append(h.Options, CLIOption(o))
		}
		s.CLI = h
	}
	for i, t := range fs.Tools {
		expects, constraints, ps := splitExpects(fmt.Sprintf("%s.tools[%d].expects", p, i), t.Expects)
		problems = append(problems, ps...)
		s.Tools = append(s.Tools, &Tool{Name: t.Name, Description: t.Description, Expects: expects, Constraints: constraints, Row: t.Row})
	}
	for i, r := range fs.Resources {
		res := &Resource{Path: r.Path, Name: r.Name, MimeType: r.MimeType, File: r.File, Text: r.Text}
		if r.File != "" {
			if err := checkFile(fsys, r.File); err != nil {
				problems = append(problems, Problem{Path: fmt.Sprintf("%s.resources[%d].file", p, i), Message: err.Error()})
			} else {
				res.FS = fsys
			}
		}
		if res.MimeType == "" {
			res.MimeType = guessMime(r.File, r.Path)
		}
		s.Resources = append(s.Resources, res)
	}
	if fs.Task != nil {
		s.Task = &Task{Row: fs.Task.Row, OnSuccess: fs.Task.OnSuccess, OnFailure: fs.Task.OnFailure, Output: fs.Task.Output, Receipt: fs.Task.Receipt}
		if r := fs.Task.Retry; r != nil {
			s.Task.Retry = &RetryPolicy{MaxAttempts: wholeAttempts(r.MaxAttempts), Jitter: r.Jitter, backoffText: r.Backoff, maxBackoffText: r.MaxBackoff}
			if float64(s.Task.Retry.MaxAttempts) != float64(r.MaxAttempts) {
				s.Task.Retry.maxAttemptsFrac = float64(r.MaxAttempts)
			}
		}
	}
	for _, ft := range fs.Timers {
		s.Timers = append(s.Timers, &Timer{At: ft.At, Action: ft.Action, Data: ft.Data, afterText: ft.After})
	}
	return s, problems
}

// checkFile verifies that name is a relative path inside fsys that exists.
func checkFile(fsys fs.FS, name string) error {
	if fsys == nil {
		return fmt.Errorf("file %q cannot be read: this definition has no directory (load it from a file)", name)
	}
	clean := path.Clean(filepath.ToSlash(name))
	if name == "" || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || !fs.ValidPath(clean) {
		return fmt.Errorf("file %q must be a relative path inside the workflow file's directory", name)
	}
	st, err := fs.Stat(fsys, clean)
	if err != nil {
		return fmt.Errorf("file %q cannot be read: %v", name, unwrapPathError(err))
	}
	if st.IsDir() {
		return fmt.Errorf("file %q is a directory", name)
	}
	return nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func guessMime(file, p string) string {
	name := file
	if name == "" {
		name = p
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown":
		return "text/markdown"
	case ".yaml", ".yml":
		return "application/yaml"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "text/plain; charset=utf-8"
}

// stateOrder returns the state names in the order the file declares them.
func stateOrder(body ast.Node, states map[string]*fileState) []string {
	var order []string
	seen := map[string]bool{}
	if m := mappingAt(body, "states"); m != nil {
		for _, mv := range m.Values {
			k := keyString(mv.Key)
			if _, ok := states[k]; ok && !seen[k] {
				order = append(order, k)
				seen[k] = true
			}
		}
	}
	// Anything the AST walk missed (should not happen) keeps a stable order.
	var rest []string
	for k := range states {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sortStrings(rest)
	return append(order, rest...)
}

func mappingAt(body ast.Node, key string) *ast.MappingNode {
	root, ok := body.(*ast.MappingNode)
	if !ok {
		if mv, ok := body.(*ast.MappingValueNode); ok {
			root = &ast.MappingNode{Values: []*ast.MappingValueNode{mv}}
		} else {
			return nil
		}
	}
	for _, mv := range root.Values {
		if keyString(mv.Key) == key {
			switch n := mv.Value.(type) {
			case *ast.MappingNode:
				return n
			case *ast.MappingValueNode:
				return &ast.MappingNode{Values: []*ast.MappingValueNode{n}}
			}
		}
	}
	return nil
}

// keyString is a mapping key's value, without the quotes JSON keys have.
func keyString(k ast.MapKeyNode) string {
	if tk := k.GetToken(); tk != nil {
		return tk.Value
	}
	return k.String()
}

// position resolves a problem path like "transitions[2].to" to a line and
// column in the file, walking up to the nearest node that exists.
func position(body ast.Node, p string) (line, col int) {
	defer func() {
		if recover() != nil {
			line, col = 0, 0
		}
	}()
	for p != "" {
		yp, err := yaml.PathString("$." + p)
		if err == nil {
			if n, err := yp.FilterNode(body); err == nil && n != nil {
				if tk := n.GetToken(); tk != nil && tk.Position != nil {
					return tk.Position.Line, tk.Position.Column
				}
			}
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0, 0
}

func yamlError(source string, err error) error {
	msg := goTypeError.ReplaceAllStringFunc(yaml.FormatError(err, false, true), plainTypeError)
	return &ValidationError{Source: source, Problems: []Problem{{Message: strings.TrimSpace(msg)}}}
}

// goTypeError matches the decoder's message for a value of the wrong
// kind, which names Go's types and the loader's internal struct fields
// ("cannot unmarshal string into Go struct field fileWorkflow.States of
// type bool"): plainTypeError says it in the file's terms.
var goTypeError = regexp.MustCompile(`cannot unmarshal (\[\]interface \{\}|map\[[^\]]*\]interface \{\}|\S+) into Go (?:struct field \S+ of type|value of type) (\S+)`)

func plainTypeError(m string) string {
	sub := goTypeError.FindStringSubmatch(m)
	want := map[string]string{"bool": "true or false", "string": "a string", "int": "a whole number", "int64": "a whole number",
		"float64": "a number", "workflow.wholeNumber": "a whole number", "time.Duration": "a duration such as 10s or 2d"}[strings.TrimPrefix(sub[2], "*")]
	switch {
	case want != "":
	case strings.HasPrefix(sub[2], "[]"):
		want = "a list"
	default:
		want = "a mapping (key: value)"
	}
	got := map[string]string{"string": "a string", "bool": "true or false", "int": "a number", "uint": "a number", "float": "a number",
		"float64": "a number", "int64": "a number", "uint64": "a number"}[sub[1]]
	switch {
	case got != "":
	case strings.HasPrefix(sub[1], "[]"):
		got = "a list"
	case strings.HasPrefix(sub[1], "map"):
		got = "a mapping"
	default:
		got = sub[1]
	}
	return "expected " + want + " here, not " + got
}

// wholeNumber is a number a file must give as a whole number: decoded as
// any number, so that validation can refuse 2.9 by name rather than the
// decoder cutting it to 2.
type wholeNumber float64

// wholeAttempts is a file's max_attempts as an int: its whole part, within
// what validation accepts (a value that is not a whole number, or out of
// range, is refused there).
func wholeAttempts(n wholeNumber) int {
	f := float64(n)
	switch {
	case f != f || f < 0:
		return 0
	case f > MaxRetryAttempts:
		return MaxRetryAttempts + 1
	}
	return int(f)
}
