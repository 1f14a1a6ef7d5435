package server

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
)

// mcpErrors stands between the MCP transport and the client: an error the
// transport answers in plain text (an unknown session, a missing Accept
// header) is held back and answered as the project's JSON error with a
// hint instead. Everything else — JSON-RPC answers and the event stream —
// passes through unchanged, flushes included.
type mcpErrors struct {
	http.ResponseWriter
	status int          // the held-back status; 0 while passing through
	text   bytes.Buffer // the held-back body, its first 1 KiB
}

func (m *mcpErrors) WriteHeader(code int) {
	if code >= 400 && m.status == 0 && !isJSON(m.Header().Get("Content-Type")) {
		m.status = code
		return
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *mcpErrors) Write(b []byte) (int, error) {
	if m.status != 0 {
		if room := 1024 - m.text.Len(); room > 0 {
			m.text.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}

// Flush passes a flush of the event stream on.
func (m *mcpErrors) Flush() {
	if m.status == 0 {
		_ = http.NewResponseController(m.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (m *mcpErrors) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// err is the held-back answer as an error for the edge to write, or nil.
func (m *mcpErrors) err() error {
	if m.status == 0 {
		return nil
	}
	for _, h := range []string{"Content-Type", "Content-Length", "X-Content-Type-Options"} {
		m.Header().Del(h)
	}
	why := strings.TrimSpace(m.text.String())
	if why == "" {
		why = http.StatusText(m.status)
	}
	hint := fmt.Sprintf("The MCP transport refused the request: %s. /mcp speaks MCP's streamable HTTP transport: POST JSON-RPC messages with Accept: application/json, text/event-stream, and the Mcp-Session-Id its initialize answered (none to start a new session).", strings.TrimSuffix(protocol.Truncate(why, 300), "."))
	return protocol.Errorf(protocol.CodeOf(m.status), "%s", hint)
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
