package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/asmp-dev/asmp/protocol"
)

// Benchmarks of the wire layer every request goes through. Performance is
// never asserted here; bench/run publishes the figures.

// BenchmarkDecodeObject decodes request bodies: empty, {} and a typical
// transition input.
func BenchmarkDecodeObject(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"empty", ""},
		{"braces", "{}"},
		{"input", `{"value":"dark mode","count":3,"ratio":0.5,"tags":["a","b"]}`},
	} {
		body := []byte(tc.body)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protocol.DecodeObject(body, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchFrame() protocol.Frame {
	const base = "http://127.0.0.1:8000/runs/01980f5e-7c1a-7b3e-9a4d-2f6b8c0d1e2f"
	return protocol.Frame{
		RunID: "01980f5e-7c1a-7b3e-9a4d-2f6b8c0d1e2f", WorkflowID: "config-wizard-v1", ResourceURL: "http://127.0.0.1:8000",
		State: "CONFIRM", Status: protocol.StatusActive, Hint: "Confirm to apply or cancel.",
		NextStates: []protocol.NextState{
			{Action: "confirm", Method: "POST", Href: base + "/transitions/confirm"},
			{Action: "cancel", Method: "POST", Href: base + "/transitions/cancel"},
		},
		Data:       map[string]any{"value": "dark mode"},
		Milestones: []string{"Value entered"},
		StreamURL:  base + "/stream",
		Links: map[string]protocol.Link{
			"self": {Href: base, Method: "GET"}, "cli": {Href: base + "/cli", Method: "GET"}, "events": {Href: base + "/events", Method: "GET"},
		},
	}
}

// BenchmarkMarshalFrame encodes a State Frame, and a stream line (frame
// plus id).
func BenchmarkMarshalFrame(b *testing.B) {
	f := benchFrame()
	b.Run("frame", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(f); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream-line", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(protocol.StreamFrame{ID: 7, Frame: f}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
