package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
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

// asmp show prints each timer the frame names, soonest first, with the
// time left from now.
func TestWriteRunTimers(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 20, 2, 0, time.UTC)
	f := &client.RunFrame{Frame: protocol.Frame{RunID: "r1", WorkflowID: "review-v1", State: "REVIEW", Status: "active",
		NextStates: []protocol.NextState{}, Links: map[string]protocol.Link{
			"self":           {Href: "http://x/runs/r1", Method: "GET"},
			"timer:expire":   {Href: "http://x/runs/r1/transitions/expire", Method: "POST", DueAt: "2026-12-04T10:00:00Z"},
			"timer:escalate": {Href: "http://x/runs/r1/transitions/escalate", Method: "POST", DueAt: "2026-12-03T10:30:00Z"},
		}}}
	var b bytes.Buffer
	writeRun(&b, runView{Frame: f, Now: now})
	out := b.String()
	esc := strings.Index(out, "Timer:  escalate in 9m58s (at 2026-12-03T10:30:00Z)\n")
	exp := strings.Index(out, "Timer:  expire in 23h39m58s (at 2026-12-04T10:00:00Z)\n")
	if esc < 0 || exp < esc {
		t.Fatalf("show output without the timers soonest first:\n%s", out)
	}
	b.Reset()
	writeRun(&b, runView{Frame: &client.RunFrame{Frame: protocol.Frame{RunID: "r1", State: "DONE", Status: "completed"}}, Now: now})
	if strings.Contains(b.String(), "Timer:") {
		t.Fatalf("a frame without timer links shows timers:\n%s", b.String())
	}
}
