package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/app/cli"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// chatRequest is what the fake model is sent.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice any `json:"tool_choice"`
}

// text returns message i's content as text.
func (r chatRequest) text(i int) string {
	var s string
	if json.Unmarshal(r.Messages[i].Content, &s) == nil {
		return s
	}
	return string(r.Messages[i].Content)
}

func (r chatRequest) system() string { return r.text(0) }

// last returns the content of the last tool message.
func (r chatRequest) lastTool() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.text(i)
		}
	}
	return ""
}

// tool returns the offered tool name's parameters as JSON, "" when it is
// not offered.
func (r chatRequest) tool(name string) string {
	for _, t := range r.Tools {
		if t.Function.Name == name {
			b, _ := json.Marshal(t.Function.Parameters)
			return string(b)
		}
	}
	return ""
}

func (r chatRequest) toolNames() string {
	var n []string
	for _, t := range r.Tools {
		n = append(n, t.Function.Name)
	}
	return strings.Join(n, ",")
}

// turn is one scripted answer of the fake model: it checks the request and
// returns tool calls ("name", `{json args}`, …) or, with none, text.
type turn func(t testing.TB, r chatRequest) []string

// fakeModel is an OpenAI-compatible Chat Completions server that answers
// with scripted tool calls and records what it is sent. After the script,
// the last turn repeats.
type fakeModel struct {
	t      testing.TB
	script []turn
	mu     sync.Mutex
	reqs   []chatRequest
	auth   []string
	url    string
}

func newFakeModel(t testing.TB, script ...turn) *fakeModel {
	m := &fakeModel{t: t, script: script}
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	m.url = ts.URL + "/v1"
	return m
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no such endpoint"}}`, http.StatusNotFound)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	n := len(m.reqs)
	m.mu.Unlock()
	tn := m.script[min(n, len(m.script))-1]
	calls := tn(m.t, req)
	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "tool_calls"
	if len(calls) == 1 && !strings.HasPrefix(calls[0], "call:") {
		msg["content"], finish = calls[0], "stop"
	} else {
		var tcs []map[string]any
		for i := 0; i+1 < len(calls); i += 2 {
			tcs = append(tcs, map[string]any{"id": fmt.Sprintf("call_%d_%d", n, i/2), "type": "function",
				"function": map[string]any{"name": strings.TrimPrefix(calls[i], "call:"), "arguments": calls[i+1]}})
		}
		msg["tool_calls"] = tcs
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
	})
}

func (m *fakeModel) requests() []chatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]chatRequest(nil), m.reqs...)
}

// call builds a turn's tool call.
func call(name, args string) []string { return []string{"call:" + name, args} }

// driveServer serves the built-in workflows with task workers running.
func driveServer(t testing.TB) string {
	t.Helper()
	eng, err := engine.New(memstore.New(), append(examples.AllWith(examples.Options{PaymentStep: 5 * time.Millisecond}), examples.NumberFacts()), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := eng.StartWorkers(&engine.WorkerOptions{Poll: 10 * time.Millisecond})
	srv := server.New(eng, nil)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close(); w.Stop(time.Second) })
	return ts.URL
}

const testKey = "sk-test-secret-4242"

// drive runs asmp drive in-process against server and the fake model.
func drive(t testing.TB, server string, m *fakeModel, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	state := t.TempDir()
	env := map[string]string{"ASMP_LLM_KEY": testKey, "ASMP_STATE_DIR": state, "ASMP_LLM_URL": m.url}
	var out, errb bytes.Buffer
	code = cli.Main(context.Background(), append([]string{"drive", server, "--model", "test-model"}, args...),
		&cli.Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

// jsonLines decodes NDJSON output.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		out = append(out, m)
	}
	return out
}

func summaryOf(t *testing.T, lines []map[string]any) map[string]any {
	t.Helper()
	s := lines[len(lines)-1]
	if s["type"] != "summary" {
		t.Fatalf("last line is not the summary: %v", s)
	}
	return s
}

// The model drives config-wizard-v1 to DONE: it is offered one tool per
// action with the JSON Schema of its expects, the system prompt holds the
// state's hint, and the goal is its user message.
func TestDriveConfigWizard(t *testing.T) {
	srv := driveServer(t)
	m := newFakeModel(t,
		func(t testing.TB, r chatRequest) []string {
			if r.Model != "test-model" || r.toolNames() != "start,exit" || r.tool("start") != `{"additionalProperties":false,"properties":{},"required":[],"type":"object"}` {
				t.Errorf("first request: model %q tools %s %s", r.Model, r.toolNames(), r.tool("start"))
			}
			if !strings.Contains(r.system(), "Hint: Start the config wizard.") || !strings.Contains(r.system(), "Current state: INITIAL [active]") {
				t.Errorf("system prompt lacks the frame's hint:\n%s", r.system())
			}
			if r.Messages[1].Role != "user" || r.text(1) != `Goal: set the value to "dark mode"` {
				t.Errorf("user message = %s %q", r.Messages[1].Role, r.text(1))
			}
			if desc := r.Tools[0].Function.Description; !strings.Contains(desc, "Start wizard") || !strings.Contains(desc, "Start the config wizard.") || strings.Contains(desc, "Press 1") {
				t.Errorf("start description = %q (want the CLI label and the frame's hint, not the human one)", desc)
			}
			if r.ToolChoice != "required" {
				t.Errorf("tool_choice = %v", r.ToolChoice)
			}
			return call("start", `{}`)
		},
		func(t testing.TB, r chatRequest) []string {
			if r.tool("save") != `{"additionalProperties":false,"properties":{"value":{"type":"string"}},"required":["value"],"type":"object"}` {
				t.Errorf("save parameters = %s", r.tool("save"))
			}
			if !strings.Contains(r.system(), "Hint: Enter a value and save.") || !strings.Contains(r.lastTool(), `"state":"CONFIGURE"`) {
				t.Errorf("second request: system %q, tool result %q", r.system(), r.lastTool())
			}
			return call("save", `{"value": "dark mode"}`)
		},
		func(t testing.TB, r chatRequest) []string {
			if r.toolNames() != "confirm,cancel" {
				t.Errorf("tools at CONFIRM = %s", r.toolNames())
			}
			return call("confirm", `{}`)
		},
	)
	transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
	code, out, errOut := drive(t, srv, m, "--workflow", "config-wizard-v1", "--goal", `set the value to "dark mode"`, "--transcript", transcript)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"at INITIAL [active], driven by test-model", " 1. start {} → CONFIGURE [active]", ` 2. save {"value": "dark mode"} → CONFIRM`, " 3. confirm {} → DONE [completed]", "completed in state DONE after 3 steps", "Tokens used: 330"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	m.mu.Lock()
	auth := append([]string(nil), m.auth...)
	m.mu.Unlock()
	for _, a := range auth {
		if a != "Bearer "+testKey {
			t.Fatalf("Authorization = %q", a)
		}
	}
	b, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}
	tr := string(b)
	for _, want := range []string{`"request":`, `"response":`, `"tool_call":`, `"tool_result":`, `Hint: Enter a value and save.`, `"name":"save"`, `dark mode`} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript lacks %q", want)
		}
	}
	if strings.Contains(tr, testKey) || strings.Contains(out, testKey) || strings.Contains(errOut, testKey) {
		t.Fatal("the API key was written")
	}
	if fi, _ := os.Stat(transcript); fi.Mode().Perm() != 0o600 {
		t.Errorf("transcript mode = %v", fi.Mode().Perm())
	}
}

// A number for a string field comes back to the model as the tool result,
// with the server's hint, and the model's retry succeeds.
func TestDriveTypeErrorRetried(t *testing.T) {
	srv := driveServer(t)
	m := newFakeModel(t,
		func(t testing.TB, r chatRequest) []string { return call("start", `{}`) },
		func(t testing.TB, r chatRequest) []string { return call("save", `{"value": 42}`) },
		func(t testing.TB, r chatRequest) []string {
			res := r.lastTool()
			if !strings.Contains(res, `Field \"value\" must be a string, got integer.`) || !strings.Contains(res, `"status":400`) {
				t.Errorf("the refusal did not reach the model: %s", res)
			}
			return call("save", `{"value": "42"}`)
		},
		func(t testing.TB, r chatRequest) []string { return call("confirm", `{}`) },
	)
	code, out, errOut := drive(t, srv, m, "--workflow", "config-wizard-v1", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	lines := jsonLines(t, out)
	refused := lines[1]
	if refused["type"] != "step" || refused["ok"] != false || refused["tool"] != "save" || refused["state"] != "CONFIGURE" {
		t.Fatalf("refused step = %v", refused)
	}
	if e := refused["error"].(map[string]any); e["status"] != float64(400) || !strings.Contains(e["hint"].(string), "must be a string") {
		t.Fatalf("refusal = %v", e)
	}
	s := summaryOf(t, lines)
	if s["outcome"] != "completed" || s["state"] != "DONE" || s["status"] != "completed" || s["steps"] != float64(4) {
		t.Fatalf("summary = %v", s)
	}
	if tok := s["tokens"].(map[string]any); tok["total"] != float64(440) || tok["prompt"] != float64(400) {
		t.Fatalf("tokens = %v", tok)
	}
}

// expense-approval-v1 up to its critical reject: without --yes the drive
// stops and says a person must confirm (exit 1, the run untouched); with
// --json the summary says so; with --yes the model may fire it.
func TestDriveCriticalNeedsConfirmation(t *testing.T) {
	srv := driveServer(t)
	script := []turn{
		func(t testing.TB, r chatRequest) []string {
			return call("submit", `{"amount": 50, "description": "Taxi"}`)
		},
		func(t testing.TB, r chatRequest) []string {
			if !strings.Contains(r.tool("reject"), `"reason":{"type":"string"}`) {
				t.Errorf("reject parameters = %s", r.tool("reject"))
			}
			return call("reject", `{"reason": "no receipt"}`)
		},
	}
	m := newFakeModel(t, script...)
	code, out, errOut := drive(t, srv, m, "--workflow", "expense-approval-v1")
	if code != 1 || !strings.Contains(errOut, `asmp: The model chose the critical action "reject" (is_critical): a person must confirm it.`) || strings.Count(errOut, "asmp:") != 1 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, `asmp step `) || !strings.Contains(errOut, `--action reject '{"reason": "no receipt"}'`) {
		t.Fatalf("no command to fire it by hand: %s", errOut)
	}
	runID := strings.Fields(out[strings.Index(out, "Run ")+4:])[0]
	c, _ := client.New(srv, nil)
	f, err := c.Frame(context.Background(), runID)
	if err != nil || f.State != "REVIEW" {
		t.Fatalf("the critical action was fired: %v %v", f, err)
	}

	m = newFakeModel(t, script...)
	code, out, _ = drive(t, srv, m, "--workflow", "expense-approval-v1", "--json")
	s := summaryOf(t, jsonLines(t, out))
	conf, _ := s["confirm"].(map[string]any)
	if code != 1 || s["outcome"] != "confirm" || s["state"] != "REVIEW" || conf["action"] != "reject" || !strings.Contains(s["hint"].(string), "a person must confirm") {
		t.Fatalf("exit %d summary %v", code, s)
	}

	m = newFakeModel(t, script...)
	code, out, errOut = drive(t, srv, m, "--workflow", "expense-approval-v1", "--json", "--yes")
	if s := summaryOf(t, jsonLines(t, out)); code != 0 || s["state"] != "REJECTED" {
		t.Fatalf("with --yes: exit %d %v\n%s", code, s, errOut)
	}
}

// expense-approval-v1 through its processing state: the skill and the
// policy resource it names are in the system prompt, the stage tool is
// offered as tool_policy_check, and the payment is waited out on the
// stream (progress lines, no model request meanwhile) until PAID.
func TestDriveExpenseThroughProcessing(t *testing.T) {
	srv := driveServer(t)
	m := newFakeModel(t,
		func(t testing.TB, r chatRequest) []string {
			sys := r.system()
			for _, want := range []string{"Active skill \"expense-skill\" (version 1)", "# Expense claims", "Never invent an action", `Resource "policy" (Expense policy, text/markdown`, "Claims up to 1000 EUR are approved", "Hint: Submit the claim"} {
				if !strings.Contains(sys, want) {
					t.Errorf("system prompt lacks %q:\n%s", want, sys)
				}
			}
			if r.toolNames() != "submit,tool_policy_check" || r.tool("tool_policy_check") != `{"additionalProperties":false,"properties":{"amount":{"type":"number"}},"required":["amount"],"type":"object"}` {
				t.Errorf("tools = %s %s", r.toolNames(), r.tool("tool_policy_check"))
			}
			return call("tool_policy_check", `{"amount": 120}`)
		},
		func(t testing.TB, r chatRequest) []string {
			if !strings.Contains(r.lastTool(), `"route":"approve"`) {
				t.Errorf("stage tool result = %s", r.lastTool())
			}
			return call("submit", `{"amount": 120, "description": "Taxi to the airport"}`)
		},
		func(t testing.TB, r chatRequest) []string {
			if r.toolNames() != "approve,reject,escalate_to_manager" || !strings.Contains(r.system(), `"amount":120`) {
				t.Errorf("at REVIEW: tools %s\n%s", r.toolNames(), r.system())
			}
			return call("approve", `{}`)
		},
		func(t testing.TB, r chatRequest) []string {
			t.Errorf("the model was asked while the run was processing or done: %s", r.system())
			return []string{"nothing"}
		},
	)
	code, out, errOut := drive(t, srv, m, "--workflow", "expense-approval-v1", "--json", "--goal", "file 120 EUR for a taxi")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	lines := jsonLines(t, out)
	var kinds []string
	progress := 0
	for _, l := range lines {
		if l["type"] == "progress" {
			progress++
			continue
		}
		kinds = append(kinds, fmt.Sprintf("%v:%v:%v", l["type"], l["tool"], l["state"]))
	}
	want := "step:tool_policy_check:SUBMIT step:submit:REVIEW step:approve:PAYING summary:<nil>:PAID"
	if strings.Join(kinds, " ") != want || progress < 2 {
		t.Fatalf("lines = %s (%d progress)\n%s", strings.Join(kinds, " "), progress, out)
	}
	if res := lines[0]["result"].(map[string]any); res["route"] != "approve" {
		t.Fatalf("stage tool step = %v", lines[0])
	}
	if s := summaryOf(t, lines); s["status"] != "completed" || s["steps"] != float64(3) {
		t.Fatalf("summary = %v", s)
	}
	if n := len(m.requests()); n != 3 {
		t.Fatalf("%d model requests, want 3", n)
	}

	// Without --json the progress is a bar on stderr.
	m = newFakeModel(t,
		func(t testing.TB, r chatRequest) []string {
			return call("submit", `{"amount": 80, "description": "Lunch"}`)
		},
		func(t testing.TB, r chatRequest) []string { return call("approve", `{}`) },
	)
	code, out, errOut = drive(t, srv, m, "--workflow", "expense-approval-v1")
	if code != 0 || !strings.Contains(errOut, "[####################] 100% Paid") || !strings.Contains(out, "PAYING is processing; following the stream.") || !strings.Contains(out, "→ PAID [completed]") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// The step budget ends a model that loops, and a model that answers with
// text instead of a tool call ends the drive too: both exit 1 and say how
// to go on.
func TestDriveBudgetAndStop(t *testing.T) {
	srv := driveServer(t)
	m := newFakeModel(t,
		func(t testing.TB, r chatRequest) []string { return call("start", `{}`) },
		func(t testing.TB, r chatRequest) []string { return call("start", `{}`) }, // not offered any more: refused, forever
	)
	code, out, errOut := drive(t, srv, m, "--workflow", "config-wizard-v1", "--max-steps", "4", "--json")
	s := summaryOf(t, jsonLines(t, out))
	if code != 1 || s["outcome"] != "step_budget" || s["steps"] != float64(4) || s["state"] != "CONFIGURE" || !strings.Contains(errOut, "asmp: The step budget of 4 ran out") {
		t.Fatalf("exit %d %v\n%s", code, s, errOut)
	}
	reqs := m.requests()
	if len(reqs) != 4 || !strings.Contains(reqs[3].lastTool(), `"status":403`) || !strings.Contains(reqs[3].lastTool(), `No tool \"start\" in state CONFIGURE`) {
		t.Fatalf("%d requests; last tool result %s", len(reqs), reqs[len(reqs)-1].lastTool())
	}

	// As the hint says, --run goes on from where the budget ran out.
	m = newFakeModel(t,
		func(t testing.TB, r chatRequest) []string {
			if !strings.Contains(r.system(), "Current state: CONFIGURE") {
				t.Errorf("resumed elsewhere:\n%s", r.system())
			}
			return call("save", `{"value": "v"}`)
		},
		func(t testing.TB, r chatRequest) []string { return call("confirm", `{}`) },
	)
	code, out, errOut = drive(t, srv, m, "--run", s["run_id"].(string), "--json")
	if r := summaryOf(t, jsonLines(t, out)); code != 0 || r["state"] != "DONE" || r["steps"] != float64(2) {
		t.Fatalf("--run: exit %d %v\n%s", code, r, errOut)
	}

	m = newFakeModel(t, func(t testing.TB, r chatRequest) []string { return []string{"I would rather chat."} })
	code, out, errOut = drive(t, srv, m, "--workflow", "config-wizard-v1")
	if code != 1 || !strings.Contains(out, "The model stopped without calling a tool: I would rather chat.") || !strings.Contains(errOut, "asmp: The model stopped calling tools") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestDriveErrors(t *testing.T) {
	srv := driveServer(t)
	m := newFakeModel(t, func(t testing.TB, r chatRequest) []string { return call("start", `{}`) })
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"drive", srv}, "no model: give --model"},
		{[]string{"drive", srv, "--model", "m", "--max-steps", "0"}, "--max-steps 0"},
		{[]string{"drive", srv, "--model", "m", "--run", "r", "--workflow", "w"}, "give one of them"},
		{[]string{"drive", srv, "--model", "m", "--workflow", "nope-v1"}, "Workflow not found"},
	} {
		var out, errb bytes.Buffer
		env := map[string]string{"ASMP_LLM_URL": m.url, "ASMP_STATE_DIR": t.TempDir()}
		code := cli.Main(context.Background(), c.args, &cli.Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }})
		if code != 1 || !strings.HasPrefix(errb.String(), "asmp: ") || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
	// Without a URL, $ASMP_URL names the server (the rule of every client command).
	{
		var out, errb bytes.Buffer
		env := map[string]string{"ASMP_LLM_URL": m.url, "ASMP_STATE_DIR": t.TempDir(), "ASMP_URL": srv}
		code := cli.Main(context.Background(), []string{"drive", "--model", "m", "--workflow", "nope-v1"}, &cli.Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }})
		if code != 1 || !strings.Contains(errb.String(), "Workflow not found") {
			t.Errorf("drive with $ASMP_URL: exit %d, stderr %q", code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), []string{"drive", srv, "--model", "m"}, &cli.Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(string) string { return "" }})
	if code != 1 || !strings.Contains(errb.String(), "no model endpoint") {
		t.Errorf("no endpoint: exit %d %q", code, errb.String())
	}
}

// The model is told a field's bounds (the workflow's constraints, read
// from the run's version), not only its type.
func TestDriveToolsCarryConstraints(t *testing.T) {
	srv := driveServer(t)
	want := fmt.Sprintf(`"a":{"maximum":%d,"minimum":1,"type":"integer"}`, examples.NumberMax)
	m := newFakeModel(t, func(t testing.TB, r chatRequest) []string {
		if !strings.Contains(r.tool("submit"), want) {
			t.Errorf("submit parameters = %s\nwant them to hold %s", r.tool("submit"), want)
		}
		return []string{"Enough."}
	})
	if code, _, errOut := drive(t, srv, m, "--workflow", "number-facts-v1"); code != 1 || len(m.requests()) != 1 {
		t.Fatalf("exit %d after %d requests\n%s", code, len(m.requests()), errOut)
	}
}
