package engine

import (
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// EventLine returns the NDJSON stream line (a frame plus "id", with the
// trailing newline) that shows the run right after ev. Lines of a published
// Message are encoded once per base URL and shared by all subscribers; do
// not modify the returned slice.
func (e *Engine) EventLine(def *workflow.Definition, m Message, base string) ([]byte, error) {
	if m.lines != nil {
		m.lines.mu.Lock()
		defer m.lines.mu.Unlock()
		if b, ok := m.lines.lines[base]; ok {
			return b, nil
		}
	}
	b, err := e.encodeEvent(def, m.Event, base)
	if err != nil {
		return nil, err
	}
	if m.lines != nil {
		if m.lines.lines == nil {
			m.lines.lines = map[string][]byte{}
		}
		m.lines.lines[base] = b
	}
	return b, nil
}

func (e *Engine) encodeEvent(def *workflow.Definition, ev *store.Event, base string) ([]byte, error) {
	f, err := e.EventFrame(def, ev, base)
	if err != nil {
		return nil, err
	}
	b, err := protocol.StreamFrame{ID: ev.Seq, Frame: f}.AppendJSON(make([]byte, 0, 1024))
	if err != nil {
		return nil, internal("could not encode a stream frame", err)
	}
	return append(b, '\n'), nil
}

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
