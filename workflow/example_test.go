package workflow_test

import (
	"fmt"

	"github.com/asmp-dev/asmp/workflow"
)

// Build a workflow in Go: the same validation as a file applies.
func ExampleNew() {
	b := workflow.New("approval-v1", "DRAFT")
	b.State("DRAFT").Hint("Write the request, then submit it.")
	b.State("REVIEW").Hint("Approve or reject.").Milestone("Submitted")
	b.State("DONE").Hint("Approved.")
	b.Transition("DRAFT", "submit", "REVIEW").Expect("text", "str")
	b.Transition("REVIEW", "approve", "DONE").GuardExpr(`len(data.text) > 3`, "The text is too short to approve.")
	def, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	t, _ := def.Transition("DRAFT", "submit")
	fmt.Println(def.ID, def.InitialState, t.Expects["text"])
	g, _ := def.Transition("REVIEW", "approve")
	fmt.Println(g.Guard.Allow(map[string]any{"text": "hi"}))
	fmt.Println(g.Guard.Allow(map[string]any{"text": "hello"}))
	// Output:
	// approval-v1 DRAFT string
	// false The text is too short to approve.
	// true
}

// Load a workflow file; problems come with their line and column.
func ExampleLoad() {
	_, err := workflow.Load("wf.yaml", []byte(`workflow_id: demo-v1
initial_state: START
states:
  START: {hint: Begin.}
transitions:
  - {from: START, action: go, to: FINISH}
`), nil)
	fmt.Println(err)
	// Output:
	// wf.yaml:6:35: transitions[0].to: transition "go" goes to state "FINISH", which is not declared under states
}
