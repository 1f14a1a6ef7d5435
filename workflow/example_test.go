package workflow_test

import (
	"fmt"
	"time"

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

// Timers and deadlines on a state, a retried task and a schedule, in Go;
// DueTimers says when each timer of a run is due.
func ExampleStateBuilder_After() {
	b := workflow.New("deploy-approval-v1", "REVIEW").
		Schedule(workflow.Schedule{Cron: "0 9 * * MON", Timezone: "Europe/Berlin"})
	b.State("REVIEW").Hint("Approve or reject the deploy.").
		After(10*time.Minute, "escalate").
		At("data.due_at", "expire")
	b.State("DEPLOY").RowTask("DEPLOY_ROW", "deployed", "failed").
		TaskRetry(workflow.RetryPolicy{MaxAttempts: 5, Backoff: 2 * time.Second, MaxBackoff: time.Minute})
	for _, s := range []string{"ESCALATED", "EXPIRED", "DONE", "FAILED"} {
		b.State(s)
	}
	b.Transition("REVIEW", "approve", "DEPLOY")
	b.Transition("REVIEW", "escalate", "ESCALATED")
	b.Transition("REVIEW", "expire", "EXPIRED")
	b.Transition("DEPLOY", "deployed", "DONE")
	b.Transition("DEPLOY", "failed", "FAILED")
	def, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	entered := time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC)
	review, _ := def.State("REVIEW")
	for _, due := range review.DueTimers(map[string]any{"due_at": "2026-05-05T17:00:00Z"}, entered) {
		fmt.Println(due.Timer.Action, due.At.Format(time.RFC3339), due.Err)
	}
	deploy, _ := def.State("DEPLOY")
	for attempt := 1; ; attempt++ {
		wait, again := deploy.Task.Retry.Next(attempt, nil)
		if !again {
			fmt.Println("attempt", attempt, "was the last: on_failure")
			break
		}
		fmt.Println("after attempt", attempt, "wait", wait)
	}
	fmt.Println("next run", def.Schedules[0].Next(entered).Format(time.RFC3339))
	// Output:
	// escalate 2026-05-04T08:10:00Z <nil>
	// expire 2026-05-05T17:00:00Z <nil>
	// after attempt 1 wait 2s
	// after attempt 2 wait 4s
	// after attempt 3 wait 8s
	// after attempt 4 wait 16s
	// attempt 5 was the last: on_failure
	// next run 2026-05-11T07:00:00Z
}
