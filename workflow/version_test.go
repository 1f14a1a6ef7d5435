package workflow_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/workflow"
)

const versionYAML = `# a comment is not part of the version
workflow_id: approval-v1
description: Approve a request.
initial_state: DRAFT
states:
  DRAFT:
    hint: Write the request.
    resources: [{path: guide, name: Guide, file: guide.md}]
  REVIEW: {hint: Review it., skill: {name: reviewer, path: review/SKILL.md}}
  DONE: {}
transitions:
  - {from: DRAFT, action: submit, to: REVIEW, expects: {text: str, n: int}}
  - {from: REVIEW, action: approve, to: DONE, guard: {expr: 'data.n > 0', reason: Needs a number.}}
`

// The same workflow as JSON: keys and states in another order, types in
// their canonical spelling, the guide given inline instead of as a file.
const versionJSON = `{
  "transitions": [
    {"to": "REVIEW", "action": "submit", "from": "DRAFT", "expects": {"n": "integer", "text": "string"}},
    {"guard": {"reason": "Needs a number.", "expr": "data.n > 0"}, "from": "REVIEW", "action": "approve", "to": "DONE"}
  ],
  "states": {
    "DONE": {},
    "REVIEW": {"skill": {"path": "review/SKILL.md", "name": "reviewer"}, "hint": "Review it."},
    "DRAFT": {"resources": [{"name": "Guide", "path": "guide", "text": "# Guide\nRead me.\n", "mime_type": "text/markdown"}], "hint": "Write the request."}
  },
  "initial_state": "DRAFT",
  "description": "Approve a request.",
  "workflow_id": "approval-v1"
}`

// writeWorkflow writes a workflow file and the files it names into a new
// directory and loads it.
func writeWorkflow(t *testing.T, name, src string, files map[string]string) (*workflow.Definition, string) {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := workflow.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return d, dir
}

var versionFiles = map[string]string{"guide.md": "# Guide\nRead me.\n", "review/SKILL.md": "# Reviewing\n"}

func TestVersionIsTheHashOfTheCanonicalDocument(t *testing.T) {
	d, _ := writeWorkflow(t, "wf.yaml", versionYAML, versionFiles)
	sum := sha256.Sum256(d.Canonical())
	if want := "sha256:" + hex.EncodeToString(sum[:]); d.Version() != want {
		t.Fatalf("Version = %s, want the SHA-256 of Canonical: %s", d.Version(), want)
	}
	for _, inlined := range []string{`"# Guide\nRead me.\n"`, `"# Reviewing\n"`} {
		if !strings.Contains(string(d.Canonical()), inlined) {
			t.Errorf("the canonical document does not inline %s:\n%s", inlined, d.Canonical())
		}
	}
}

func TestVersionIsStableAcrossSpellings(t *testing.T) {
	y, _ := writeWorkflow(t, "wf.yaml", versionYAML, versionFiles)
	j, _ := writeWorkflow(t, "wf.json", versionJSON, map[string]string{"review/SKILL.md": "# Reviewing\n"})
	if y.Version() != j.Version() {
		t.Fatalf("the same workflow in YAML and JSON has two versions:\n%s\n%s\n%s\n%s", y.Version(), y.Canonical(), j.Version(), j.Canonical())
	}
	// A migrate: block is not part of the version.
	withMigrate := versionYAML + "migrate:\n  - {from: " + y.Version() + ", states: {REVIEW: DRAFT}}\n"
	m, _ := writeWorkflow(t, "wf.yaml", withMigrate, versionFiles)
	if m.Version() != y.Version() {
		t.Fatalf("a migrate: block changed the version: %s, want %s", m.Version(), y.Version())
	}
	if mig, ok := m.MigrationFrom(y.Version()); !ok || mig.States["REVIEW"] != "DRAFT" {
		t.Fatalf("MigrationFrom = %+v, %v", mig, ok)
	}
}

func TestVersionChangesWithTheDefinition(t *testing.T) {
	base, _ := writeWorkflow(t, "wf.yaml", versionYAML, versionFiles)
	for name, c := range map[string]struct {
		src   string
		files map[string]string
	}{
		"a hint":                    {strings.Replace(versionYAML, "Review it.", "Review it now.", 1), versionFiles},
		"a resource file's content": {versionYAML, map[string]string{"guide.md": "# Guide\nRead me twice.\n", "review/SKILL.md": "# Reviewing\n"}},
		"a skill file's content":    {versionYAML, map[string]string{"guide.md": "# Guide\nRead me.\n", "review/SKILL.md": "# Reviewing, v2\n"}},
		"a constraint":              {strings.Replace(versionYAML, "n: int}", "n: {type: int, maximum: 10}}", 1), versionFiles},
		"another transition":        {strings.Replace(versionYAML, "transitions:\n", "transitions:\n  - {from: DRAFT, action: skip, to: DONE}\n", 1), versionFiles},
	} {
		d, _ := writeWorkflow(t, "wf.yaml", c.src, c.files)
		if d.Version() == base.Version() {
			t.Errorf("changing %s kept the version %s", name, d.Version())
		}
	}
}

// The order of a state's transitions is the order its actions are
// offered in: swapping two changes the version.
func TestVersionFollowsTheOrderOfTransitions(t *testing.T) {
	submit := "  - {from: DRAFT, action: submit, to: REVIEW, expects: {text: str, n: int}}\n"
	skip := "  - {from: DRAFT, action: skip, to: DONE}\n"
	first, _ := writeWorkflow(t, "wf.yaml", strings.Replace(versionYAML, submit, submit+skip, 1), versionFiles)
	second, _ := writeWorkflow(t, "wf.yaml", strings.Replace(versionYAML, submit, skip+submit, 1), versionFiles)
	if first.Version() == second.Version() {
		t.Fatalf("swapping two transitions of DRAFT kept the version %s", first.Version())
	}
	if a, b := first.From("DRAFT"), second.From("DRAFT"); len(a) != 2 || len(b) != 2 || a[0].Action != "submit" || b[0].Action != "skip" {
		t.Fatalf("transitions of DRAFT: %v and %v", a, b)
	}
}

func TestLoadStoredServesTheDocumentAlone(t *testing.T) {
	d, dir := writeWorkflow(t, "wf.yaml", versionYAML, versionFiles)
	if err := os.RemoveAll(dir); err != nil { // the file and everything it named
		t.Fatal(err)
	}
	s, err := workflow.LoadStored(d.Canonical(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version() != d.Version() || string(s.Canonical()) != string(d.Canonical()) {
		t.Fatalf("LoadStored gives version %s, want %s", s.Version(), d.Version())
	}
	if summary(s) != summary(reorder(d, s)) {
		t.Fatalf("the stored definition differs:\n%s\nwant\n%s", summary(s), summary(d))
	}
	draft, _ := s.State("DRAFT")
	if res, ok := draft.Resource("guide"); !ok || res.Text != "# Guide\nRead me.\n" || res.MimeType != "text/markdown" {
		t.Fatalf("the stored resource is %+v", res)
	}
	review, _ := s.State("REVIEW")
	if string(review.Skill.Content) != "# Reviewing\n" {
		t.Fatalf("the stored skill is %q", review.Skill.Content)
	}
	tr, _ := s.Transition("REVIEW", "approve")
	if ok, reason := tr.Guard.Allow(map[string]any{"n": 0}); ok || reason != "Needs a number." {
		t.Fatalf("the stored guard allows n=0: %v %q", ok, reason)
	}
}

// reorder returns d with its states in the order of s (LoadStored orders
// states by name, the initial one first: a file's order is not stored).
func reorder(d, s *workflow.Definition) *workflow.Definition {
	c := *d
	c.States = nil
	for _, st := range s.States {
		x, _ := d.State(st.Name)
		c.States = append(c.States, x)
	}
	return &c
}

func goApproval(label string, guard workflow.GuardFunc, task workflow.TaskFunc) *workflow.Definition {
	b := workflow.New("go-approval-v1", "DRAFT").Version(label)
	b.State("DRAFT").Hint("Write it.").Tool("lint", "Lint the text.", map[string]string{"text": "string"},
		func(ctx context.Context, call workflow.ToolCall) (any, error) { return "linted", nil })
	b.State("PAYING").Task(task, "paid", "")
	b.State("DONE")
	b.Transition("DRAFT", "submit", "PAYING").Guard(guard)
	b.Transition("PAYING", "paid", "DONE")
	return b.MustBuild()
}

func TestGoDefinedVersions(t *testing.T) {
	allow := func(map[string]any) (bool, string) { return true, "" }
	refuse := func(map[string]any) (bool, string) { return false, "no" }
	task := func(context.Context, *workflow.TaskContext) (string, error) { return "", nil }
	a := goApproval("", allow, task)
	// Go funcs are named by their place, not hashed: another func body
	// keeps the version...
	if b := goApproval("", refuse, task); b.Version() != a.Version() {
		t.Fatalf("a changed Go guard changed the version: %s, want %s", b.Version(), a.Version())
	}
	for _, name := range []string{`"guard:DRAFT/submit"`, `"tool:DRAFT/lint"`, `"task:PAYING"`} {
		if !strings.Contains(string(a.Canonical()), name) {
			t.Errorf("the canonical document does not name %s:\n%s", name, a.Canonical())
		}
	}
	// ...and an explicit label is how a Go-defined workflow says it changed.
	l := goApproval("2", refuse, task)
	if l.Version() == a.Version() || l.Label() != "2" {
		t.Fatalf("the label did not change the version: %s (label %q)", l.Version(), l.Label())
	}

	// A stored version gets its Go funcs back by name from the served definition.
	s, err := workflow.LoadStored(a.Canonical(), l)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.MissingFuncs("DRAFT")) != 0 || len(s.MissingFuncs("PAYING")) != 0 {
		t.Fatalf("funcs missing with a registry that has them: %v %v", s.MissingFuncs("DRAFT"), s.MissingFuncs("PAYING"))
	}
	tr, _ := s.Transition("DRAFT", "submit")
	if ok, _ := tr.Guard.Allow(nil); ok {
		t.Fatal("the stored guard is not the served definition's func")
	}
	// Without them, the stand-ins refuse and say why.
	s, err = workflow.LoadStored(a.Canonical(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.MissingFuncs("DRAFT"); len(got) != 2 {
		t.Fatalf("MissingFuncs(DRAFT) = %v, want the guard and the tool", got)
	}
	tr, _ = s.Transition("DRAFT", "submit")
	if ok, reason := tr.Guard.Allow(nil); ok || !strings.Contains(reason, "guard:DRAFT/submit") {
		t.Fatalf("a missing guard: %v %q", ok, reason)
	}
	draft, _ := s.State("DRAFT")
	lint, _ := draft.Tool("lint")
	if _, err := lint.Handler(context.Background(), workflow.ToolCall{}); err == nil || !strings.Contains(err.Error(), "tool:DRAFT/lint") {
		t.Fatalf("a missing tool: %v", err)
	}
	paying, _ := s.State("PAYING")
	if _, err := paying.Task.Func(context.Background(), &workflow.TaskContext{}); !errors.Is(err, workflow.ErrFuncMissing) {
		t.Fatalf("a missing task: %v", err)
	}
}

func TestMigrateBlocksAreValidated(t *testing.T) {
	v := "sha256:" + strings.Repeat("ab", 32)
	for name, c := range map[string]struct{ block, want string }{
		"a mapping to an undeclared state": {"migrate: [{from: " + v + ", states: {OLD: NOPE}}]\n", `mapped to "NOPE", which is not declared`},
		"a from that is no version":        {"migrate: [{from: v1, states: {OLD: DONE}}]\n", "is not a workflow version"},
		"two blocks for one version":       {"migrate: [{from: " + v + ", states: {}}, {from: " + v + ", states: {}}]\n", "has two migrate blocks"},
	} {
		_, err := workflow.Load("wf.yaml", []byte("workflow_id: x-v1\ninitial_state: A\nstates: {A: {}, DONE: {}}\ntransitions: [{from: A, action: go, to: DONE}]\n"+c.block), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// A stored definition keeps its fields' constraints: a run pinned to it
// is held to the bounds it was started with, after its file has changed.
func TestLoadStoredKeepsConstraints(t *testing.T) {
	src := strings.Replace(versionYAML, "expects: {text: str, n: int}}", "expects: {text: {type: str, pattern: '^[a-z]+$'}, n: {type: int, maximum: 10}}}", 1)
	src = strings.Replace(src, "  DONE: {}\n", "  DONE:\n    tools: [{name: note, row: note-v1, expects: {level: {type: str, enum: [low, high]}}}]\n", 1)
	d, _ := writeWorkflow(t, "wf.yaml", src, versionFiles)
	s, err := workflow.LoadStored(d.Canonical(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version() != d.Version() {
		t.Fatalf("LoadStored gives version %s, want %s", s.Version(), d.Version())
	}
	tr, _ := s.Transition("DRAFT", "submit")
	if c := tr.Constraints["n"]; c.Maximum == nil || *c.Maximum != 10 || tr.Constraints["text"].Pattern != "^[a-z]+$" {
		t.Fatalf("the stored transition's constraints: %+v", tr.Constraints)
	}
	done, _ := s.State("DONE")
	tool, _ := done.Tool("note")
	if c := tool.Constraints["level"]; len(c.Enum) != 2 || c.Enum[0] != "low" {
		t.Fatalf("the stored tool's constraints: %+v", tool.Constraints)
	}
}
