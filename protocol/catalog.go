package protocol

import "time"

// WorkflowInfo is one entry of the workflow catalog, GET /workflows:
// {"workflows": [WorkflowInfo...]}.
type WorkflowInfo struct {
	WorkflowID   string   `json:"workflow_id"`
	Description  string   `json:"description,omitempty"`
	InitialState string   `json:"initial_state"`
	States       []string `json:"states"`
	StartHref    string   `json:"start_href"`
	Default      bool     `json:"default,omitempty"`
}

// EventLog is a run's history, GET /runs/{run_id}/events.
type EventLog struct {
	RunID      string  `json:"run_id"`
	WorkflowID string  `json:"workflow_id"`
	Events     []Event `json:"events"`
	// NextCursor continues the log after this page (pass it as cursor);
	// null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Event is one entry of a run's history: its creation, a transition, or a
// task failure, with the status the run showed after it.
type Event struct {
	ID     int64     `json:"id"` // the event's sequence number, as in stream lines
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Action string    `json:"action,omitempty"`
	From   string    `json:"from,omitempty"`
	To     string    `json:"to"`
	Actor  string    `json:"actor"`
	Status string    `json:"status"`
}
