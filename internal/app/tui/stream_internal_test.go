package tui

import (
	"testing"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// A streamed frame from a server whose stream ids are not the run's
// versions (the reference servers number each connection's lines from
// "0") is shown, without an entity tag taken from its id; a frame like the
// one on screen is not shown again; an id above the shown version is the
// new version (asmp's streams).
func TestStreamFrameWithIDBelowTheVersionIsShown(t *testing.T) {
	m := NewModel(t.Context(), Options{Backend: quiet{}})
	shown := &client.RunFrame{Frame: protocol.Frame{RunID: "r", State: "A", Status: "active", NextStates: []protocol.NextState{}}, ETag: `"3"`}
	m.applyFrame(shown, nil, "")

	m.onStream(client.StreamItem{Frame: &protocol.StreamFrame{ID: 0, Frame: shown.Frame}})
	if m.frame != shown {
		t.Fatal("a repeat of the frame on screen replaced it")
	}
	next := protocol.Frame{RunID: "r", State: "B", Status: "active", NextStates: []protocol.NextState{}}
	m.onStream(client.StreamItem{Frame: &protocol.StreamFrame{ID: 1, Frame: next}})
	if m.frame.State != "B" || m.frame.ETag != "" || m.version != 3 {
		t.Fatalf("after a reference frame (id 1, version 3): state %s, etag %q, version %d", m.frame.State, m.frame.ETag, m.version)
	}
	last := protocol.Frame{RunID: "r", State: "C", Status: "active", NextStates: []protocol.NextState{}}
	m.onStream(client.StreamItem{Frame: &protocol.StreamFrame{ID: 4, Frame: last}})
	if m.frame.State != "C" || m.frame.ETag != `"4"` || m.version != 4 {
		t.Fatalf("after an asmp frame (id 4): state %s, etag %q, version %d", m.frame.State, m.frame.ETag, m.version)
	}
}
