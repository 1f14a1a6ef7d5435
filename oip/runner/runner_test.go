package runner_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/runner"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store/memstore"
)

// ledger is an OIP service with (or without) an executor.
type ledger struct {
	t   *testing.T
	svc *oip.Service
	ex  *runner.Executor
	n   atomic.Int64
}

func newLedger(t *testing.T, opts *runner.Options) *ledger {
	t.Helper()
	l := &ledger{t: t}
	o := &oip.Options{}
	if opts != nil {
		if opts.Dir == "" {
			opts.Dir = t.TempDir()
		}
		ex, err := runner.New(*opts)
		if err != nil {
			t.Fatal(err)
		}
		l.ex = ex
		o.Executor = ex
	}
	svc, err := oip.New(memstore.New(), o)
	if err != nil {
		t.Fatal(err)
	}
	l.svc = svc
	return l
}

// row dispatches a directory row under key.
func (l *ledger) row(key, body string) {
	l.t.Helper()
	if _, err := l.svc.Dispatch(context.Background(), key, json.RawMessage(body)); err != nil {
		l.t.Fatalf("dispatch row %s: %v", key, err)
	}
}

// invoke executes row with input as p and returns the receipt.
func (l *ledger) invokeAs(p auth.Principal, row string, input any) oip.Receipt {
	l.t.Helper()
	body, _ := json.Marshal(map[string]any{"type": "invocation", "object_key": row, "input": input, "execute": true})
	rc, err := l.svc.Dispatch(auth.WithPrincipal(context.Background(), p), fmt.Sprintf("inv-%s-%d", row, l.n.Add(1)), body)
	if err != nil {
		l.t.Fatalf("invoke %s: %v", row, err)
	}
	if rc.Outcome == nil {
		l.t.Fatalf("receipt without outcome: %+v", rc)
	}
	return rc
}

func (l *ledger) invoke(row string, input any) oip.Receipt {
	l.t.Helper()
	return l.invokeAs(auth.Open, row, input)
}

// records returns the history of a receipt's key.
func (l *ledger) records(rc oip.Receipt) []oip.Record {
	l.t.Helper()
	h, _, err := l.svc.History(context.Background(), rc.ObjectKey, 0, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	return h
}

const (
	echoRow  = `{"type":"directory_row","command":"echo","args":[{"name":"words","type":"array","required":false}]}`
	shRow    = `{"type":"directory_row","command":"sh","flags":[{"name":"c","type":"string","required":true,"short_alias":"-c"}],"timeout":%v}`
	touchRow = `{"type":"directory_row","command":"touch","args":[{"name":"path","type":"string","required":true}]}`
)

func TestSucceededAndFailed(t *testing.T) {
	l := newLedger(t, &runner.Options{Allow: []string{"echo", "sh"}})
	l.row("echo", echoRow)
	l.row("sh", fmt.Sprintf(shRow, 10))

	rc := l.invoke("echo", map[string]any{"words": []string{"hello", "world"}})
	o := rc.Outcome
	if o.Class != oip.OutcomeSucceeded || o.ExitCode == nil || *o.ExitCode != 0 || o.Stdout.Text != "hello world\n" || o.Reason != "" {
		t.Fatalf("echo: %+v stdout=%+v", o, o.Stdout)
	}
	sum := sha256.Sum256([]byte("hello world\n"))
	if o.Stdout.Size != 12 || o.Stdout.SHA256 != hex.EncodeToString(sum[:]) || o.Stdout.Truncated {
		t.Fatalf("stdout stream: %+v", o.Stdout)
	}
	// The attempt, then its result.
	recs := l.records(rc)
	if len(recs) != 2 || recs[0].Type != oip.TypeInvocation || recs[1].Type != oip.TypeInvocationResult ||
		recs[1].ResultOf != recs[0].InvID || recs[1].InvID != rc.InvID {
		t.Fatalf("records: %+v", recs)
	}
	var body struct {
		Outcome oip.Outcome `json:"outcome"`
	}
	if err := json.Unmarshal(recs[1].Body, &body); err != nil || body.Outcome.Class != oip.OutcomeSucceeded || body.Outcome.Stdout.Text != "hello world\n" {
		t.Fatalf("result body: %s (%v)", recs[1].Body, err)
	}

	rc = l.invoke("sh", map[string]any{"c": "echo oops >&2; exit 3"})
	o = rc.Outcome
	if o.Class != oip.OutcomeFailed || o.ExitCode == nil || *o.ExitCode != 3 || o.Stderr.Text != "oops\n" || !strings.Contains(o.Reason, "code 3") {
		t.Fatalf("exit 3: %+v", o)
	}
}

func TestJSONOutput(t *testing.T) {
	l := newLedger(t, &runner.Options{Allow: []string{"echo"}})
	l.row("json", strings.Replace(echoRow, `"command"`, `"output_format":"json","command"`, 1))
	rc := l.invoke("json", map[string]any{"words": []string{`{"a":`, `[1, 2.5, "x"]}`}})
	if o := rc.Outcome; o.Class != oip.OutcomeSucceeded || string(o.Output) != `{"a":[1,2.5,"x"]}` {
		t.Fatalf("json: %+v output=%s", o, o.Output)
	}
	// The parsed output is in the ledger too.
	rec, err := l.svc.Record(context.Background(), rc.InvID)
	if err != nil || !strings.Contains(string(rec.Body), `"output":{"a":[1,2.5,"x"]}`) {
		t.Fatalf("record: %s %v", rec.Body, err)
	}
	for _, words := range [][]string{{"not", "json"}, {"{}", "{}"}, {}} {
		rc = l.invoke("json", map[string]any{"words": words})
		if o := rc.Outcome; o.Class != oip.OutcomeFailed || o.Output != nil || *o.ExitCode != 0 || !strings.Contains(o.Reason, "not one JSON value") {
			t.Fatalf("%q: %+v", words, o)
		}
	}
}

// alive reports whether pid is a live process (zombies count as dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// pid (comm) STATE ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	l := newLedger(t, &runner.Options{Allow: []string{"sh", "sleep"}})
	l.row("sh", fmt.Sprintf(shRow, 1))
	l.row("sleep", `{"type":"directory_row","command":"sleep","args":[{"name":"s","type":"number","required":true}],"timeout":0.5}`)

	// The bounds below tell a kill from waiting out the 30 s sleeps, with
	// room to spare for a loaded machine; they measure no speed.
	start := time.Now()
	rc := l.invoke("sleep", map[string]any{"s": 30})
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("sleep 30 with a 0.5s timeout took %s", d)
	}
	if o := rc.Outcome; o.Class != oip.OutcomeFailed || !strings.Contains(o.Reason, "Timed out after 500ms") || o.ExitCode == nil || *o.ExitCode != -1 {
		t.Fatalf("sleep: %+v", o)
	}

	// A child in the background and one in the foreground: both die.
	start = time.Now()
	rc = l.invoke("sh", map[string]any{"c": "sleep 30 & echo $!; sleep 30"})
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("took %s", d)
	}
	o := rc.Outcome
	if o.Class != oip.OutcomeFailed || !strings.Contains(o.Reason, "Timed out") || o.DurationMS < 900 {
		t.Fatalf("sh: %+v", o)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(o.Stdout.Text))
	if err != nil {
		t.Fatalf("child pid: %q", o.Stdout.Text)
	}
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the background child %d still runs after the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestChildrenDieWhenCommandExits(t *testing.T) {
	l := newLedger(t, &runner.Options{Allow: []string{"sh"}})
	l.row("sh", fmt.Sprintf(shRow, 10))
	// The background child keeps stdout open; it must not hold the
	// outcome until the 10 s timeout (which would make it a failure), nor
	// outlive the command.
	rc := l.invoke("sh", map[string]any{"c": "sleep 30 & echo $!"})
	o := rc.Outcome
	if o.Class != oip.OutcomeSucceeded {
		t.Fatalf("%+v", o)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(o.Stdout.Text))
	deadline := time.Now().Add(2 * time.Second)
	for pid > 0 && alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the background child %d outlived its command", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOutputCap(t *testing.T) {
	l := newLedger(t, &runner.Options{Allow: []string{"seq", "sh"}, MaxOutput: 1000})
	l.row("seq", `{"type":"directory_row","command":"seq","args":[{"name":"n","type":"integer","required":true}]}`)
	l.row("sh", fmt.Sprintf(shRow, 10))
	rc := l.invoke("seq", map[string]any{"n": 100000})
	var full strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	sum := sha256.Sum256([]byte(full.String()))
	o := rc.Outcome
	if o.Class != oip.OutcomeSucceeded || !o.Stdout.Truncated || len(o.Stdout.Text) != 1000 ||
		o.Stdout.Size != int64(full.Len()) || o.Stdout.SHA256 != hex.EncodeToString(sum[:]) ||
		!strings.HasPrefix(full.String(), o.Stdout.Text) {
		t.Fatalf("stdout: size %d truncated %v len %d sha %s", o.Stdout.Size, o.Stdout.Truncated, len(o.Stdout.Text), o.Stdout.SHA256)
	}
	// A multi-byte character cut by the cap is dropped, not mangled;
	// stderr has its own cap.
	rc = l.invoke("sh", map[string]any{"c": "printf 'x%.0s' $(seq 999); printf 'é€'; printf 'e%.0s' $(seq 5000) >&2"})
	o = rc.Outcome
	if o.Stdout.Text != strings.Repeat("x", 999) || o.Stdout.Size != 999+2+3 || !o.Stdout.Truncated {
		t.Fatalf("stdout: %q size %d", o.Stdout.Text[990:], o.Stdout.Size)
	}
	if len(o.Stderr.Text) != 1000 || o.Stderr.Size != 5000 || !o.Stderr.Truncated {
		t.Fatalf("stderr: %d %d", len(o.Stderr.Text), o.Stderr.Size)
	}
	// JSON output over the cap is not parsed.
	l.row("big", `{"type":"directory_row","command":"seq","output_format":"json","args":[{"name":"n","type":"integer","required":true}]}`)
	if o := l.invoke("big", map[string]any{"n": 1}).Outcome; o.Class != oip.OutcomeSucceeded || string(o.Output) != "1" {
		t.Fatalf("small json: %+v", o)
	}
	if o := l.invoke("big", map[string]any{"n": 10000}).Outcome; o.Class != oip.OutcomeFailed || o.Output != nil || !strings.Contains(o.Reason, "over the output cap") {
		t.Fatalf("big json: %+v", o)
	}
}

// TestRefusedNothingRuns: every refusal is recorded with its reason, and
// the command (which would create a file) did not run.
func TestRefusedNothingRuns(t *testing.T) {
	dir := t.TempDir()
	target := func(name string) string { return filepath.Join(dir, name) }
	ran := func(name string) bool { _, err := os.Stat(target(name)); return err == nil }

	check := func(t *testing.T, l *ledger, rc oip.Receipt, file, reason string, records int) {
		t.Helper()
		if rc.Outcome.Class != oip.OutcomeRefused || !strings.Contains(rc.Outcome.Reason, reason) || rc.Outcome.ExitCode != nil {
			t.Fatalf("outcome %+v, want refused with %q", rc.Outcome, reason)
		}
		if ran(file) {
			t.Fatalf("the refused command ran: %s exists", file)
		}
		recs := l.records(rc)
		if len(recs) != records {
			t.Fatalf("%d records, want %d", len(recs), records)
		}
		last, err := l.svc.Record(context.Background(), rc.InvID)
		if err != nil || !strings.Contains(string(last.Body), `"class":"refused"`) || !strings.Contains(string(last.Body), "reason") {
			t.Fatalf("recorded: %s %v", last.Body, err)
		}
	}

	t.Run("exec disabled", func(t *testing.T) {
		l := newLedger(t, nil)
		l.row("touch", touchRow)
		rc := l.invoke("touch", map[string]any{"path": target("a")})
		check(t, l, rc, "a", "--allow-exec", 1)
	})
	t.Run("no exec scope", func(t *testing.T) {
		l := newLedger(t, &runner.Options{Allow: []string{"touch"}})
		l.row("touch", touchRow)
		rc := l.invokeAs(auth.Principal{Name: "reader", Scopes: []string{auth.ScopeRead, auth.ScopeDispatch}}, "touch", map[string]any{"path": target("b")})
		check(t, l, rc, "b", `"reader" lacks the exec scope`, 1)
		if recs := l.records(rc); recs[0].Source != "reader" {
			t.Fatalf("source %q", recs[0].Source)
		}
		// The same invocation with the scope runs.
		if rc := l.invoke("touch", map[string]any{"path": target("b2")}); rc.Outcome.Class != oip.OutcomeSucceeded || !ran("b2") {
			t.Fatalf("with the scope: %+v", rc.Outcome)
		}
	})
	t.Run("not on the allowlist", func(t *testing.T) {
		l := newLedger(t, &runner.Options{Allow: []string{"echo"}})
		l.row("touch", touchRow)
		rc := l.invoke("touch", map[string]any{"path": target("c")})
		check(t, l, rc, "c", "not on this server's allowlist", 2)
	})
	t.Run("empty allowlist", func(t *testing.T) {
		l := newLedger(t, &runner.Options{})
		l.row("touch", touchRow)
		check(t, l, l.invoke("touch", map[string]any{"path": target("d")}), "d", "allowlist", 2)
	})
	t.Run("bad input", func(t *testing.T) {
		l := newLedger(t, &runner.Options{Allow: []string{"touch"}})
		l.row("touch", touchRow)
		check(t, l, l.invoke("touch", map[string]any{"path": target("e"), "force": true}), "e", "does not fit the row", 1)
		check(t, l, l.invoke("touch", map[string]any{"path": 7}), "7", "does not fit the row", 1)
	})
	t.Run("shell row without sh", func(t *testing.T) {
		l := newLedger(t, &runner.Options{Allow: []string{"touch"}})
		l.row("touch", strings.Replace(touchRow, `"command"`, `"invocation_method":"shell","command"`, 1))
		check(t, l, l.invoke("touch", map[string]any{"path": target("f")}), "f", "needs /bin/sh on the allowlist", 2)
	})
	t.Run("shell row whose command is not allowed", func(t *testing.T) {
		l := newLedger(t, &runner.Options{Allow: []string{"sh"}})
		l.row("touch", strings.Replace(touchRow, `"command"`, `"invocation_method":"shell","command"`, 1))
		check(t, l, l.invoke("touch", map[string]any{"path": target("g")}), "g", "not on this server's allowlist", 2)
	})
	t.Run("program not found", func(t *testing.T) {
		l := newLedger(t, &runner.Options{Allow: []string{"touch"}})
		l.row("nope", `{"type":"directory_row","command":"no-such-program-asmp"}`)
		check(t, l, l.invoke("nope", nil), "-", "not found on PATH", 2)
		l.row("rel", `{"type":"directory_row","command":"./touch"}`)
		check(t, l, l.invoke("rel", nil), "-", "relative path is not allowed", 2)
	})
}

// TestNoShellInterpretation: shell metacharacters in input reach the
// program as plain words, for exec rows and for (quoted) shell rows.
func TestNoShellInterpretation(t *testing.T) {
	dir := t.TempDir()
	words := []string{
		"; touch " + filepath.Join(dir, "x"),
		"$(touch " + filepath.Join(dir, "y") + ")",
		"`touch " + filepath.Join(dir, "z") + "`",
		"&& touch " + filepath.Join(dir, "w"),
		"| touch " + filepath.Join(dir, "v"),
		"*", "$HOME", "'", `"`, "a\nb", "",
	}
	l := newLedger(t, &runner.Options{Allow: []string{"printf", "sh"}})
	base := `{"type":"directory_row","command":"printf","args":[{"name":"format","type":"string","required":true},{"name":"words","type":"array"}]%s}`
	l.row("exec", fmt.Sprintf(base, ""))
	l.row("shell", fmt.Sprintf(base, `,"invocation_method":"shell"`))
	var want strings.Builder
	for _, w := range words {
		want.WriteString("[" + w + "]\n")
	}
	for _, key := range []string{"exec", "shell"} {
		o := l.invoke(key, map[string]any{"format": `[%s]\n`, "words": words}).Outcome
		if o.Class != oip.OutcomeSucceeded || o.Stdout.Text != want.String() {
			t.Fatalf("%s: %+v\nstdout %q\nwant   %q", key, o, o.Stdout.Text, want.String())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("input was interpreted by a shell: %v exist", entries)
	}
}

func TestCleanEnvironment(t *testing.T) {
	t.Setenv("ASMP_CANARY_TOKEN", "canary-secret-7f3a")
	t.Setenv("ASMP_TOKEN", "canary-secret-7f3a")
	parent := t.TempDir()
	l := newLedger(t, &runner.Options{Allow: []string{"env", "sh"}, Dir: parent})
	l.row("env", `{"type":"directory_row","command":"env"}`)
	o := l.invoke("env", nil).Outcome
	if o.Class != oip.OutcomeSucceeded || strings.Contains(o.Stdout.Text, "canary") {
		t.Fatalf("env: %+v %q", o, o.Stdout.Text)
	}
	lines := strings.Split(strings.TrimSpace(o.Stdout.Text), "\n")
	env := map[string]string{}
	for _, line := range lines {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	if len(env) != 3 || env["PATH"] != runner.DefaultPath || env["LANG"] != "C.UTF-8" || filepath.Dir(env["HOME"]) != parent {
		t.Fatalf("environment: %q", lines)
	}
	// HOME is the working directory, fresh per execution and removed
	// afterwards; stdin is empty.
	l.row("sh", fmt.Sprintf(shRow, 10))
	o = l.invoke("sh", map[string]any{"c": `pwd; test "$(pwd)" = "$HOME" && echo same; cat; echo end`}).Outcome
	out := strings.Split(o.Stdout.Text, "\n")
	if o.Class != oip.OutcomeSucceeded || len(out) != 4 || out[1] != "same" || out[2] != "end" || filepath.Dir(out[0]) != parent {
		t.Fatalf("%+v %q", o, o.Stdout.Text)
	}
	if _, err := os.Stat(out[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("working directory %s was not removed: %v", out[0], err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestAllowlistResolution(t *testing.T) {
	bin := t.TempDir()
	echo, err := runner.Resolve("echo", os.Getenv("PATH"))
	if err != nil {
		t.Skip("no echo on PATH")
	}
	link := func(name string) string {
		p := filepath.Join(bin, name)
		if err := os.Symlink(echo.Path, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sameName, otherName := link("echo"), link("other")

	// An entry given through a symlink allows the real program by name.
	l := newLedger(t, &runner.Options{Allow: []string{sameName}})
	l.row("echo", echoRow)
	if o := l.invoke("echo", map[string]any{"words": []string{"hi"}}).Outcome; o.Class != oip.OutcomeSucceeded || o.Stdout.Text != "hi\n" {
		t.Fatalf("via symlinked entry: %+v", o)
	}
	// A row naming a symlink to an allowed program under the same name
	// runs; under another name (a multi-call binary's other applet) not.
	l = newLedger(t, &runner.Options{Allow: []string{"echo"}})
	l.row("same", strings.Replace(echoRow, `"echo"`, strconv.Quote(sameName), 1))
	l.row("other", strings.Replace(echoRow, `"echo"`, strconv.Quote(otherName), 1))
	if o := l.invoke("same", map[string]any{"words": []string{"hi"}}).Outcome; o.Class != oip.OutcomeSucceeded {
		t.Fatalf("same name: %+v", o)
	}
	if o := l.invoke("other", map[string]any{"words": []string{"hi"}}).Outcome; o.Class != oip.OutcomeRefused || !strings.Contains(o.Reason, "allowlist") {
		t.Fatalf("other name: %+v", o)
	}

	for _, bad := range []string{"bin/echo", "./echo", "no-such-program-asmp", "/no/such/file", bin, ""} {
		if _, err := runner.New(runner.Options{Allow: []string{bad}, Dir: t.TempDir()}); err == nil {
			t.Errorf("New accepted allowlist entry %q", bad)
		}
	}
	ex, err := runner.New(runner.Options{Allow: []string{"echo", echo.Path, sameName, otherName}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// One program under two names: two entries.
	if got := ex.Allowed(); len(got) != 2 || got[0].Real != got[1].Real || got[1].Path != otherName {
		t.Fatalf("allowed: %+v", got)
	}
}

func TestConcurrencyBound(t *testing.T) {
	dir := t.TempDir()
	l := newLedger(t, &runner.Options{Allow: []string{"sleep"}, Concurrency: 1, Dir: dir})
	l.row("slow", `{"type":"directory_row","command":"sleep","args":[{"name":"s","type":"number","required":true}],"timeout":1.5}`)
	l.row("quick", `{"type":"directory_row","command":"sleep","args":[{"name":"s","type":"number","required":true}],"timeout":0.2}`)
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		close(started)
		l.invoke("slow", map[string]any{"s": 30})
	})
	<-started
	// The slow one holds the slot once its working directory exists.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow execution never started")
		}
	}
	o := l.invoke("quick", map[string]any{"s": 0})
	if o.Outcome.Class != oip.OutcomeRefused || !strings.Contains(o.Outcome.Reason, "slot") {
		t.Fatalf("busy: %+v", o.Outcome)
	}
	wg.Wait()
	if o := l.invoke("quick", map[string]any{"s": 0}).Outcome; o.Class != oip.OutcomeSucceeded {
		t.Fatalf("after: %+v", o)
	}
}

// TestCancelledExecution: an execution dispatched with CancelExecution
// stops when its context ends; without it, it outlives the context.
func TestCancelledExecution(t *testing.T) {
	l := newLedger(t, &runner.Options{Allow: []string{"sleep"}})
	l.row("sleep", `{"type":"directory_row","command":"sleep","args":[{"name":"s","type":"number","required":true}],"timeout":10}`)
	body := json.RawMessage(`{"type":"invocation","object_key":"sleep","input":{"s":0.5},"execute":true}`)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	rc, err := l.svc.Dispatch(ctx, "outlives", body)
	if err != nil || rc.Outcome.Class != oip.OutcomeSucceeded {
		t.Fatalf("without the mark: %+v %v", rc.Outcome, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	body = json.RawMessage(`{"type":"invocation","object_key":"sleep","input":{"s":30},"execute":true}`)
	rc, err = l.svc.Dispatch(oip.CancelExecution(ctx), "stops", body)
	if err != nil || rc.Outcome.Class != oip.OutcomeFailed || !strings.Contains(rc.Outcome.Reason, "Stopped") || time.Since(start) > 20*time.Second {
		t.Fatalf("with the mark: %+v %v", rc.Outcome, err)
	}
}

// attemptChecker runs inside Execute and checks that the attempt is
// already in the ledger, so a crash mid-run leaves it.
type attemptChecker struct {
	svc  *oip.Service
	seen chan oip.Record
}

func (a *attemptChecker) Execute(ctx context.Context, x oip.Execution) oip.Outcome {
	rec, err := a.svc.Record(ctx, x.AttemptID)
	if err == nil {
		a.seen <- rec
	}
	close(a.seen)
	return oip.Outcome{Class: oip.OutcomeFailed, Reason: "simulated crash"}
}

func TestAttemptRecordedBeforeRun(t *testing.T) {
	ac := &attemptChecker{seen: make(chan oip.Record, 1)}
	svc, err := oip.New(memstore.New(), &oip.Options{Executor: ac})
	if err != nil {
		t.Fatal(err)
	}
	ac.svc = svc
	ctx := context.Background()
	if _, err := svc.Dispatch(ctx, "echo", json.RawMessage(echoRow)); err != nil {
		t.Fatal(err)
	}
	rc, err := svc.Dispatch(ctx, "run-1", json.RawMessage(`{"type":"invocation","object_key":"echo","execute":true}`))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := <-ac.seen
	if !ok || rec.Type != oip.TypeInvocation || rec.Key != "run-1" || !strings.Contains(string(rec.Body), `"argv":["echo"]`) {
		t.Fatalf("attempt during the run: %+v %v", rec, ok)
	}
	res, err := svc.Record(ctx, rc.InvID)
	if err != nil || res.ResultOf != rec.InvID {
		t.Fatalf("result: %+v %v", res, err)
	}
}

func TestMalformedExecution(t *testing.T) {
	ex, err := runner.New(runner.Options{Allow: []string{"echo"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []oip.Execution{{}, {Row: nil}} {
		if o := ex.Execute(context.Background(), x); o.Class != oip.OutcomeRefused {
			t.Fatalf("%+v", o)
		}
	}
	_ = protocol.EInvalid
}

// The executor creates each execution's directory relative to the
// directory it opened at start: if that directory is later replaced by a
// link to another one, nothing is created or run in the link's target.
func TestRunDirFollowsNoSwappedLink(t *testing.T) {
	base := t.TempDir()
	dir, elsewhere := filepath.Join(base, "exec"), filepath.Join(base, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, &runner.Options{Allow: []string{"sh"}, Dir: dir})
	l.row("sh", fmt.Sprintf(shRow, 10))
	if rc := l.invoke("sh", map[string]any{"c": "pwd -P"}); rc.Outcome.Class != oip.OutcomeSucceeded || !strings.HasPrefix(rc.Outcome.Stdout.Text, dir+"/") {
		t.Fatalf("before the swap: %+v", rc.Outcome)
	}
	// The swap: the opened directory moves away, a link takes its name.
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	rc := l.invoke("sh", map[string]any{"c": "pwd -P; touch here"})
	if rc.Outcome.Class == oip.OutcomeSucceeded && strings.HasPrefix(rc.Outcome.Stdout.Text, elsewhere) {
		t.Fatalf("the execution ran in the link's target: %+v", rc.Outcome)
	}
	if ents, err := os.ReadDir(elsewhere); err != nil || len(ents) != 0 {
		t.Fatalf("the link's target holds %v (%v), want nothing", ents, err)
	}
}
