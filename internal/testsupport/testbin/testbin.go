// Package testbin builds the asmp binary for the black-box tests that run
// it. The binary has the race detector exactly when the test binary does:
// `go test -race` checks the real server for races, and a plain `go test`
// does not pay for a race build it never uses.
package testbin

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// Race reports whether this program was built with the race detector
// (true inside `go test -race`). It is set by build tags: race.go, norace.go.
const Race = race

// Build builds the asmp command into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "asmp")
	args := []string{"build", "-o", bin}
	if Race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/asmp-dev/asmp/cmd/asmp")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// BuiltWithRace reports whether the Go program bin was built with -race,
// as the go command recorded it in the binary.
func BuiltWithRace(bin string) (bool, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return false, fmt.Errorf("reading the build information of %s: %w", bin, err)
	}
	return raceSetting(bi), nil
}

// raceSetting reports the -race setting recorded in bi.
func raceSetting(bi *debug.BuildInfo) bool {
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// Main is a test package's TestMain for black-box tests: it builds the
// binary into a temporary directory, stores its path in *bin, runs the
// tests, calls cleanup (when not nil), removes the directory and exits
// with the tests' status.
func Main(m interface{ Run() int }, bin *string, cleanup func()) {
	dir, err := os.MkdirTemp("", "asmp-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbin: %v\n", err)
		os.Exit(1)
	}
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintf(os.Stderr, "building asmp: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
