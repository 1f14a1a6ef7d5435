package webhook

import (
	"encoding/json"
	"time"
)

// EncodeMessage returns the body of a webhook request for m: compact JSON,
// the bytes that are signed, stored and sent unchanged on every attempt.
// They are exactly json.Marshal(m)'s (the reference, which the tests
// compare against); the usual message, whose strings need no escaping, is
// written without reflection.
func EncodeMessage(m Message) ([]byte, error) {
	if b, ok := appendMessage(make([]byte, 0, messageSize(&m)), &m); ok {
		return b, nil
	}
	return json.Marshal(m)
}

// messageSize is the length of m's encoding when no string is escaped.
func messageSize(m *Message) int {
	d := &m.Data
	return 160 + len(m.Type) + len(d.RunID) + len(d.WorkflowID) + len(d.WorkflowVersion) + len(d.State) + len(d.Status) +
		len(d.From) + len(d.Action) + len(d.Actor) + len(d.FrameHref) + len(d.Progress) + len(d.Hint)
}

// appendMessage appends m's JSON encoding to b, in the field order and
// with the omitempty rules of protocol.WebhookMessage, when no string of m
// needs escaping and its timestamp is in UTC (as the engine stamps them)
// within the years json.Marshal encodes (0 to 9999); ok is false otherwise (b is then to be dropped).
func appendMessage(b []byte, m *Message) ([]byte, bool) {
	d := &m.Data
	if !plain(m.Type) || !plain(d.RunID) || !plain(d.WorkflowID) || !plain(d.WorkflowVersion) || !plain(d.State) ||
		!plain(d.Status) || !plain(d.From) || !plain(d.Action) || !plain(d.Actor) || !plain(d.FrameHref) || !plain(d.Progress) || !plain(d.Hint) {
		return b, false
	}
	if y := m.Timestamp.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := m.Timestamp.Zone(); off != 0 {
		return b, false
	}
	b = append(b, `{"type":"`...)
	b = append(b, m.Type...)
	b = append(b, `","timestamp":"`...)
	b = m.Timestamp.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":{"run_id":"`...)
	b = append(b, d.RunID...)
	b = append(b, `","workflow_id":"`...)
	b = append(b, d.WorkflowID...)
	b = appendOpt(b, `","workflow_version":"`, d.WorkflowVersion)
	b = append(b, `","state":"`...)
	b = append(b, d.State...)
	b = append(b, `","status":"`...)
	b = append(b, d.Status...)
	b = appendOpt(b, `","from":"`, d.From)
	b = appendOpt(b, `","action":"`, d.Action)
	b = appendOpt(b, `","actor":"`, d.Actor)
	b = append(b, `","frame_href":"`...)
	b = append(b, d.FrameHref...)
	b = appendOpt(b, `","progress":"`, d.Progress)
	b = appendOpt(b, `","hint":"`, d.Hint)
	return append(b, `"}}`...), true
}

// appendOpt appends key and v when v is not empty (omitempty).
func appendOpt(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return append(append(b, key...), v...)
}

// plain reports whether json.Marshal writes s as it is between quotes:
// printable ASCII other than ", \ and the HTML-escaped <, > and &.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
