package workflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/workflow"
)

// An alias bomb is refused before it is expanded, with the position of
// the alias where the expansion passes the bound; a file over the size
// limit is refused before it is parsed. Aliases a workflow really uses
// (a shared list, a shared mapping) still load.
func TestAliasBombsAndHugeFilesAreRefused(t *testing.T) {
	_, err := workflow.LoadFile("testdata/alias-bomb.yaml")
	var ve *workflow.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("the alias bomb: %v", err)
	}
	if p := ve.Problems[0]; p.Line != 22 || p.Col == 0 || !strings.Contains(p.Message, "aliases are expanded") {
		t.Fatalf("the alias bomb's problem: %+v", p)
	}

	huge := "workflow_id: big-v1\ninitial_state: A\nstates:\n  A: {hint: \"" + strings.Repeat("x", workflow.MaxFileSize) + "\"}\n"
	if _, err := workflow.Load("big.yaml", []byte(huge), nil); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("a file over %d bytes: %v", workflow.MaxFileSize, err)
	}

	shared := `workflow_id: shared-v1
initial_state: A
states:
  A: {hint: a}
  B: {hint: b}
transitions:
  - {from: A, action: go, to: &b B, expects: &e {color: {type: string, enum: &colors [red, green, blue]}}}
  - {from: A, action: again, to: *b, expects: {shade: {type: string, enum: *colors}}}
  - {from: A, action: more, to: *b, expects: *e}
`
	d, err := workflow.Load("shared.yaml", []byte(shared), nil)
	if err != nil {
		t.Fatalf("aliases a workflow uses: %v", err)
	}
	if len(d.Transitions) != 3 || d.Transitions[1].To != "B" || d.Transitions[2].Expects["color"] != "string" {
		t.Fatalf("the aliases were not applied: %+v", d.Transitions)
	}
}
