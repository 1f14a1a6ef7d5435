package workflow_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

// summary renders what a definition means, to compare definitions built
// in different ways.
func summary(d *workflow.Definition) string {
	type st struct {
		Name, Hint, Status, Milestone string
		CLI                           *workflow.CLIHook
	}
	type tr struct {
		From, Action, To string
		Expects          map[string]string
		Critical, Guard  bool
	}
	var out struct {
		ID, Initial string
		States      []st
		Transitions []tr
	}
	out.ID, out.Initial = d.ID, d.InitialState
	for _, s := range d.States {
		out.States = append(out.States, st{s.Name, s.Hint, s.Status, s.Milestone, s.CLI})
	}
	for _, t := range d.Transitions {
		out.Transitions = append(out.Transitions, tr{t.From, t.Action, t.To, t.Expects, t.IsCritical, t.Guard != nil})
	}
	b, _ := json.MarshalIndent(out, "", " ")
	return string(b)
}

// The YAML file and the Go builder produce the same definition.
func TestFileAndBuilderAgree(t *testing.T) {
	f, err := workflow.LoadFile("testdata/config-wizard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(f), summary(examples.ConfigWizard()); got != want {
		t.Fatalf("file and builder differ:\n%s\nvs\n%s", got, want)
	}
	// The same shape in JSON loads to the same definition too.
	j, err := workflow.Load("wizard.json", []byte(`{
	  "workflow_id": "config-wizard-v1",
	  "description": "Walk through one configuration value, then confirm or cancel it.",
	  "initial_state": "INITIAL",
	  "states": {
	    "INITIAL": {"hint": "Start the config wizard.", "cli": {"prompt": "Config wizard", "hint": "Press 1 to start, or 2 to exit.", "options": [{"action": "start", "label": "Start wizard", "keys": "1"}, {"action": "exit", "label": "Exit", "keys": "2"}]}},
	    "CONFIGURE": {"hint": "Enter a value and save.", "cli": {"prompt": "Set value", "hint": "Enter your config value, then choose Save.", "input_hint": "Value (string):", "options": [{"action": "save", "label": "Save", "keys": "enter"}]}},
	    "CONFIRM": {"hint": "Confirm to apply or cancel.", "cli": {"prompt": "Apply configuration?", "hint": "Confirm to apply or cancel.", "options": [{"action": "confirm", "label": "Yes, apply", "keys": "y"}, {"action": "cancel", "label": "No, cancel", "keys": "n"}]}},
	    "DONE": {"hint": "Configuration applied."},
	    "CANCELLED": {"hint": "Configuration cancelled."}
	  },
	  "transitions": [
	    {"from": "INITIAL", "action": "start", "to": "CONFIGURE"},
	    {"from": "INITIAL", "action": "exit", "to": "CANCELLED"},
	    {"from": "CONFIGURE", "action": "save", "to": "CONFIRM", "expects": {"value": "str"}},
	    {"from": "CONFIRM", "action": "confirm", "to": "DONE"},
	    {"from": "CONFIRM", "action": "cancel", "to": "CANCELLED"}
	  ]
	}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if summary(j) != summary(f) {
		t.Fatalf("JSON and YAML differ:\n%s\nvs\n%s", summary(j), summary(f))
	}
}

// config-wizard-v1 is the spec's appendix A exactly: its INITIAL hint says
// "Press 1 to start, or 2 to exit", so 2 must exit.
func TestConfigWizardIsAppendixA(t *testing.T) {
	d := examples.ConfigWizard()
	var got []string
	for _, tr := range d.Transitions {
		got = append(got, tr.From+" -"+tr.Action+"-> "+tr.To)
	}
	want := []string{"INITIAL -start-> CONFIGURE", "INITIAL -exit-> CANCELLED", "CONFIGURE -save-> CONFIRM", "CONFIRM -confirm-> DONE", "CONFIRM -cancel-> CANCELLED"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	initial, _ := d.State("INITIAL")
	hook := initial.CLI
	wantOpts := []workflow.CLIOption{{Action: "start", Label: "Start wizard", Keys: "1"}, {Action: "exit", Label: "Exit", Keys: "2"}}
	if hook == nil || hook.Hint != "Press 1 to start, or 2 to exit." || !reflect.DeepEqual(hook.Options, wantOpts) {
		t.Fatalf("INITIAL hook %+v, want options %+v", hook, wantOpts)
	}
}

func TestValidationReportsEveryProblemWithPosition(t *testing.T) {
	_, err := workflow.LoadFile("testdata/broken.yaml")
	if err == nil {
		t.Fatal("broken workflow loaded")
	}
	msg := err.Error()
	for _, want := range []string{
		`testdata/broken.yaml:1:14: workflow_id: "Broken_ID" is not a valid workflow id`,
		`initial_state: initial state "START" is not declared`,
		`states.BEGIN.status: unknown status "sleeping"`,
		`states.middle: "middle" is not a valid state name`,
		`transitions[0].to: transition "go" goes to state "NOWHERE", which is not declared`,
		`transitions[1].action: state "BEGIN" already has a transition "go"`,
		`transitions[2].from: transition "boo" leaves state "GHOST"`,
		`transitions[3].expects.n: unknown type "decimal"`,
		`transitions[4].guard.expr: guard expression does not compile`,
		`states.BEGIN.cli.options[0].action: CLI option names action "fly", but state BEGIN has no such transition`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	// Every problem has a line number.
	for _, line := range strings.Split(msg, "\n") {
		if !strings.HasPrefix(line, "testdata/broken.yaml:") || line[len("testdata/broken.yaml:")] < '0' || line[len("testdata/broken.yaml:")] > '9' {
			t.Errorf("problem without a position: %q", line)
		}
	}
	var ve *workflow.ValidationError
	if !asValidation(err, &ve) || len(ve.Problems) != 10 {
		t.Fatalf("want 10 problems, got %v", err)
	}
}

func asValidation(err error, target **workflow.ValidationError) bool {
	v, ok := err.(*workflow.ValidationError)
	*target = v
	return ok
}

func TestUnknownFieldsAndSyntaxErrorsHavePositions(t *testing.T) {
	_, err := workflow.Load("typo.yaml", []byte("workflow_id: a-b\ninitial_state: A\nstates:\n  A:\n    hnt: typo\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `typo.yaml:5:5: states.A.hnt: unknown field "hnt"`) {
		t.Fatalf("unknown field: %v", err)
	}
	// Every unknown field is named, each at its place, beside the file's
	// other problems (the decoder alone stops at the first).
	var ve *workflow.ValidationError
	_, err = workflow.Load("typos.yaml", []byte("workflow_id: a-b\ninitial_state: A\nstates:\n  A:\n    colour: red\n    timers: [{after: 0s, action: go, when: 3}]\n  B: {shade: blue}\ntransitions:\n  - {from: A, action: go, to: C, colour: 1}\n"), nil)
	if !asValidation(err, &ve) {
		t.Fatalf("several unknown fields: %v", err)
	}
	for _, want := range []string{`typos.yaml:5:5: states.A.colour: unknown field "colour"`, `typos.yaml:6:38: states.A.timers[0].when: unknown field "when"`,
		`typos.yaml:7:7: states.B.shade: unknown field "shade"`, `typos.yaml:9:34: transitions[0].colour: unknown field "colour"`,
		`states.A.timers[0].after: after must be more than 0`, `transitions[0].to: transition "go" goes to state "C"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	if len(ve.Problems) != 6 {
		t.Errorf("%d problems, want 6:\n%v", len(ve.Problems), err)
	}
	_, err = workflow.Load("syntax.yaml", []byte("workflow_id: [unclosed\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "syntax.yaml") {
		t.Fatalf("syntax error: %v", err)
	}
	_, err = workflow.Load("empty.yaml", []byte(""), nil)
	if err == nil {
		t.Fatal("an empty file loaded")
	}
}

func TestUnreachableIsAWarning(t *testing.T) {
	d, err := workflow.Load("w.yaml", []byte(`
workflow_id: warn-v1
initial_state: A
states: {A: {hint: a}, B: {hint: b}, LOST: {hint: lost}}
transitions: [{from: A, action: go, to: B}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0].String(), "LOST is unreachable") || d.Warnings[0].Line == 0 {
		t.Fatalf("warnings = %+v", d.Warnings)
	}
	if s, _ := d.State("B"); d.StatusOf(s) != "completed" {
		t.Fatal("a state without outgoing transitions is completed")
	}
	if s, _ := d.State("A"); d.StatusOf(s) != "active" {
		t.Fatal("a state with transitions is active")
	}
}

func TestFilesStayInsideTheWorkflowDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "guide.md"), []byte("# Guide"), 0o644)
	os.WriteFile(filepath.Join(filepath.Dir(dir), "secret.txt"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(filepath.Dir(dir), "secret.txt"), filepath.Join(dir, "link.txt"))
	write := func(file string) string {
		p := filepath.Join(dir, "wf.yaml")
		os.WriteFile(p, []byte(`
workflow_id: files-v1
initial_state: A
states:
  A:
    hint: a
    resources: [{path: doc, file: `+file+`}]
`), 0o644)
		return p
	}
	d, err := workflow.LoadFile(write("guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := d.State("A")
	if s.Resources[0].MimeType != "text/markdown" {
		t.Fatalf("mime = %q", s.Resources[0].MimeType)
	}
	for _, bad := range []string{"../secret.txt", "/etc/passwd", "link.txt", "missing.md"} {
		if _, err := workflow.LoadFile(write(bad)); err == nil {
			t.Errorf("resource file %q was accepted", bad)
		}
	}
}

func TestGuardsAndTypes(t *testing.T) {
	d, err := workflow.Load("g.yaml", []byte(`
workflow_id: guard-v1
initial_state: A
states: {A: {hint: a}, B: {hint: b}}
transitions:
  - {from: A, action: big, to: B, guard: {expr: 'data.n > 10', reason: Too small.}, expects: {n: int, f: float, ok: bool, s: str, l: array, o: object}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := d.Transition("A", "big")
	want := map[string]string{"n": "integer", "f": "number", "ok": "boolean", "s": "string", "l": "array", "o": "object"}
	if !reflect.DeepEqual(tr.Expects, want) {
		t.Fatalf("normalised expects = %v", tr.Expects)
	}
	if ok, _ := tr.Guard.Allow(map[string]any{"n": int64(11)}); !ok {
		t.Fatal("guard refused 11 > 10")
	}
	if ok, reason := tr.Guard.Allow(map[string]any{"n": 3.5}); ok || reason != "Too small." {
		t.Fatalf("guard allowed 3.5: %v %q", ok, reason)
	}
	if ok, reason := tr.Guard.Allow(map[string]any{}); ok || !strings.HasPrefix(reason, "Too small.") {
		t.Fatalf("guard on missing data: %v %q", ok, reason)
	}
	if _, err := workflow.Load("g.yaml", []byte(`
workflow_id: guard-v1
initial_state: A
states: {A: {hint: a}}
transitions: [{from: A, action: x, to: A, guard: {expr: '1 + 1', reason: r}}]
`), nil); err == nil || !strings.Contains(err.Error(), "boolean") {
		t.Fatalf("non-boolean guard: %v", err)
	}
}

func TestGuardPurity(t *testing.T) {
	d, err := workflow.Load("p.yaml", []byte(`
workflow_id: pure-v1
initial_state: A
states: {A: {hint: a}}
transitions:
  - {from: A, action: data, to: A, guard: {expr: 'data.n > 10 && date("2020-01-01").Year() == 2020'}}
  - {from: A, action: clock, to: A, guard: {expr: 'data.n > 10 || now().Year() > 2000'}}
  - {from: A, action: none, to: A}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for action, want := range map[string]bool{"data": true, "clock": false, "none": true} {
		tr, _ := d.Transition("A", action)
		if got := tr.Guard.Pure(); got != want {
			t.Errorf("guard of %s: Pure() = %v, want %v", action, got, want)
		}
	}
	fn := &workflow.Guard{Func: func(map[string]any) (bool, string) { return true, "" }}
	if fn.Pure() {
		t.Error("a Go guard function is reported pure")
	}
}

func TestTaskOutputKey(t *testing.T) {
	src := func(output string) []byte {
		return []byte(`
workflow_id: out-v1
initial_state: A
states:
  A: {hint: a}
  W: {hint: w, task: {row: some.row, on_success: done, output: '` + output + `'}}
  B: {hint: b}
transitions:
  - {from: A, action: go, to: W}
  - {from: W, action: done, to: B}
`)
	}
	d, err := workflow.Load("o.yaml", src("product"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := d.State("W"); st.Task == nil || st.Task.Output != "product" || st.Task.Row != "some.row" {
		t.Fatalf("task = %+v", st.Task)
	}
	if _, err := workflow.Load("o.yaml", src(" product"), nil); err == nil || !strings.Contains(err.Error(), "states.W.task.output") {
		t.Fatalf("output key with spaces: %v", err)
	}
}

func TestGraphs(t *testing.T) {
	d := examples.ConfigWizard()
	m := d.Mermaid("CONFIRM")
	for _, want := range []string{"stateDiagram-v2", "[*] --> INITIAL", "CONFIGURE --> CONFIRM : save (value#58; string)", "DONE --> [*]", "class CONFIRM current"} {
		if !strings.Contains(m, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, m)
		}
	}
	dot := d.DOT("")
	for _, want := range []string{`digraph "config-wizard-v1"`, `"CONFIRM" -> "CANCELLED" [label="cancel"]`, `__start -> "INITIAL"`} {
		if !strings.Contains(dot, want) {
			t.Errorf("dot lacks %q:\n%s", want, dot)
		}
	}
}

func TestBuilderValidates(t *testing.T) {
	b := workflow.New("x", "A")
	b.State("A")
	b.Transition("A", "go", "B")
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "workflow_id") || !strings.Contains(err.Error(), `"B"`) {
		t.Fatalf("builder accepted an invalid workflow: %v", err)
	}
	b2 := workflow.New("tools-v1", "A")
	b2.State("A").Tool("t", "", nil, nil)
	if _, err := b2.Build(); err == nil || !strings.Contains(err.Error(), "exactly one implementation") {
		t.Fatalf("tool without handler: %v", err)
	}
}

// An expects field may be a type or an object with bounds; the file and
// the builder produce the same constraints, and frames keep the type.
func TestExpectsWithConstraints(t *testing.T) {
	src := `workflow_id: bounded-v1
initial_state: A
states: {A: {tools: [{name: pick, row: R, expects: {colour: {type: str, enum: [red, green]}}}]}, B: {}}
transitions:
  - {from: A, action: go, to: B, expects: {n: {type: integer, minimum: 1, maximum: 1000000}, name: {type: string, maxLength: 8, pattern: "^[a-z]+$"}, note: string}}
`
	d, err := workflow.Load("bounded.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := d.Transition("A", "go")
	one, max, eight := 1.0, 1e6, 8
	wantC := map[string]protocol.Constraint{"n": {Minimum: &one, Maximum: &max}, "name": {MaxLength: &eight, Pattern: "^[a-z]+$"}}
	if !reflect.DeepEqual(tr.Expects, map[string]string{"n": "integer", "name": "string", "note": "string"}) || !reflect.DeepEqual(tr.Constraints, wantC) {
		t.Fatalf("expects %v constraints %+v", tr.Expects, tr.Constraints)
	}
	st, _ := d.State("A")
	if tool := st.Tools[0]; tool.Expects["colour"] != "string" || !reflect.DeepEqual(tool.Constraints["colour"].Enum, []any{"red", "green"}) {
		t.Fatalf("tool %+v", tool)
	}
	b := workflow.New("bounded-v1", "A")
	b.State("A").RowTool("pick", "", map[string]string{"colour": "str"}, "R").ToolConstraint("pick", "colour", protocol.Constraint{Enum: []any{"red", "green"}})
	b.State("B")
	b.Transition("A", "go", "B").ExpectWith("n", "integer", protocol.Constraint{Minimum: &one, Maximum: &max}).
		ExpectWith("name", "string", protocol.Constraint{MaxLength: &eight, Pattern: "^[a-z]+$"}).Expect("note", "string")
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	gt, _ := g.Transition("A", "go")
	gs, _ := g.State("A")
	if !reflect.DeepEqual(gt.Constraints, tr.Constraints) || !reflect.DeepEqual(gs.Tools[0].Constraints, st.Tools[0].Constraints) {
		t.Fatalf("builder constraints %+v, file %+v", gt.Constraints, tr.Constraints)
	}
}

// Constraints that do not fit their field, or have the wrong shape, are
// load errors with positions.
func TestBadConstraintsAreRefused(t *testing.T) {
	src := `workflow_id: bounded-v1
initial_state: A
states: {A: {}, B: {}}
transitions:
  - {from: A, action: a, to: B, expects: {s: {type: string, minimum: 1}}}
  - {from: A, action: b, to: B, expects: {n: {type: number, pattern: "x"}}}
  - {from: A, action: c, to: B, expects: {n: {type: number, minimum: 5, maximum: 1}}}
  - {from: A, action: d, to: B, expects: {s: {type: string, pattern: "("}}}
  - {from: A, action: e, to: B, expects: {n: {type: integer, enum: [1, x]}}}
  - {from: A, action: f, to: B, expects: {n: {type: integer, max: 3}}}
  - {from: A, action: g, to: B, expects: {n: {minimum: 3}}}
  - {from: A, action: h, to: B, expects: {n: [integer]}}
`
	_, err := workflow.Load("bad.yaml", []byte(src), nil)
	if err == nil {
		t.Fatal("bad constraints loaded")
	}
	for _, want := range []string{
		`bad.yaml:5:`, `transitions[0].expects.s: minimum and maximum bound numbers; field "s" is a string`,
		`transitions[1].expects.n: pattern and maxLength bound strings; field "n" is a number`,
		`transitions[2].expects.n: minimum 5 is greater than maximum 1`,
		`transitions[3].expects.s.pattern: pattern does not compile`,
		`transitions[4].expects.n.enum[1]: enum value x is not of type integer`,
		`transitions[5].expects.n: unknown key "max"`,
		`transitions[6].expects.n: an expected field's object needs a type`,
		`transitions[7].expects.n: an expected field is a type name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// A reachable state from which no terminal state can be reached is a
// DeadEnd warning naming the path to it; every built-in workflow has none.
func TestDeadEndsAreFound(t *testing.T) {
	d, err := workflow.Load("trap.yaml", []byte(`workflow_id: trap-v1
initial_state: A
states: {A: {}, B: {}, C: {}, END: {}, T: {task: {row: R, on_success: ok}}, OK: {}}
transitions:
  - {from: A, action: go, to: B}
  - {from: A, action: stop, to: END}
  - {from: A, action: work, to: T}
  - {from: T, action: ok, to: OK}
  - {from: B, action: on, to: C}
  - {from: C, action: back, to: B}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var dead []string
	for _, w := range d.Warnings {
		if w.DeadEnd {
			dead = append(dead, w.String())
		}
	}
	if len(dead) != 2 || !strings.Contains(dead[0], "state B (path A -go-> B)") || !strings.Contains(dead[1], "state C (path A -go-> B -on-> C)") {
		t.Fatalf("dead ends = %q", dead)
	}
	for _, def := range append(examples.All(), examples.NumberFacts()) {
		for _, w := range def.Warnings {
			t.Errorf("%s: %s", def.ID, w)
		}
	}
}
