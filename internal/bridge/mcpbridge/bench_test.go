package mcpbridge_test

import (
	"bytes"
	"net/http"
	"testing"
)

// BenchmarkToolCall measures one dynamic tool call (tick of bench/loop-v1,
// a self-loop) end to end: over stdio through `asmp mcp` to the server's
// HTTP API, and over the server's /mcp, next to the same transition as a
// plain HTTP POST. Each call fires the transition, reads the CLI object,
// rebuilds the session's tool list and answers the frame.
func BenchmarkToolCall(b *testing.B) {
	url := serveOnce(b, "../../bench/loop-v1.yaml")
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			c := connect(b, tr.make(b, url, agentToken))
			c.ok("asmp_start_run", map[string]any{"workflow_id": "loop-v1"})
			b.ResetTimer()
			for b.Loop() {
				c.ok("tick", map[string]any{})
			}
		})
	}
	b.Run("plain-http", func(b *testing.B) {
		run := httpDo(b, url, agentToken, "POST", "/runs", map[string]any{"workflow_id": "loop-v1"})["run_id"].(string)
		for b.Loop() {
			req, _ := http.NewRequest("POST", url+"/runs/"+run+"/transitions/tick", bytes.NewReader([]byte("{}")))
			req.Header.Set("Authorization", "Bearer "+agentToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("tick: %v %v", err, resp)
			}
			resp.Body.Close()
		}
	})
}
