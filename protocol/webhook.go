package protocol

import "time"

// The event types of webhook messages (the "type" of a WebhookMessage).
const (
	// WebhookRunCreated: a run was started; Data.From and Data.Action are
	// empty.
	WebhookRunCreated = "run.created"
	// WebhookRunStateChanged: a transition moved a run from Data.From to
	// Data.State.
	WebhookRunStateChanged = "run.state_changed"
	// WebhookRunCompleted: a run reached status "completed".
	WebhookRunCompleted = "run.completed"
	// WebhookRunFailed: a run reached status "failed".
	WebhookRunFailed = "run.failed"
	// WebhookTaskProgress: a background task reported progress.
	WebhookTaskProgress = "task.progress"
)

// WebhookEventTypes lists every event type a subscription may name, in the
// order the documentation gives them.
var WebhookEventTypes = []string{WebhookRunCreated, WebhookRunStateChanged, WebhookRunCompleted, WebhookRunFailed, WebhookTaskProgress}

// IsWebhookEventType reports whether t is one of WebhookEventTypes.
func IsWebhookEventType(t string) bool {
	for _, e := range WebhookEventTypes {
		if e == t {
			return true
		}
	}
	return false
}

// WebhookMessage is the body of a webhook request, in the shape the
// Standard Webhooks specification recommends: the event type, when the
// event happened (not when it was sent: a retried message keeps its
// timestamp), and the event's data. Receivers verify the raw body's
// signature before decoding it (client.VerifyWebhook).
type WebhookMessage struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      WebhookData `json:"data"`
}

// WebhookData is what a webhook message says about the run that changed:
// its identity, the state and status it is in after the change, the state
// it left and the action and actor that moved it (empty for run.created),
// and where to read its current frame.
type WebhookData struct {
	RunID           string `json:"run_id"`
	WorkflowID      string `json:"workflow_id"`
	WorkflowVersion string `json:"workflow_version,omitempty"`
	State           string `json:"state"`
	Status          string `json:"status"`
	From            string `json:"from,omitempty"`
	Action          string `json:"action,omitempty"`
	Actor           string `json:"actor,omitempty"`
	// FrameHref is the path of the run's frame on the server that sent the
	// message ("/runs/{run_id}").
	FrameHref string `json:"frame_href"`
}
