package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// asmp runs takes subcommands (asmp runs NAME …) besides listing runs.
func TestRunsTakesSubcommands(t *testing.T) {
	t.Parallel()
	// migrate is registered by its own file (versions.go), as every
	// subcommand of asmp runs is.
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"runs", "migrate", "--help"}, &Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	if code != 0 || !strings.Contains(out.String(), "asmp runs migrate WORKFLOW --from VERSION") {
		t.Fatalf("asmp runs migrate --help: exit %d, %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := Main(context.Background(), []string{"runs", "stray"}, &Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}); code == 0 {
		t.Fatalf("asmp runs stray: exit 0, %q", out.String())
	}
}
