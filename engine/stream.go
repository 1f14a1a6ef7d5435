package engine

import (
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// StatusAfter returns the status the run showed right after ev.
func StatusAfter(def *workflow.Definition, ev *store.Event) string {
	r := &Run{Run: store.Run{ID: ev.RunID, WorkflowID: def.ID, Snapshot: ev.Snapshot}, Def: def}
	return r.Status()
}

// PublishProgress sends a progress envelope to the run's stream subscribers.
// id is the run's current event sequence number.
func (e *Engine) PublishProgress(runID string, id int64, progress, hint string) {
	e.hub.Publish(runID, Message{Progress: &protocol.Progress{ID: id, Progress: progress, Hint: hint}})
}
