package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/webhook"
)

// TestEncodeMessageIsJSONMarshal checks that the body of every message is
// byte for byte json.Marshal's (the wire format receivers verify the
// signature of): plain strings, strings that need escaping, empty
// optional fields, timestamps with and without fractions, out of UTC and
// out of JSON's year range.
func TestEncodeMessageIsJSONMarshal(t *testing.T) {
	at := time.Date(2026, 12, 3, 15, 4, 5, 123456789, time.UTC)
	full := webhook.Message{Type: "run.state_changed", Timestamp: at, Data: webhook.Data{RunID: "0193a-run", WorkflowID: "loop-v1",
		WorkflowVersion: "3", State: "LOOP", Status: "active", From: "START", Action: "tick", Actor: "agent:1", FrameHref: "/runs/0193a-run"}}
	cases := map[string]webhook.Message{
		"full":    full,
		"created": {Type: "run.created", Timestamp: at, Data: webhook.Data{RunID: "r", WorkflowID: "w", State: "S", Status: "active", FrameHref: "/runs/r"}},
		"progress": {Type: "task.progress", Timestamp: at, Data: webhook.Data{RunID: "r", WorkflowID: "w", State: "S", Status: "processing", FrameHref: "/runs/r",
			Progress: "45%", Hint: "Reserving funds"}},
		"progress, no hint": {Type: "task.progress", Timestamp: at, Data: webhook.Data{RunID: "r", WorkflowID: "w", State: "S", Status: "processing", FrameHref: "/runs/r",
			Progress: "45%"}},
		"empty":      {},
		"whole sec":  {Type: "run.completed", Timestamp: at.Truncate(time.Second), Data: full.Data},
		"not UTC":    {Type: "run.completed", Timestamp: at.In(time.FixedZone("X", 3600)), Data: full.Data},
		"zone +25h":  {Type: "run.completed", Timestamp: at.In(time.FixedZone("Y", 25*3600)), Data: full.Data},
		"year 10000": {Type: "run.completed", Timestamp: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Data: full.Data},
	}
	for _, s := range []string{`a"b`, `a\b`, "<", ">", "a&b", "tab\there", "line\nfeed", "\x7f", "é", "\u2028", "\xff", ""} {
		for i := range 12 {
			m := full
			f := [...]*string{&m.Type, &m.Data.RunID, &m.Data.WorkflowID, &m.Data.WorkflowVersion, &m.Data.State, &m.Data.Status,
				&m.Data.From, &m.Data.Action, &m.Data.Actor, &m.Data.FrameHref, &m.Data.Progress, &m.Data.Hint}[i]
			*f = "x" + s
			cases[fmt.Sprintf("field %d %q", i, s)] = m
		}
	}
	for name, m := range cases {
		want, wantErr := json.Marshal(m)
		got, err := webhook.EncodeMessage(m)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, json.Marshal's %v", name, err, wantErr)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}
