package client_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/asmp-dev/asmp"

// deps returns the import paths outside the standard library that pkg
// depends on (itself included), as the go command lists them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}

func inModule(path string) bool {
	return path == module || strings.HasPrefix(path, module+"/")
}

// TestClientNeedsOnlyTheStandardLibrary enforces what keeps the SDK light:
// package client, and every package of this module it depends on, imports
// nothing outside the standard library and this module. A program that
// drives remote runs does not inherit the server (the engine, metrics,
// expressions, YAML, JSON Schema). The in-process backend is opt-in
// (client/embedded), as is receipt verification (oip/verify).
func TestClientNeedsOnlyTheStandardLibrary(t *testing.T) {
	all := deps(t, module+"/client")
	if !slices.Contains(all, module+"/client") {
		t.Fatalf("go list named no client package: %v", all)
	}
	for _, pkg := range all {
		if !inModule(pkg) {
			t.Errorf("package client depends on %s, which is outside the standard library and this module", pkg)
			continue
		}
		// Each small package of the module client uses must itself stay
		// small, so that it can be used on its own too.
		for _, d := range deps(t, pkg) {
			if !inModule(d) {
				t.Errorf("%s (a dependency of package client) depends on %s", pkg, d)
			}
		}
	}
}

// TestVerifyNeedsOnlyItsProofLibraries keeps the opt-in verification
// package as light as it can be: outside the standard library and this
// module, only the three libraries it checks with (RFC 8785 canonical
// JSON, signed notes, Merkle proofs), so never the server.
func TestVerifyNeedsOnlyItsProofLibraries(t *testing.T) {
	allowed := []string{"github.com/gowebpki/jcs", "golang.org/x/mod/sumdb/note", "github.com/transparency-dev/merkle"}
	for _, d := range deps(t, module+"/oip/verify") {
		ok := inModule(d)
		for _, a := range allowed {
			ok = ok || d == a || strings.HasPrefix(d, a+"/")
		}
		if !ok {
			t.Errorf("package oip/verify depends on %s", d)
		}
	}
}
