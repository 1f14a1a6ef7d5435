// Package internal_test checks the floors of internal/: the edge helpers
// (internal/edge) serve the server and the ledger and import nothing of
// the commands; the MCP bridge (internal/bridge) sits above the SDK and
// below the commands; the commands (internal/app) are imported only by
// the binary; test support (internal/testsupport) only by tests.
package internal_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/asmp-dev/asmp/"

// imports lists, for every package of the module matching pattern, the
// module's packages it imports (tests excluded unless withTests).
func imports(t *testing.T, pattern string, withTests bool) map[string][]string {
	t.Helper()
	f := `{{.ImportPath}} {{join .Imports " "}}`
	if withTests {
		f = `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`
	}
	out, err := exec.Command("go", "list", "-f", f, pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				got[pkg] = append(got[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	if len(got) == 0 && len(out) == 0 {
		t.Fatalf("go list %s listed nothing", pattern)
	}
	return got
}

func TestInternalFloors(t *testing.T) {
	all := imports(t, "github.com/asmp-dev/asmp/...", false)
	if len(all) < 20 {
		t.Fatalf("go list found only %d packages of the module", len(all))
	}
	floor := func(p string) string {
		for _, f := range []string{"internal/edge/", "internal/bridge/", "internal/app/", "internal/testsupport/"} {
			if strings.HasPrefix(p, f) {
				return f
			}
		}
		return ""
	}
	for pkg, deps := range all {
		for _, d := range deps {
			switch floor(d) {
			case "internal/app/":
				if floor(pkg) != "internal/app/" && pkg != "cmd/asmp" {
					t.Errorf("%s imports %s: the commands (internal/app) are imported only by cmd/asmp and each other", pkg, d)
				}
			case "internal/bridge/":
				if f := floor(pkg); f == "internal/edge/" || f == "internal/testsupport/" || strings.HasPrefix(pkg, "server") || strings.HasPrefix(pkg, "oip") || strings.HasPrefix(pkg, "engine") || strings.HasPrefix(pkg, "store") || strings.HasPrefix(pkg, "client") {
					t.Errorf("%s imports %s: the MCP bridge sits above the server, the ledger and the SDK (asmpd and the commands use it)", pkg, d)
				}
			case "internal/testsupport/":
				t.Errorf("%s imports %s outside its tests: test support is for tests only", pkg, d)
			}
		}
		if floor(pkg) == "internal/edge/" {
			for _, d := range deps {
				if f := floor(d); f != "" && f != "internal/edge/" {
					t.Errorf("%s imports %s: the edge helpers are the ground floor of internal/", pkg, d)
				}
			}
		}
	}
}
