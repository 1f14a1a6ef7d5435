package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
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

// --due-before takes an RFC 3339 time as it is, and a duration as now plus
// it (days included).
func TestParseDueBefore(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 20, 0, 0, time.UTC)
	for in, want := range map[string]string{
		"2026-12-03T10:30:00Z":      "2026-12-03T10:30:00Z",
		"2026-12-03T11:30:00+01:00": "2026-12-03T11:30:00+01:00",
		"10m":                       "2026-12-03T10:30:00Z",
		"1d2h":                      "2026-12-04T12:20:00Z",
	} {
		if got, err := parseDueBefore(in, now); err != nil || got != want {
			t.Errorf("parseDueBefore(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "2026-12-03", "10 minutes"} {
		if got, err := parseDueBefore(in, now); err == nil {
			t.Errorf("parseDueBefore(%q) = %q, want an error", in, got)
		}
	}
}
