package cli_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// asmp call runs a stage tool, show lists the call command (text and
// --json), and asmp events prints the history.
func TestAgentModeCallAndEvents(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin, "ASMP_URL="+url)
	start := a.ok([]string{"start", "--workflow", "expense-approval-v1", "--json"})
	id := decodeRun(t, start).RunID
	var js struct {
		Next []struct {
			Command, Tool string
			Expects       map[string]string
		}
	}
	if err := json.Unmarshal([]byte(start), &js); err != nil {
		t.Fatal(err)
	}
	last := js.Next[len(js.Next)-1]
	if last.Tool != "policy_check" || last.Command != "asmp call "+id+" policy_check amount='<number>'" || last.Expects["amount"] != "number" {
		t.Fatalf("--json next lacks the tool: %+v", js.Next)
	}
	a.ok([]string{"show", id}, "Next: asmp call "+id+" policy_check amount='<number>'")
	out := a.ok([]string{"call", id, "policy_check", "amount=1500"}, "Called: policy_check in state SUBMIT", `"route": "escalate"`)
	if strings.Contains(out, "REVIEW") {
		t.Fatalf("call moved the run:\n%s", out)
	}
	var res struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal([]byte(a.ok([]string{"call", id, "policy_check", `{"amount": 10}`, "--json"})), &res); err != nil || res.Result["route"] != "approve" {
		t.Fatalf("call --json: %v %+v", err, res)
	}
	a.fails([]string{"call", id, "nope"}, "Tool \"nope\" is not available in state SUBMIT. Tools here: policy_check.")
	a.fails([]string{"call", id, "policy_check", "amount=lots"}, "must be a number")

	a.ok([]string{"step", id, "submit", "amount=12.5", "description=Team lunch"}, "State:  REVIEW")
	a.ok([]string{"events", id}, "Run "+id+" (expense-approval-v1): 2 events", "[1] ", "created", "[2] ", "transition submit  SUBMIT → REVIEW  by anonymous  [active]")
	a.ok([]string{"show", id, "--history"}, "[2] ", "transition submit  SUBMIT → REVIEW", "State:  REVIEW")
	var log struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal([]byte(a.ok([]string{"events", id, "--json"})), &log); err != nil || len(log.Events) != 2 || log.Events[1]["action"] != "submit" {
		t.Fatalf("events --json: %v %v", err, log)
	}
}

// asmp watch on a run that waits for a client says so on stderr at once,
// after the current state, and how to stop; in a state with a timer, it
// names the timer and when the server fires it.
func TestWatchSaysItWaits(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin, "ASMP_URL="+url)
	id := decodeRun(t, a.ok([]string{"start", "--json"})).RunID
	line, msg := watchSays(t, bin, a.env, id)
	if !strings.Contains(line, "[1] INITIAL (active)") {
		t.Fatalf("first line %q", line)
	}
	if !strings.Contains(msg, "run "+id+" waits for an action in state INITIAL (nothing changes until a client fires one") || !strings.Contains(msg, "--until-idle") || !strings.Contains(msg, "Ctrl-C") {
		t.Fatalf("stderr %q", msg)
	}
	id = decodeRun(t, a.ok([]string{"start", "--workflow", "expense-approval-v1", "--json"})).RunID
	a.ok([]string{"step", id, "submit", "amount=12.5", "description=Team lunch"}, "State:  REVIEW")
	if _, msg = watchSays(t, bin, a.env, id); !strings.Contains(msg, "waits for an action in state REVIEW (a client may fire one, or the server fires timer escalate_to_manager in ") {
		t.Fatalf("stderr in a state with a timer %q", msg)
	}
}

// watchSays runs asmp watch on run id and returns its first line on stdout
// and on stderr.
func watchSays(t *testing.T, bin string, env []string, id string) (line, msg string) {
	t.Helper()
	cmd := exec.Command(bin, "watch", id)
	cmd.Env = env
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	first := func(r io.Reader) <-chan string {
		ch := make(chan string, 1)
		go func() {
			if sc := bufio.NewScanner(r); sc.Scan() {
				ch <- sc.Text()
			}
		}()
		return ch
	}
	out, said := first(stdout), first(stderr)
	for _, got := range []*string{&line, &msg} {
		ch := out
		if got == &msg {
			ch = said
		}
		select {
		case *got = <-ch:
		case <-time.After(20 * time.Second):
			t.Fatal("watch printed nothing")
		}
	}
	return line, msg
}
