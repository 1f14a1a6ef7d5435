package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/internal/testsupport/testbin"
)

// asmpBin is the asmp binary the tests of this package share.
var asmpBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if asmpBin.dir != "" {
		os.RemoveAll(asmpBin.dir)
	}
	os.Exit(code)
}

// buildASMP returns the asmp binary, built on first use (with the race
// detector when the tests run with -race).
func buildASMP(t *testing.T) string {
	t.Helper()
	asmpBin.once.Do(func() {
		if asmpBin.dir, asmpBin.err = os.MkdirTemp("", "asmp-cli-bin"); asmpBin.err == nil {
			asmpBin.path, asmpBin.err = testbin.Build(asmpBin.dir)
		}
	})
	if asmpBin.err != nil {
		t.Fatalf("building asmp: %v", asmpBin.err)
	}
	return asmpBin.path
}

// serveASMP runs `asmp serve` on a free loopback port and returns its URL.
func serveASMP(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", ":memory:", "--log-level", "warn")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				urls <- m[1]
				sent = true
			}
		}
	}()
	select {
	case u := <-urls:
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("asmp serve did not say where it listens")
	}
	return ""
}

// agent runs asmp commands as separate processes with one state dir.
type agent struct {
	t   *testing.T
	bin string
	env []string
}

type result struct {
	code           int
	stdout, stderr string
}

func newAgent(t *testing.T, bin string, env ...string) *agent {
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ASMP_STATE_DIR=" + t.TempDir()}
	return &agent{t: t, bin: bin, env: append(base, env...)}
}

func (a *agent) run(args ...string) result {
	a.t.Helper()
	cmd := exec.Command(a.bin, args...)
	cmd.Env = a.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		a.t.Fatalf("asmp %v: %v", args, err)
	}
	return r
}

// ok runs a command that must succeed and contain every part.
func (a *agent) ok(args []string, parts ...string) string {
	a.t.Helper()
	r := a.run(args...)
	if r.code != 0 {
		a.t.Fatalf("asmp %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	for _, p := range parts {
		if !strings.Contains(r.stdout, p) {
			a.t.Fatalf("asmp %s: output lacks %q:\n%s", strings.Join(args, " "), p, r.stdout)
		}
	}
	return r.stdout
}

// fails runs a command that must exit 1 with "asmp: <hint>" on stderr.
func (a *agent) fails(args []string, hint string) result {
	a.t.Helper()
	r := a.run(args...)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "asmp: ") || !strings.Contains(r.stderr, hint) {
		a.t.Fatalf("asmp %s: exit %d, stderr %q; want exit 1 and a hint with %q\nstdout:\n%s", strings.Join(args, " "), r.code, r.stderr, hint, r.stdout)
	}
	return r
}

type runJSON struct {
	Server  string         `json:"server"`
	RunID   string         `json:"run_id"`
	ETag    string         `json:"etag"`
	Version int64          `json:"version"`
	Done    bool           `json:"done"`
	Fired   map[string]any `json:"fired"`
	Frame   map[string]any `json:"frame"`
	CLI     map[string]any `json:"cli"`
	Next    []struct {
		Command string `json:"command"`
		Action  string `json:"action"`
		Label   string `json:"label"`
		Keys    string `json:"keys"`
	} `json:"next"`
}

func decodeRun(t *testing.T, out string) runJSON {
	t.Helper()
	var r runJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not the run JSON: %v\n%s", err, out)
	}
	return r
}

// The config wizard from separate shell calls: start, step, step, show,
// step, with the error paths on the way.
func TestAgentModeConfigWizard(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin)

	start := decodeRun(t, a.ok([]string{"start", url, "--workflow", "config-wizard-v1", "--json"}))
	id := start.RunID
	if start.Server != url || start.Version != 1 || start.ETag != `"1"` || start.Done || start.Frame["state"] != "INITIAL" ||
		start.CLI["prompt"] != "Config wizard" || len(start.Next) != 2 || start.Next[0].Command != "asmp step "+id+" 1" ||
		start.Next[0].Action != "start" || start.Next[0].Keys != "1" || start.Next[1].Action != "exit" || start.Next[1].Keys != "2" {
		t.Fatalf("start --json = %+v", start)
	}
	// Text: the state, the prompt, options with their keys, the exact next command.
	a.ok([]string{"step", id, "1"}, "Fired:  start (INITIAL → CONFIGURE)", "State:  CONFIGURE [active]", "Set value",
		"1) Save  [action save, keys enter, expects value (string)]", "Value (string):", "Next: asmp step "+id+" '<value>'")
	// Errors: a selection that is no option (local hint), an action the
	// server does not offer now (the server's 403 hint), an unknown run.
	a.fails([]string{"step", id, "1"}, "needs input")
	r := a.fails([]string{"step", id, "--action", "confirm", "--json"}, `Action "confirm" is not available in state CONFIGURE. Offered actions: save.`)
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &body); err != nil || body.Error["status"] != 403.0 || body.Error["code"] != "forbidden" {
		t.Fatalf("--json error = %s (%v)", r.stdout, err)
	}
	a.fails([]string{"show", "0190aaaa-0000-7000-8000-000000000000", "--server", url}, "(Asked "+url+", as --server says: if the run lives on another server, pass --server URL or set ASMP_URL.)")
	a.env = append(a.env, "ASMP_URL="+url)
	a.fails([]string{"show", "0190aaaa-0000-7000-8000-000000000001"}, "(Asked "+url+", as $ASMP_URL says")
	a.env = a.env[:len(a.env)-1]
	// ASMP_URL comes before the run's remembered server.
	a.env = append(a.env, "ASMP_URL=http://127.0.0.1:1")
	a.fails([]string{"show", id}, "cannot reach the ASMP server at http://127.0.0.1:1")
	a.env = a.env[:len(a.env)-1]

	a.ok([]string{"step", id, "dark", "mode"}, "Fired:  save (CONFIGURE → CONFIRM)", `Data:   {"value":"dark mode"}`,
		"Apply configuration?", "1) Yes, apply  [action confirm, keys y]", "2) No, cancel  [action cancel, keys n]",
		"Next: asmp step "+id+" 1  # Yes, apply", "Next: asmp step "+id+" 2  # No, cancel")
	a.fails([]string{"step", id, "maybe"}, `"maybe" is not an option here. Type a number 1-2, an action (confirm, cancel) or a key (y for confirm, n for cancel).`)
	// A stale If-Match fires nothing.
	a.fails([]string{"step", id, "y", "--if-match", "2"}, "Nothing was fired")
	a.ok([]string{"show", id}, "State:  CONFIRM", "Apply configuration?")
	done := decodeRun(t, a.ok([]string{"step", id, "y", "--json"}))
	if !done.Done || done.Frame["state"] != "DONE" || done.Frame["status"] != "completed" || done.Fired["action"] != "confirm" || len(done.Next) != 0 {
		t.Fatalf("final step = %+v", done)
	}
	a.ok([]string{"show", id}, "Done: run "+id+" completed in state DONE.")
	a.fails([]string{"step", id, "1"}, "offers no more actions")
	// The remembered server is per state dir: ASMP_URL works elsewhere.
	other := newAgent(t, bin, "ASMP_URL="+url)
	other.ok([]string{"show", id, "--json"}, `"done": true`)
}

// A background task: step into it, then watch it finish, as text and as
// NDJSON.
func TestAgentModeWatch(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin, "ASMP_URL="+url)
	id := decodeRun(t, a.ok([]string{"start", "--workflow", "expense-approval-v1", "--json"})).RunID
	a.ok([]string{"step", id, "submit", "amount=12.5", "description=Team lunch"}, "State:  REVIEW", "Next: asmp step "+id+" reject '<reason>'")
	a.ok([]string{"step", id, "a"}, "State:  PAYING [processing]", "Next: asmp watch "+id+" --until-idle")
	out := a.ok([]string{"watch", id}, "PAYING (processing)", "progress 100% — Paid", "PAID (completed)", "Done: run "+id+" completed in state PAID.")
	if strings.Index(out, "PAYING") > strings.Index(out, "PAID (completed)") {
		t.Fatalf("watch out of order:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(a.ok([]string{"watch", id, "--json"})), "\n")
	var last map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &last) != nil || last["state"] != "PAID" || last["id"] != 4.0 {
		t.Fatalf("watch --json of a finished run = %q", lines)
	}
	// --until-idle stops at a state that waits for a client.
	id2 := decodeRun(t, a.ok([]string{"start", "--json"})).RunID
	a.ok([]string{"watch", id2, "--until-idle"}, "[1] INITIAL (active)", "Next: asmp step "+id2+" 1")
}
