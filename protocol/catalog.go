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
	Default      bool     `json:"default"`
	// Version is the version new runs of the workflow get here.
	Version string `json:"version,omitempty"`
	// Versions are the stored versions of the workflow, newest first.
	Versions []WorkflowVersion `json:"versions,omitempty"`
}

// MigratedRun is one run in a migration report: where it was, where it
// goes, and what became of it (migrated, left, waiting; see Result).
type MigratedRun struct {
	RunID  string `json:"run_id"`
	From   string `json:"from_state"`
	To     string `json:"to_state,omitempty"`
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
}

// MigrationReport is the answer of POST /workflows/{id}/migrate: the runs
// of version From that moved to To (or, in a dry run, would), those that
// wait for their background task to settle, and those left as they are.
type MigrationReport struct {
	WorkflowID string        `json:"workflow_id"`
	From       string        `json:"from"`
	To         string        `json:"to"`
	DryRun     bool          `json:"dry_run"`
	Migrated   []MigratedRun `json:"migrated"`
	Waiting    []MigratedRun `json:"waiting"`
	Left       []MigratedRun `json:"left"`
}

// WorkflowVersion is one stored version of a workflow in the catalog.
type WorkflowVersion struct {
	Version     string    `json:"version"`
	FirstServed time.Time `json:"first_served"`
	// ActiveRuns counts the runs pinned to it that have not ended
	// (neither completed nor failed).
	ActiveRuns int64 `json:"active_runs"`
	// Served is true for the version new runs get from this server.
	Served bool   `json:"served,omitempty"`
	Href   string `json:"href"`
	// LegacyRuns counts the runs stored before versions existed that were
	// pinned to this version when the upgraded server first served it.
	LegacyRuns int64 `json:"legacy_runs,omitempty"`
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
	// Reason says why a background task failed, on the event its failure
	// made (the failure action's transition, or the run's failed status).
	Reason string `json:"reason,omitempty"`
	// FromVersion and WorkflowVersion are set on migrated events: the
	// version the run left and the one it is pinned to now.
	FromVersion     string `json:"from_version,omitempty"`
	WorkflowVersion string `json:"workflow_version,omitempty"`
}
