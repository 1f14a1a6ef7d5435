package cli_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Without a terminal, attach falls back to the line loop: the whole wizard
// from a pipe.
func TestAttachPlainFromPipe(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin)
	cmd := exec.Command(bin, "attach", url, "--workflow", "config-wizard-v1")
	cmd.Env = append(a.env, "LANG=C.UTF-8")
	cmd.Stdin = strings.NewReader("1\n\nsave dark mode\ny\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{
		"── INITIAL [active] ──\nConfig wizard\nPress 1 to start, or 2 to exit.\n  1) Start wizard [1]\n  2) Exit [2]\n> ✔ start → CONFIGURE",
		"Set value\nEnter your config value, then choose Save.\n  1) Save [enter] (value (string))\nValue (string):\n> ",
		"✘ Option 1 (Save, action save) needs input",
		"✔ save → CONFIRM",
		"  1) Yes, apply [y]\n  2) No, cancel [n]\n> ✔ confirm → DONE",
		"✔ Run completed in state DONE: Configuration applied.",
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("attach output lacks %q:\n%s", want, s)
		}
	}
	// The run is remembered: agent mode continues where attach left off.
	id := s[strings.Index(s, "Run id: ")+len("Run id: "):]
	id = strings.TrimSpace(id)
	a.ok([]string{"show", id}, "Done: run "+id+" completed in state DONE.")
	// Errors: an unknown run, a server that does not answer (ASMP_URL
	// comes before the default http://127.0.0.1:8000).
	a.fails([]string{"attach", url, "--run", "0190aaaa-0000-7000-8000-000000000000"}, "Run not found")
	a.env = append(a.env, "ASMP_URL=http://127.0.0.1:1")
	a.fails([]string{"attach"}, "cannot reach the ASMP server at http://127.0.0.1:1")
}

// tmuxOrSkip returns the tmux binary; without it, the test is skipped
// locally and tmux is installed on CI.
func tmuxOrSkip(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the terminal tests need tmux (scripts/test runs them)")
	}
	if p, err := exec.LookPath("tmux"); err == nil {
		return p
	}
	if os.Getenv("CI") == "" {
		t.Skip("tmux is not installed (apt-get install tmux); CI installs it")
	}
	if out, err := exec.Command("sh", "-c", "apt-get install -y tmux || (apt-get update && apt-get install -y tmux)").CombinedOutput(); err != nil {
		t.Fatalf("installing tmux: %v\n%s", err, out)
	}
	p, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tmuxTerm is a real terminal (tmux) running one command.
type tmuxTerm struct {
	t            *testing.T
	tmux, socket string
}

func newTmux(t *testing.T, env []string, command ...string) *tmuxTerm {
	tm := &tmuxTerm{t: t, tmux: tmuxOrSkip(t), socket: "asmp-test-" + strings.ReplaceAll(t.Name(), "/", "-")}
	args := []string{"-L", tm.socket, "-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "100", "-y", "32"}
	args = append(args, "env")
	args = append(args, env...)
	args = append(args, command...)
	if out, err := exec.Command(tm.tmux, args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tm.tmux, "-L", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *tmuxTerm) keys(keys ...string) {
	tm.t.Helper()
	args := append([]string{"-L", tm.socket, "send-keys", "-t", "main"}, keys...)
	if out, err := exec.Command(tm.tmux, args...).CombinedOutput(); err != nil {
		tm.t.Fatalf("send-keys: %v\n%s", err, out)
	}
}

func (tm *tmuxTerm) capture() string {
	out, _ := exec.Command(tm.tmux, "-L", tm.socket, "capture-pane", "-p", "-t", "main").Output()
	return string(out)
}

// screen waits until the visible screen shows every part.
func (tm *tmuxTerm) screen(parts ...string) string {
	tm.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := tm.capture()
		ok := true
		for _, p := range parts {
			if !strings.Contains(s, p) {
				ok = false
			}
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the screen does not show %q:\n%s", parts, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The real binary in a real terminal: the full-screen UI through the whole
// config wizard, as a user over ssh would see it.
func TestAttachFullScreenInTmux(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin)
	env := append(a.env, "TERM=xterm-256color", "LANG=C.UTF-8")
	tm := newTmux(t, env, "sh", "-c", bin+" attach "+url+"; echo EXIT=$?; sleep 60")
	tm.screen("ASMP config-wizard-v1 • INITIAL run", "Config wizard", "Press 1 to start, or 2 to exit.", "› 1. Start wizard [1]", "↑/↓ move · enter select")
	tm.keys("1")
	tm.screen("CONFIGURE", "Set value", "› 1. Save [enter] value (string)", "Value (string):", "› value (string):", "enter Save")
	tm.keys("dark mode", "Enter")
	tm.screen("CONFIRM", "Apply configuration?", "› 1. Yes, apply [y]", "  2. No, cancel [n]", "y/n keys")
	tm.keys("y")
	s := tm.screen("✔ Run completed", "State:  DONE", "Data:   value=dark mode", "Run id: ")
	id := strings.Fields(s[strings.Index(s, "Run id: ")+len("Run id: "):])[0]
	tm.keys("Enter")
	tm.screen("Run "+id+" completed in state DONE.", "EXIT=0")
}

// On a dumb terminal the same binary uses the line loop.
func TestAttachDumbTerminalInTmux(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin)
	env := append(a.env, "TERM=dumb", "LANG=C")
	tm := newTmux(t, env, "sh", "-c", bin+" attach "+url+"; echo EXIT=$?; sleep 60")
	tm.screen("-- INITIAL [active] --", "1) Start wizard [1]")
	tm.keys("1", "Enter")
	tm.screen("[ok] start -> CONFIGURE", "Value (string):")
	tm.keys("dark mode", "Enter")
	tm.screen("2) No, cancel [n]")
	tm.keys("n", "Enter")
	tm.screen("[ok] Run completed in state CANCELLED", "EXIT=0")
}
