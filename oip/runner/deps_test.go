package runner_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/asmp-dev/asmp"

// TestRunnerDependsOnNothingOfTheLedgerService keeps the sandboxed
// executor small enough to audit: of this module it imports only the
// contract it implements (oip/execution) and what that names (the row,
// its command, the principal, the wire types), never the ledger service,
// the store or the engine; outside the standard library only what rows and
// commands are checked and quoted with.
func TestRunnerDependsOnNothingOfTheLedgerService(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"/oip/runner").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	all := strings.Fields(string(out))
	if !slices.Contains(all, module+"/oip/runner") {
		t.Fatalf("go list named no runner package: %v", all)
	}
	ours := []string{"oip/runner", "oip/execution", "oip/row", "oip/command", "oip/wire", "auth", "protocol"}
	theirs := []string{"github.com/santhosh-tekuri/jsonschema/", "golang.org/x/text/", "mvdan.cc/sh/v3/", "golang.org/x/sys/"}
	for _, pkg := range all {
		if rest, ok := strings.CutPrefix(pkg, module+"/"); ok {
			if !slices.Contains(ours, rest) {
				t.Errorf("oip/runner depends on %s, a package of the ledger service or above it", pkg)
			}
			continue
		}
		if !slices.ContainsFunc(theirs, func(p string) bool { return strings.HasPrefix(pkg, p) }) {
			t.Errorf("oip/runner depends on %s, a module it has no need of", pkg)
		}
	}
}
