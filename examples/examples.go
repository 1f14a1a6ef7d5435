// Package examples holds the workflows a bare `asmp serve` serves: the
// config wizard of the ASMP dynamic CLI seed (config-wizard-v1, the default)
// and an expense approval (expense-approval-v1) that uses everything a state
// can carry: a skill, a Go tool, resources, a guard, milestones, a timer,
// and a background task that reports progress.
package examples

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"time"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

//go:embed skills
var skills embed.FS

// ConfigWizard returns config-wizard-v1, exactly as in the spec's appendix A.
func ConfigWizard() *workflow.Definition {
	b := workflow.New("config-wizard-v1", "INITIAL").
		Description("Walk through one configuration value, then confirm or cancel it.")
	b.State("INITIAL").Hint("Start the config wizard.").CLI(workflow.CLIHook{
		Prompt: "Config wizard",
		Hint:   "Press 1 to start, or 2 to exit.",
		Options: []workflow.CLIOption{
			{Action: "start", Label: "Start wizard", Keys: "1"},
			{Action: "exit", Label: "Exit", Keys: "2"},
		},
	})
	b.State("CONFIGURE").Hint("Enter a value and save.").CLI(workflow.CLIHook{
		Prompt:    "Set value",
		Hint:      "Enter your config value, then choose Save.",
		InputHint: "Value (string):",
		Options:   []workflow.CLIOption{{Action: "save", Label: "Save", Keys: "enter"}},
	})
	b.State("CONFIRM").Hint("Confirm to apply or cancel.").CLI(workflow.CLIHook{
		Prompt: "Apply configuration?",
		Hint:   "Confirm to apply or cancel.",
		Options: []workflow.CLIOption{
			{Action: "confirm", Label: "Yes, apply", Keys: "y"},
			{Action: "cancel", Label: "No, cancel", Keys: "n"},
		},
	})
	b.State("DONE").Hint("Configuration applied.")
	b.State("CANCELLED").Hint("Configuration cancelled.")
	b.Transition("INITIAL", "start", "CONFIGURE")
	b.Transition("INITIAL", "exit", "CANCELLED")
	b.Transition("CONFIGURE", "save", "CONFIRM").Expect("value", "string")
	b.Transition("CONFIRM", "confirm", "DONE")
	b.Transition("CONFIRM", "cancel", "CANCELLED")
	return b.MustBuild()
}

// ApprovalLimit is the largest amount expense-approval-v1 approves directly.
const ApprovalLimit = 1000

const policyText = `# Expense policy

- Claims up to 1000 EUR are approved by the reviewer directly.
- Larger claims go to finance review (action: escalate).
- Every claim needs a description of what was bought and why.
- Rejected claims must carry a reason.
- A claim nobody reviews within the review timeout (48 hours by default)
  goes to a manager (action: escalate_to_manager, fired by a timer), who
  approves or rejects it whatever the amount.
`

// DefaultPaymentStep is how long each of the payment task's five steps
// takes unless Options say otherwise.
const DefaultPaymentStep = 600 * time.Millisecond

// DefaultReviewTimeout is how long expense-approval-v1's REVIEW waits for a
// reviewer before its timer escalates the claim to a manager, unless
// Options say otherwise.
const DefaultReviewTimeout = 48 * time.Hour

// Options vary the built-in workflows' behaviour. The zero value is what
// asmp serve serves. PaymentStep changes how a Go func behaves, not the
// definition, so a workflow built with any PaymentStep has the same
// version; ReviewTimeout is a timer's duration, part of the definition, so
// a ReviewTimeout other than DefaultReviewTimeout is another version (a
// run keeps the timeout of the version it started on).
type Options struct {
	// PaymentStep is how long each of expense-approval-v1's five payment
	// steps takes (0: DefaultPaymentStep). Tests shorten it.
	PaymentStep time.Duration
	// ReviewTimeout is how long a claim may stay in expense-approval-v1's
	// REVIEW before a timer fires escalate_to_manager as actor "timer",
	// moving it to ESCALATED (0: DefaultReviewTimeout). asmp serve has
	// no flag for it; a program embedding the examples sets it here.
	ReviewTimeout time.Duration
}

func (o Options) reviewTimeout() time.Duration {
	if o.ReviewTimeout > 0 {
		return o.ReviewTimeout
	}
	return DefaultReviewTimeout
}

func (o Options) paymentStep() time.Duration {
	if o.PaymentStep > 0 {
		return o.PaymentStep
	}
	return DefaultPaymentStep
}

// ExpenseApproval returns expense-approval-v1: submit a claim, review it
// (approve only up to ApprovalLimit, else escalate to finance; a claim
// nobody reviews within the review timeout is escalated to a manager by a
// timer), then a background payment task that reports progress and moves
// the run to PAID.
func ExpenseApproval() *workflow.Definition { return ExpenseApprovalWith(Options{}) }

// ExpenseApprovalWith is ExpenseApproval with o's behaviour.
func ExpenseApprovalWith(o Options) *workflow.Definition {
	sub, _ := fs.Sub(skills, "skills")
	b := workflow.New("expense-approval-v1", "SUBMIT").
		Description("File an expense claim, have it reviewed, and watch it being paid.")
	b.State("SUBMIT").
		Hint("Submit the claim: POST submit with amount (number) and description (string). Call policy_check first if unsure.").
		Status(protocol.StatusAwaitingInput).
		Skill(workflow.Skill{Name: "expense-skill", Path: "expense/SKILL.md", FS: sub,
			ContextSummary: "An expense claim is being filed; nothing has been submitted yet.", Version: "1"}).
		Tool("policy_check", "Tell whether an amount can be approved directly or needs finance review.",
			map[string]string{"amount": "number"}, policyCheck).
		Resource(workflow.Resource{Path: "policy", Name: "Expense policy", MimeType: "text/markdown", Text: policyText}).
		CLI(workflow.CLIHook{Prompt: "New expense claim", Hint: "Enter the amount in EUR and what was bought and why.",
			InputHint: "amount (number), description (string):",
			Options:   []workflow.CLIOption{{Action: "submit", Label: "Submit claim", Keys: "enter"}}})
	timeout := workflow.FormatDuration(o.reviewTimeout())
	b.State("REVIEW").
		Hint("Review the claim. approve is offered only up to the approval limit; escalate larger claims to finance, or reject with a reason. Unreviewed after "+timeout+", the claim goes to a manager (escalate_to_manager).").
		Milestone("Claim submitted").
		Resource(workflow.Resource{Path: "claim", Name: "The claim as submitted", MimeType: "application/json", Handler: claimResource}).
		After(o.reviewTimeout(), "escalate_to_manager").
		CLI(workflow.CLIHook{Prompt: "Review the claim",
			Hint: fmt.Sprintf("{data.description}: {data.amount} EUR. Claims up to %d EUR can be approved here, larger ones are escalated to finance; a rejection needs a reason. Unreviewed after %s, the claim goes to a manager.", ApprovalLimit, timeout),
			Options: []workflow.CLIOption{
				{Action: "approve", Label: "Approve", Keys: "a"},
				{Action: "escalate", Label: "Escalate to finance", Keys: "e"},
				{Action: "reject", Label: "Reject", Keys: "r"},
				{Action: "escalate_to_manager", Label: "Hand to a manager", Keys: "m"},
			}})
	b.State("FINANCE_REVIEW").
		Hint("Finance review: approve or reject the claim.").
		Milestone("Escalated to finance").
		CLI(workflow.CLIHook{Prompt: "Finance review",
			Hint: "{data.description}: {data.amount} EUR, over the reviewer's limit. Approve it or reject it with a reason.",
			Options: []workflow.CLIOption{
				{Action: "approve", Label: "Approve", Keys: "a"},
				{Action: "reject", Label: "Reject", Keys: "r"},
			}})
	b.State("ESCALATED").
		Hint("Nobody reviewed the claim in time: a manager approves or rejects it, whatever the amount.").
		Milestone("Escalated to a manager").
		CLI(workflow.CLIHook{Prompt: "Manager review",
			Hint: "{data.description}: {data.amount} EUR, not reviewed in time. Approve it or reject it with a reason.",
			Options: []workflow.CLIOption{
				{Action: "approve", Label: "Approve", Keys: "a"},
				{Action: "reject", Label: "Reject", Keys: "r"},
			}})
	b.State("PAYING").
		Hint("The payment is running; watch the stream for progress. You may cancel it.").
		Milestone("Claim approved").
		CLI(workflow.CLIHook{Prompt: "Paying the claim", Hint: "The payment runs in the background; you may cancel it.",
			Options: []workflow.CLIOption{{Action: "cancel", Label: "Cancel the payment", Keys: "c"}}}).
		Task(payment(o.paymentStep()), "paid", "payment_failed")
	b.State("PAID").Hint("The claim has been paid.").Milestone("Paid")
	b.State("REJECTED").Hint("The claim was rejected.")
	b.State("CANCELLED").Hint("The payment was cancelled; the claim is closed.")

	b.Transition("SUBMIT", "submit", "REVIEW").Expect("amount", "number").Expect("description", "string")
	b.Transition("REVIEW", "approve", "PAYING").
		GuardExpr(fmt.Sprintf("data.amount <= %d", ApprovalLimit), fmt.Sprintf("Claims over %d cannot be approved directly: escalate them to finance.", ApprovalLimit))
	b.Transition("REVIEW", "escalate", "FINANCE_REVIEW").
		GuardExpr(fmt.Sprintf("data.amount > %d", ApprovalLimit), fmt.Sprintf("Only claims over %d go to finance; approve or reject this one.", ApprovalLimit))
	b.Transition("REVIEW", "reject", "REJECTED").Expect("reason", "string").Critical()
	b.Transition("REVIEW", "escalate_to_manager", "ESCALATED")
	b.Transition("FINANCE_REVIEW", "approve", "PAYING")
	b.Transition("FINANCE_REVIEW", "reject", "REJECTED").Expect("reason", "string").Critical()
	b.Transition("ESCALATED", "approve", "PAYING")
	b.Transition("ESCALATED", "reject", "REJECTED").Expect("reason", "string").Critical()
	b.Transition("PAYING", "paid", "PAID")
	b.Transition("PAYING", "payment_failed", "REVIEW")
	b.Transition("PAYING", "cancel", "CANCELLED").Critical()
	return b.MustBuild()
}

func policyCheck(ctx context.Context, call workflow.ToolCall) (any, error) {
	amount, _ := call.Input["amount"].(float64)
	if n, ok := call.Input["amount"].(int64); ok {
		amount = float64(n)
	}
	if amount <= 0 {
		return nil, protocol.Errorf(protocol.EInvalid, "amount must be positive.").With("field", "amount")
	}
	if amount <= ApprovalLimit {
		return map[string]any{"route": "approve", "limit": ApprovalLimit, "explanation": fmt.Sprintf("%v is within the limit of %d: the reviewer can approve it directly.", amount, ApprovalLimit)}, nil
	}
	return map[string]any{"route": "escalate", "limit": ApprovalLimit, "explanation": fmt.Sprintf("%v is over the limit of %d: it needs finance review.", amount, ApprovalLimit)}, nil
}

func claimResource(ctx context.Context, req workflow.ResourceRequest) ([]byte, error) {
	return json.Marshal(map[string]any{"amount": req.Data["amount"], "description": req.Data["description"]})
}

// payment returns the task that pretends to pay the claim in five steps
// of step each, reporting progress.
func payment(step time.Duration) func(ctx context.Context, tc *workflow.TaskContext) (string, error) {
	return func(ctx context.Context, tc *workflow.TaskContext) (string, error) {
		steps := []string{"Checking the claim", "Reserving funds", "Sending the transfer", "Waiting for the bank", "Recording the payment"}
		for i, name := range steps {
			tc.Progress(float64(i*100/len(steps)), name)
			t := time.NewTimer(step)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			case <-t.C:
			}
		}
		tc.Progress(100, "Paid")
		return "paid", nil
	}
}

// All returns the built-in workflows, the default first.
func All() []*workflow.Definition { return AllWith(Options{}) }

// AllWith is All with o's behaviour.
func AllWith(o Options) []*workflow.Definition {
	return []*workflow.Definition{ConfigWizard(), ExpenseApprovalWith(o)}
}
