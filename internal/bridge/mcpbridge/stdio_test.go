package mcpbridge_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A line on stdin that is not JSON is answered with JSON-RPC's parse
// error, and the session goes on: the next message is answered as usual.
func TestStdioAnswersAMalformedLine(t *testing.T) {
	url := serveOnce(t)
	cmd := exec.Command(binary, "mcp", "--server", url)
	cmd.Env = append(os.Environ(), "ASMP_TOKEN="+adminToken)
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	io.WriteString(in, "not json at all\n\n"+`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(outPipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []map[string]any
	for len(got) < 2 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("asmp mcp ended after %d answers: %v", len(got), got)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("stdout line is not JSON: %q", l)
			}
			got = append(got, m)
		case <-time.After(30 * time.Second):
			t.Fatalf("answers so far: %v", got)
		}
	}
	e, _ := got[0]["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32700) || got[0]["id"] != nil || !strings.Contains(e["message"].(string), "not JSON") {
		t.Fatalf("the malformed line's answer: %v", got[0])
	}
	if got[1]["id"] != float64(1) || got[1]["result"] == nil {
		t.Fatalf("initialize after it: %v", got[1])
	}
}
