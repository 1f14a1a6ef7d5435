package engine_test

import (
	"os/exec"
	"strings"
	"testing"
)

// goList runs go list on the engine package with format f and returns its
// output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, append(args, ".")...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// The engine knows nothing of HTTP or of metrics: no file of package
// engine (tests included) imports net/http or a package under it, and
// nothing it depends on, however indirectly, is Prometheus. The server
// encodes the HTTP answers and turns the engine's Observer reports into
// metrics.
func TestEngineImportsNeitherHTTPNorPrometheus(t *testing.T) {
	imports := goList(t, "-f", `{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`)
	if len(imports) == 0 {
		t.Fatal("go list named no imports of package engine")
	}
	for _, p := range imports {
		if p == "net/http" || strings.HasPrefix(p, "net/http/") {
			t.Errorf("package engine imports %s: HTTP belongs to package server", p)
		}
	}
	deps := goList(t, "-deps", "-f", "{{.ImportPath}}")
	if len(deps) < 2 || deps[len(deps)-1] != "github.com/asmp-dev/asmp/engine" {
		t.Fatalf("go list -deps did not list the engine's dependencies: %q", deps)
	}
	for _, p := range deps {
		if strings.Contains(p, "prometheus") {
			t.Errorf("package engine depends on %s: metrics belong to package server (engine.Observer reports to it)", p)
		}
	}
}
