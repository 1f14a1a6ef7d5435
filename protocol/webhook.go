package protocol

import (
	"encoding/json"
	"time"
)

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
	// Progress and Hint are a task.progress message's report, as the
	// run's stream carries it ({"progress": "45%", "hint": "…"}); absent
	// from the other types.
	Progress string `json:"progress,omitempty"`
	Hint     string `json:"hint,omitempty"`
}

// WebhookRequest is the body of POST /webhooks: where to send messages,
// which event types, and optionally only those of one workflow, or of runs
// entering given states.
type WebhookRequest struct {
	URL        string   `json:"url"`
	Events     []string `json:"events"`
	WorkflowID string   `json:"workflow_id,omitempty"`
	States     []string `json:"states,omitempty"`
}

// WebhookSubscription is a subscription as the API shows it. Secret is
// set only in the answers that create a secret (POST /webhooks and POST
// /webhooks/{id}/rotate): it is shown once and never again.
type WebhookSubscription struct {
	ID         string   `json:"id"`
	URL        string   `json:"url"`
	Events     []string `json:"events"`
	WorkflowID string   `json:"workflow_id,omitempty"`
	States     []string `json:"states,omitempty"`
	// Status is "active", or "disabled" once the receiver answered 410
	// Gone (DisabledReason says when).
	Status         string    `json:"status"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	Secret         string    `json:"secret,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	Href           string    `json:"href"`
	DeliveriesHref string    `json:"deliveries_href"`
}

// WebhookList is a page of GET /webhooks.
type WebhookList struct {
	Webhooks   []WebhookSubscription `json:"webhooks"`
	NextCursor *string               `json:"next_cursor"`
}

// WebhookDelivery is one message to one subscription and what became of
// it: "pending" (NextAttemptAt says when it is tried), "delivered" or
// "failed" (given up, kept for redelivery).
type WebhookDelivery struct {
	ID            string           `json:"id"`
	MessageID     string           `json:"message_id"`
	Type          string           `json:"type"`
	RunID         string           `json:"run_id"`
	Status        string           `json:"status"`
	Attempts      int              `json:"attempts"`
	NextAttemptAt *time.Time       `json:"next_attempt_at,omitempty"`
	LastError     string           `json:"last_error,omitempty"`
	CreatedAt     time.Time        `json:"created_at"`
	Message       json.RawMessage  `json:"message,omitempty"`
	History       []WebhookAttempt `json:"history,omitempty"`
	// HistoryNextCursor, when History is a page that more attempts
	// follow, is the cursor of the next page (GET the delivery with
	// ?cursor=); absent on the last page.
	HistoryNextCursor *string `json:"history_next_cursor,omitempty"`
	Href              string  `json:"href"`
}

// WebhookAttempt is the record of one attempt to deliver a message.
type WebhookAttempt struct {
	N          int       `json:"n"`
	At         time.Time `json:"at"`
	Class      string    `json:"class"`
	Status     int       `json:"status,omitempty"`
	DurationMS float64   `json:"duration_ms"`
	Answer     string    `json:"answer,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// WebhookDeliveryList is a page of GET /webhooks/{id}/deliveries.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
	NextCursor *string           `json:"next_cursor"`
}
