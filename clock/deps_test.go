package clock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClockNeedsOnlyTheStandardLibrary keeps the package a leaf: a program
// that injects a clock into the engine, or a test that fakes one, pulls in
// nothing else.
func TestClockNeedsOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/asmp-dev/asmp/clock").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg != "github.com/asmp-dev/asmp/clock" {
			t.Errorf("package clock depends on %s", pkg)
		}
	}
}
