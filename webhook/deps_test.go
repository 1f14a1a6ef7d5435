package webhook_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWebhookImportsOnlyProtocol keeps package webhook a leaf the outbox,
// the delivery workers and the API can all use: besides the standard
// library it imports only protocol, never the stores, the engine or the
// server (docs/ARCHITECTURE.md).
func TestWebhookImportsOnlyProtocol(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/asmp-dev/asmp/webhook").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/asmp-dev/asmp/webhook" && p != "github.com/asmp-dev/asmp/protocol" {
			t.Errorf("package webhook depends on %s", p)
		}
	}
}
