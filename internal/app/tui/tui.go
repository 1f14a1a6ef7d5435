// Package tui is the terminal client of asmp attach: a full-screen UI
// (bubbletea) that drives one run through any client.Backend using only the
// run's CLI object (GET /runs/{id}/cli) and its stream, and a line-oriented
// fallback for dumb terminals and pipes that prints the CLI object and reads
// one line per step, resolved by client.Resolve.
//
// The full-screen UI shows the prompt, the hint, the options as a select
// list with their keys (the keys work: "y", "n", "1", enter on the
// highlighted option; arrows or j/k move), a typed input field for each
// field the chosen option expects (validated before sending), a spinner and
// a progress bar while the run is processing, the milestones, and a final
// screen with the run id once the run completes or fails. Errors show the
// server's hint and can be retried.
package tui

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/term"

	"github.com/asmp-dev/asmp/client"
	_ "github.com/asmp-dev/asmp/internal/app/termquiet" // never query the terminal (see its doc)
	"github.com/asmp-dev/asmp/protocol"
)

// Options configure a terminal session.
type Options struct {
	// Backend drives the run (required).
	Backend client.Backend
	// RunID attaches to an existing run; "" starts a new one.
	RunID string
	// WorkflowID is the workflow of a new run ("" = the server's default).
	WorkflowID string
	// Data is the initial data of a new run.
	Data map[string]any
	// In and Out are the terminal (nil = os.Stdin, os.Stdout).
	In  io.Reader
	Out io.Writer
	// ASCII draws with ASCII only (no Unicode spinner, bar or marks).
	ASCII bool
	// OnRun, when set, is called with the run's first frame, e.g. to
	// remember which server the run lives on.
	OnRun func(*client.RunFrame)
	// AltScreen runs the full-screen UI in the terminal's alternate screen.
	AltScreen bool
	// Yes fires critical actions (is_critical) without asking first; by
	// default both UIs ask for a y before firing one.
	Yes bool
	// Now tells the time the time left to the run's pending timers is
	// counted from (nil = time.Now).
	Now func() time.Time
}

// now returns o.Now(), or the clock's time.
func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// timerLines describes the pending timers frame f names, soonest first:
// "timer escalate in 9m58s (at 2026-12-03T10:30:00Z)".
func timerLines(f *protocol.Frame, now time.Time) []string {
	var out []string
	for _, t := range f.Timers() {
		out = append(out, "timer "+protocol.DescribeTimer(t, now))
	}
	return out
}

// Result is how a session ended.
type Result struct {
	RunID  string
	State  string
	Status string // the run's last status seen; terminal when it ended
	Hint   string
}

// Summary is one line that says how the session ended.
func (r Result) Summary() string {
	switch {
	case r.RunID == "":
		return "No run was started."
	case protocol.Terminal(r.Status):
		return fmt.Sprintf("Run %s %s in state %s.", r.RunID, r.Status, r.State)
	case r.State != "":
		return fmt.Sprintf("Run %s is at state %s [%s]; attach again with --run %s.", r.RunID, r.State, r.Status, r.RunID)
	}
	return fmt.Sprintf("Run %s; attach again with --run %s.", r.RunID, r.RunID)
}

// Interactive reports whether in and out are a terminal that can run the
// full-screen UI: both are TTYs and TERM is set and not "dumb".
func Interactive(in io.Reader, out io.Writer, getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if t := getenv("TERM"); t == "" || t == "dumb" {
		return false
	}
	fi, ok := in.(*os.File)
	fo, ok2 := out.(*os.File)
	return ok && ok2 && term.IsTerminal(fi.Fd()) && term.IsTerminal(fo.Fd())
}

// UTF8 reports whether the locale of getenv's environment is UTF-8.
func UTF8(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := getenv(k); v != "" {
			v = strings.ToLower(v)
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}

// RunFull runs the full-screen UI until the user quits or the run ends and
// the user leaves its final screen.
func RunFull(ctx context.Context, o Options) (Result, error) {
	if o.Backend == nil {
		return Result{}, fmt.Errorf("tui: no backend")
	}
	m := NewModel(ctx, o)
	opts := []tea.ProgramOption{tea.WithContext(ctx)}
	if o.In != nil {
		opts = append(opts, tea.WithInput(o.In))
	}
	if o.Out != nil {
		opts = append(opts, tea.WithOutput(o.Out))
	}
	if o.AltScreen {
		opts = append(opts, tea.WithAltScreen())
	}
	final, err := tea.NewProgram(m, opts...).Run()
	fm, _ := final.(*Model)
	if fm == nil {
		fm = m
	}
	fm.stop()
	if err != nil {
		return fm.Result(), fmt.Errorf("terminal UI: %w", err)
	}
	return fm.Result(), fm.fatal
}
