package mcpbridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/testsupport/testbin"
	"github.com/asmp-dev/asmp/spec"
)

// The black-box tests drive the real binary: `asmp serve` (with /mcp) and
// `asmp mcp` (stdio) against it, with the go-sdk's MCP client.

var binary string

func TestMain(m *testing.M) { testbin.Main(m, &binary, stopServers) }

// Tokens of the test server.
const (
	adminToken  = "admin-secret-0123456789"  // every scope
	agentToken  = "agent-secret-0123456789"  // read, runs, dispatch (no exec)
	readerToken = "reader-secret-0123456789" // read only
)

var (
	serversMu sync.Mutex
	servers   = map[string]*server{}
)

type server struct {
	url    string
	cmd    *exec.Cmd
	stderr *lockedWriter
}

func stopServers() {
	serversMu.Lock()
	defer serversMu.Unlock()
	for _, s := range servers {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

var listening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// serveOnce starts `asmp serve args...` once per distinct args and
// returns its URL.
func serveOnce(t testing.TB, args ...string) string {
	t.Helper()
	key := strings.Join(args, " ")
	serversMu.Lock()
	defer serversMu.Unlock()
	if s, ok := servers[key]; ok {
		return s.url
	}
	all := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", ":memory:",
		"--token", "admin=" + adminToken, "--token", "agent=" + agentToken + ":read,runs,dispatch",
		"--token", "reader=" + readerToken + ":read", "--log-level", "warn"}, args...)
	cmd := exec.Command(binary, all...)
	pr, pw := io.Pipe()
	s := &server{cmd: cmd, stderr: &lockedWriter{w: &bytes.Buffer{}}}
	cmd.Stderr = io.MultiWriter(pw, s.stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case s.url = <-found:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("asmp serve did not start:\n%s", s.stderr.w)
	}
	servers[key] = s
	return s.url
}

// theServer is the server of the functional tests: the built-in examples,
// execution of echo allowed, the seed's row dispatched.
func theServer(t testing.TB) string {
	url := serveOnce(t, "--mcp-poll", "100ms", "--allow-exec", "--exec-allow", "echo")
	seedOnce.Do(func() {
		httpDo(t, url, adminToken, "POST", "/api/dispatch", json.RawMessage(seedRow))
		httpDo(t, url, adminToken, "POST", "/api/dispatch", json.RawMessage(echoRow))
	})
	return url
}

var seedOnce sync.Once

// seedRow is the seed's directory row.
const seedRow = `{"key": "my-cli-tool-v1", "body": {"type": "directory_row", "command": "mytool",
  "description": "A sample CLI tool for processing files.",
  "args": [{"name": "input_file", "type": "string", "description": "Path to the input file.", "required": true}],
  "flags": [
    {"name": "output", "type": "string", "description": "Path for the output file.", "required": false, "default": "./output.txt", "short_alias": "-o"},
    {"name": "verbose", "type": "boolean", "description": "Enable verbose logging.", "required": false, "default": false, "short_alias": "-v"}],
  "output_format": "text", "invocation_method": "exec", "source_url": "https://github.com/example/mytool/releases/v1.0.0"}}`

const echoRow = `{"key": "echo-v1", "body": {"type": "directory_row", "command": "echo", "description": "Print words.",
  "args": [{"name": "words", "type": "array", "required": true}]}}`

// httpDo sends one request to the server's HTTP API and returns the
// decoded answer; it fails the test on a status of 300 or more.
func httpDo(t testing.TB, url, token, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// conn is an MCP client session with what the server notified.
type conn struct {
	t        testing.TB
	cs       *mcp.ClientSession
	changed  chan struct{}
	progress chan *mcp.ProgressNotificationParams
}

type transport struct {
	name string
	make func(t testing.TB, url, token string, extra ...string) mcp.Transport
}

var transports = []transport{
	{"stdio", func(t testing.TB, url, token string, extra ...string) mcp.Transport {
		cmd := exec.Command(binary, append([]string{"mcp", "--server", url, "--poll", "100ms"}, extra...)...)
		cmd.Env = append(os.Environ(), "ASMP_TOKEN="+token)
		cmd.Stderr = os.Stderr
		return &mcp.CommandTransport{Command: cmd}
	}},
	{"http", func(t testing.TB, url, token string, extra ...string) mcp.Transport {
		return &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer(token)}}
	}},
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t testing.TB, tr mcp.Transport) *conn {
	t.Helper()
	c := &conn{t: t, changed: make(chan struct{}, 64), progress: make(chan *mcp.ProgressNotificationParams, 64)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "asmp-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.progress <- r.Params
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

// drain forgets the notifications so far.
func (c *conn) drain() {
	for {
		select {
		case <-c.changed:
		default:
			return
		}
	}
}

// waitChanged waits for a tools/list_changed notification.
func (c *conn) waitChanged(what string) {
	c.t.Helper()
	select {
	case <-c.changed:
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s: no notifications/tools/list_changed", what)
	}
}

func (c *conn) call(name string, args any) *mcp.CallToolResult {
	c.t.Helper()
	return c.callMeta(name, args, nil)
}

func (c *conn) callMeta(name string, args any, meta mcp.Meta) *mcp.CallToolResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		c.t.Fatalf("%s: protocol error %v (refusals must be isError results)", name, err)
	}
	return res
}

// ok calls name and fails unless it succeeded; it returns the structured
// content.
func (c *conn) ok(name string, args any) map[string]any {
	c.t.Helper()
	res := c.call(name, args)
	if res.IsError {
		c.t.Fatalf("%s %v: isError: %s", name, args, text(res))
	}
	return structured(c.t, res)
}

// step calls a tool that moves the current run and checks that the tool
// list follows: list_changed arrives and the listed tools are the ones
// the answer names.
func (c *conn) step(name string, args any) map[string]any {
	c.t.Helper()
	c.drain()
	sc := c.ok(name, args)
	c.waitChanged(name)
	checkView(c.t, sc)
	want := strs(sc["tools"])
	got := c.dynamicTools()
	if !slices.Equal(got, want) {
		c.t.Fatalf("after %s the session lists %v, the answer says %v", name, got, want)
	}
	return sc
}

// refused calls name and checks that it is an isError result with a hint
// containing each of want.
func (c *conn) refused(name string, args any, want ...string) {
	c.t.Helper()
	res := c.call(name, args)
	if !res.IsError {
		c.t.Fatalf("%s %v: not refused: %s", name, args, text(res))
	}
	h := text(res)
	for _, w := range want {
		if !strings.Contains(h, w) {
			c.t.Fatalf("%s %v: the hint %q does not contain %q", name, args, h, w)
		}
	}
	if sc := structured(c.t, res); sc["hint"] == nil || sc["hint"] == "" {
		c.t.Fatalf("%s: no hint in the structured error: %v", name, sc)
	}
}

func (c *conn) tools() map[string]*mcp.Tool {
	c.t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range c.cs.Tools(context.Background(), nil) {
		if err != nil {
			c.t.Fatal(err)
		}
		out[tool.Name] = tool
	}
	return out
}

var staticTools = []string{"asmp_dispatch", "asmp_get_run", "asmp_invoke", "asmp_list_workflows", "asmp_receipt", "asmp_start_run", "asmp_transition"}

// dynamicTools lists the tools that are neither static nor rows, sorted.
func (c *conn) dynamicTools() []string {
	var out []string
	for n := range c.tools() {
		if !slices.Contains(staticTools, n) && !strings.HasPrefix(n, "row_") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func structured(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	slices.Sort(out)
	return out
}

// checkView validates the frame (and CLI object) of a run view against
// the protocol's schemas.
func checkView(t testing.TB, sc map[string]any) {
	t.Helper()
	if err := spec.ValidateValue(spec.StateFrame, sc["frame"]); err != nil {
		t.Fatalf("the frame does not validate: %v\n%v", err, sc["frame"])
	}
	if cli, ok := sc["cli"]; ok {
		if err := spec.ValidateValue(spec.CLI, cli); err != nil {
			t.Fatalf("the CLI object does not validate: %v", err)
		}
	}
}

func frame(sc map[string]any) map[string]any { return sc["frame"].(map[string]any) }

func eachTransport(t *testing.T, token string, f func(t *testing.T, c *conn, url string)) {
	url := theServer(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f(t, connect(t, tr.make(t, url, token)), url)
		})
	}
}

func TestConfigWizardWithDynamicTools(t *testing.T) {
	eachTransport(t, agentToken, func(t *testing.T, c *conn, _ string) {
		sc := c.step("asmp_start_run", map[string]any{"workflow_id": "config-wizard-v1"})
		run := frame(sc)["run_id"].(string)
		if got := strs(sc["tools"]); !slices.Equal(got, []string{"exit", "start"}) {
			t.Fatalf("INITIAL offers %v", got)
		}
		if d := c.tools()["start"].Description; !strings.Contains(d, "Start wizard") {
			t.Fatalf("the description of start lacks its CLI label: %q", d)
		}
		sc = c.step("start", map[string]any{})
		if frame(sc)["state"] != "CONFIGURE" || !slices.Equal(strs(sc["tools"]), []string{"save"}) {
			t.Fatalf("after start: %v", sc)
		}
		schema, _ := json.Marshal(c.tools()["save"].InputSchema)
		if !strings.Contains(string(schema), `"value":{"type":"string"}`) || !strings.Contains(string(schema), `"required":["value"]`) {
			t.Fatalf("save's input schema: %s", schema)
		}
		// A type error and a refused action are isError results with hints.
		c.refused("save", map[string]any{"value": 42}, "value")
		c.refused("asmp_transition", map[string]any{"run_id": run, "action": "confirm"}, "CONFIGURE", "save")
		sc = c.step("save", map[string]any{"value": "dark"})
		if got := strs(sc["tools"]); !slices.Equal(got, []string{"cancel", "confirm"}) {
			t.Fatalf("CONFIRM offers %v", got)
		}
		sc = c.step("confirm", map[string]any{})
		if f := frame(sc); f["state"] != "DONE" || f["status"] != "completed" || len(sc["tools"].([]any)) != 0 {
			t.Fatalf("after confirm: %v", sc)
		}
		// The run's frame is a resource.
		rr, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "asmp://runs/" + run})
		if err != nil || !strings.Contains(rr.Contents[0].Text, `"DONE"`) {
			t.Fatalf("reading the run's resource: %v %v", err, rr)
		}
	})
}

func TestExpenseApprovalWithDynamicTools(t *testing.T) {
	eachTransport(t, agentToken, func(t *testing.T, c *conn, _ string) {
		sc := c.step("asmp_start_run", map[string]any{"workflow_id": "expense-approval-v1"})
		run := frame(sc)["run_id"].(string)
		if got := strs(sc["tools"]); !slices.Equal(got, []string{"submit", "tool_policy_check"}) {
			t.Fatalf("SUBMIT offers %v", got)
		}
		// The stage resource and the skill.
		uri := "asmp://runs/" + run + "/resources/policy"
		rr, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err != nil || !strings.Contains(rr.Contents[0].Text, "Expense policy") {
			t.Fatalf("reading %s: %v %v", uri, err, rr)
		}
		lr, err := c.cs.ListResources(context.Background(), nil)
		if err != nil || !slices.ContainsFunc(lr.Resources, func(r *mcp.Resource) bool { return r.URI == uri }) {
			t.Fatalf("the stage resource is not listed: %v", err)
		}
		pr, err := c.cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "expense-skill"})
		if err != nil || len(pr.Messages) == 0 || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "expense") {
			t.Fatalf("the skill as a prompt: %v %v", err, pr)
		}
		res := c.ok("tool_policy_check", map[string]any{"amount": 2500})
		if r := res["result"].(map[string]any); r["route"] != "escalate" {
			t.Fatalf("policy_check: %v", res)
		}
		c.refused("submit", map[string]any{"amount": "a lot", "description": "x"}, "amount")
		sc = c.step("submit", map[string]any{"amount": 2500, "description": "Conference ticket"})
		if got := strs(sc["tools"]); !slices.Equal(got, []string{"escalate", "escalate_to_manager", "reject"}) {
			t.Fatalf("REVIEW of 2500 offers %v (approve is guarded)", got)
		}
		if d := c.tools()["reject"].Description; !strings.Contains(d, "Critical") {
			t.Fatalf("reject is critical, its description does not say so: %q", d)
		}
		sc = c.step("escalate", map[string]any{})
		if frame(sc)["state"] != "FINANCE_REVIEW" {
			t.Fatalf("after escalate: %v", sc)
		}
		// approve enters PAYING, a processing state: the call reports
		// progress until the payment settles.
		c.drain()
		out := c.callMeta("approve", map[string]any{}, mcp.Meta{"progressToken": "pay-1"})
		if out.IsError {
			t.Fatalf("approve: %s", text(out))
		}
		sc = structured(t, out)
		checkView(t, sc)
		if f := frame(sc); f["state"] != "PAID" || f["status"] != "completed" || len(sc["tools"].([]any)) != 0 {
			t.Fatalf("after approve: %v", f)
		}
		c.waitChanged("approve")
		if got := c.dynamicTools(); len(got) != 0 {
			t.Fatalf("a completed run leaves tools %v", got)
		}
		select {
		case p := <-c.progress:
			if p.ProgressToken != "pay-1" || p.Total != 100 {
				t.Fatalf("progress notification %+v", p)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no progress notification while PAYING")
		}
	})
}

func TestScopesAndStaleTools(t *testing.T) {
	url := theServer(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			// A token without runs cannot start runs or transition.
			reader := connect(t, tr.make(t, url, readerToken))
			reader.refused("asmp_start_run", map[string]any{}, `"runs" scope`)
			run := httpDo(t, url, adminToken, "POST", "/runs", map[string]any{"workflow_id": "config-wizard-v1"})["run_id"].(string)
			sc := reader.step("asmp_get_run", map[string]any{"run_id": run})
			if !slices.Equal(strs(sc["tools"]), []string{"exit", "start"}) {
				t.Fatalf("get_run: %v", sc)
			}
			reader.refused("start", map[string]any{}, `"runs" scope`)
			// A row tool records an invocation: it needs dispatch.
			reader.refused("row_echo-v1", map[string]any{"words": []any{"hi"}}, `"dispatch" scope`)

			// A tool of a run another client moved is refused with the
			// hint, and the list follows the run.
			agent := connect(t, tr.make(t, url, agentToken))
			agent.step("asmp_get_run", map[string]any{"run_id": run})
			httpDo(t, url, adminToken, "POST", "/runs/"+run+"/transitions/start", map[string]any{})
			agent.drain()
			agent.refused("start", map[string]any{}, "CONFIGURE")
			agent.waitChanged("refused start")
			if got := agent.dynamicTools(); !slices.Equal(got, []string{"save"}) {
				t.Fatalf("after the refusal the session lists %v", got)
			}
		})
	}
}

func TestRowTools(t *testing.T) {
	eachTransport(t, agentToken, func(t *testing.T, c *conn, url string) {
		tool := c.tools()["row_my-cli-tool-v1"]
		if tool == nil {
			t.Fatal("the seed's row is not a tool")
		}
		schema, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Required   []string                  `json:"required"`
			Properties map[string]map[string]any `json:"properties"`
		}
		json.Unmarshal(schema, &s)
		if !slices.Equal(s.Required, []string{"input_file"}) || s.Properties["verbose"]["type"] != "boolean" ||
			s.Properties["output"]["default"] != "./output.txt" || !strings.Contains(fmt.Sprint(s.Properties["output"]["description"]), "-o") {
			t.Fatalf("the row's input schema: %s", schema)
		}
		sc := c.ok("row_my-cli-tool-v1", map[string]any{"input_file": "data.txt", "output": "result.txt", "verbose": true})
		if got := strings.Join(strs2(sc["argv"]), " "); got != "mytool data.txt -o result.txt -v" || sc["executed"] != false {
			t.Fatalf("row tool answer: %v", sc)
		}
		inv := sc["receipt"].(map[string]any)["inv_ID"].(string)
		rr, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "asmp://ledger/" + inv})
		if err != nil || !strings.Contains(rr.Contents[0].Text, `"verified": true`) {
			t.Fatalf("the invocation's ledger record: %v %v", err, rr)
		}
		// Input the row rejects.
		c.refused("row_my-cli-tool-v1", map[string]any{"verbose": true}, "input_file")
		// A lone surrogate escape is refused, not replaced by U+FFFD, in a
		// row tool's and a static tool's arguments.
		c.refused("row_my-cli-tool-v1", json.RawMessage(`{"input_file": "a\ud800b"}`), "surrogate", `\ud800`)
		c.refused("asmp_start_run", json.RawMessage(`{"workflow_id": "config-wizard-v1", "data": {"name": "\udc00"}}`), "surrogate")

		// A new row becomes a tool.
		key := "fresh-" + c.cs.ID() + fmt.Sprint(time.Now().UnixNano())
		c.drain()
		httpDo(t, url, adminToken, "POST", "/api/dispatch", map[string]any{"key": key, "body": map[string]any{"type": "directory_row", "command": "true"}})
		for {
			c.waitChanged("dispatching " + key)
			if c.tools()["row_"+key] != nil {
				break
			}
		}
	})
}

func strs2(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// Row tools execute as the token may, on both transports: a token holding
// exec on a server with --allow-exec runs the row (stdio asks GET /whoami,
// /mcp reads the session's principal); a dispatch-only token gets the
// built command, not a refusal, and no refused attempt is recorded;
// `asmp mcp --no-execute` only builds.
func TestRowToolExecutes(t *testing.T) {
	url := theServer(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := connect(t, tr.make(t, url, adminToken))
			sc := c.ok("row_echo-v1", map[string]any{"words": []any{"hello", "mcp"}})
			if sc["executed"] != true || sc["exit_code"] != 0.0 || sc["stdout"] != "hello mcp\n" {
				t.Fatalf("executed row: %v", sc)
			}
			// The agent token lacks exec: the command is built, not run.
			c = connect(t, tr.make(t, url, agentToken))
			before := treeSize(t, url)
			sc = c.ok("row_echo-v1", map[string]any{"words": []any{"hello"}})
			if sc["executed"] != false || strings.Join(strs2(sc["argv"]), " ") != "echo hello" || sc["outcome"] != nil {
				t.Fatalf("built row: %v", sc)
			}
			if after := treeSize(t, url); after != before+1 {
				t.Fatalf("the call appended %d ledger records, want 1 (the built invocation, no refused attempt before it)", after-before)
			}
			if tr.name == "stdio" {
				c = connect(t, tr.make(t, url, adminToken, "--no-execute"))
				sc = c.ok("row_echo-v1", map[string]any{"words": []any{"hello"}})
				if sc["executed"] != false || strings.Join(strs2(sc["argv"]), " ") != "echo hello" || sc["outcome"] != nil {
					t.Fatalf("--no-execute: %v", sc)
				}
			}
		})
	}
}

// treeSize reads the ledger's size from its signed checkpoint.
func treeSize(t testing.TB, url string) int64 {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/api/ledger/checkpoint", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ck struct {
		TreeSize int64 `json:"tree_size"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ck); err != nil || resp.StatusCode != 200 || ck.TreeSize == 0 {
		t.Fatalf("checkpoint: %d %v %+v", resp.StatusCode, err, ck)
	}
	return ck.TreeSize
}

// A session belongs to the principal that created it: another token
// cannot use its id.
func TestSessionBelongsToItsPrincipal(t *testing.T) {
	url := theServer(t)
	c := connect(t, transports[1].make(t, url, agentToken))
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`
	send := func(token string) (int, http.Header, []byte) {
		return postMCP(t, url, body, "Authorization", "Bearer "+token, "Mcp-Session-Id", c.cs.ID(),
			"Mcp-Protocol-Version", c.cs.InitializeResult().ProtocolVersion)
	}
	status, hdr, b := send(readerToken)
	if status != http.StatusForbidden {
		t.Fatalf("another principal's request on the session: %d, want 403", status)
	}
	if h := jsonHint(t, hdr, b); !strings.Contains(h, "Mcp-Session-Id") {
		t.Fatalf("the 403 hint does not say what to do: %q", h)
	}
	if status, _, _ := send(agentToken); status != http.StatusOK {
		t.Fatalf("the owner's request on the session: %d, want 200", status)
	}
}

// postMCP POSTs one MCP message to /mcp with the headers given (name,
// value, ...) and answers the status, headers and body.
func postMCP(t *testing.T, url, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// jsonHint checks that an error answer is the project's JSON error body
// and returns its hint.
func jsonHint(t *testing.T, hdr http.Header, body []byte) string {
	t.Helper()
	var m map[string]any
	if hdr.Get("Content-Type") != "application/json" || json.Unmarshal(body, &m) != nil || m["error"] == nil {
		t.Fatalf("not a JSON error body (%s): %s", hdr.Get("Content-Type"), body)
	}
	h, _ := m["hint"].(string)
	if h == "" {
		t.Fatalf("an error without a hint: %s", body)
	}
	return h
}

// A web page cannot reach /mcp: a POST with a foreign Origin is refused
// at the edge with a JSON 403 whose hint names --allow-origin, before any
// session is made.
func TestMCPRefusesForeignOrigins(t *testing.T) {
	url := theServer(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`
	for _, hd := range [][]string{{"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "cross-site"}} {
		status, hdr, b := postMCP(t, url, initialize, append([]string{"Authorization", "Bearer " + agentToken}, hd...)...)
		if status != http.StatusForbidden || hdr.Get("Mcp-Session-Id") != "" {
			t.Fatalf("%v: %d (session %q), want 403", hd, status, hdr.Get("Mcp-Session-Id"))
		}
		if h := jsonHint(t, hdr, b); !strings.Contains(h, "--allow-origin") {
			t.Fatalf("%v: the hint does not name --allow-origin: %q", hd, h)
		}
	}
	// The same request without a foreign origin starts a session.
	status, hdr, b := postMCP(t, url, initialize, "Authorization", "Bearer "+agentToken)
	if status != http.StatusOK || hdr.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", status, b)
	}
	// GET (the notification stream) is refused to a foreign origin too
	// (MCP 2025-11-25: 403), before it reaches the session.
	get := func(headers ...string) (int, http.Header, []byte) {
		req, _ := http.NewRequest("GET", url+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+agentToken)
		req.Header.Set("Mcp-Session-Id", hdr.Get("Mcp-Session-Id"))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			return resp.StatusCode, resp.Header, nil // a stream: not read
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	for _, hd := range [][]string{{"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "cross-site"}} {
		status, h, b := get(hd...)
		if status != http.StatusForbidden {
			t.Fatalf("GET /mcp %v: %d, want 403", hd, status)
		}
		if hint := jsonHint(t, h, b); !strings.Contains(hint, "--allow-origin") {
			t.Fatalf("GET /mcp %v: the hint does not name --allow-origin: %q", hd, hint)
		}
	}
	if status, _, _ := get("Origin", url); status == http.StatusForbidden {
		t.Fatalf("GET /mcp from the server's own origin: %d", status)
	}
}

// A tool that is not offered now (an action of another state, a name
// never offered) is an isError result with the hint of what is offered,
// like every refusal, not a JSON-RPC error without one.
func TestToolNotOfferedNowIsARefusalWithHint(t *testing.T) {
	eachTransport(t, agentToken, func(t *testing.T, c *conn, _ string) {
		c.refused("confirm", map[string]any{}, "confirm", "no run is current", "asmp_start_run")
		c.step("asmp_start_run", map[string]any{"workflow_id": "config-wizard-v1"})
		c.refused("confirm", map[string]any{}, `No tool "confirm" in state INITIAL`, "exit, start")
		c.refused("no_such_tool", nil, "no_such_tool", "exit, start")
		c.step("start", map[string]any{})
	})
}

// Arguments outside a static tool's schema are refused with a hint.
func TestStaticToolArguments(t *testing.T) {
	eachTransport(t, agentToken, func(t *testing.T, c *conn, _ string) {
		c.refused("asmp_get_run", map[string]any{"run": "x"}, `unknown field "run"`)
		c.refused("asmp_get_run", map[string]any{"run_id": "no-such-run"}, "not found")
		wf := c.ok("asmp_list_workflows", map[string]any{})
		if len(wf["workflows"].([]any)) < 2 {
			t.Fatalf("workflows: %v", wf)
		}
	})
}

// A server without --allow-exec: row tools build the command for every
// caller, and nothing is refused.
func TestRowToolsWithoutExecution(t *testing.T) {
	url := serveOnce(t, "--mcp-poll", "100ms")
	httpDo(t, url, adminToken, "POST", "/api/dispatch", json.RawMessage(echoRow))
	c := connect(t, transports[1].make(t, url, adminToken))
	for c.tools()["row_echo-v1"] == nil {
		c.waitChanged("the echo row")
	}
	sc := c.ok("row_echo-v1", map[string]any{"words": []any{"hi"}})
	if sc["executed"] != false || strings.Join(strs2(sc["argv"]), " ") != "echo hi" {
		t.Fatalf("row tool on a server without execution: %v", sc)
	}
}

// --rows (asmp mcp) and --mcp-rows (asmp serve, for /mcp) keep only the
// rows whose key matches.
func TestRowsGlob(t *testing.T) {
	check := func(t *testing.T, c *conn, flag string) {
		t.Helper()
		tools := c.tools()
		if tools["row_echo-v1"] == nil || tools["row_my-cli-tool-v1"] != nil {
			t.Fatalf("with %s echo-*: %v", flag, slices.Sorted(maps.Keys(tools)))
		}
	}
	check(t, connect(t, transports[0].make(t, theServer(t), agentToken, "--rows", "echo-*")), "--rows")

	url := serveOnce(t, "--mcp-poll", "100ms", "--mcp-rows", "echo-*")
	httpDo(t, url, adminToken, "POST", "/api/dispatch", json.RawMessage(seedRow))
	httpDo(t, url, adminToken, "POST", "/api/dispatch", json.RawMessage(echoRow))
	c := connect(t, transports[1].make(t, url, agentToken))
	for c.tools()["row_echo-v1"] == nil {
		c.waitChanged("the echo row")
	}
	check(t, c, "--mcp-rows")
}

// A workflow's bounds on a field reach the host in the tool's input
// schema, read from the run's workflow version.
func TestDynamicToolsCarryConstraints(t *testing.T) {
	eachTransport(t, agentToken, func(t *testing.T, c *conn, _ string) {
		c.step("asmp_start_run", map[string]any{"workflow_id": "number-facts-v1"})
		schema, _ := json.Marshal(c.tools()["submit"].InputSchema)
		want := fmt.Sprintf(`"a":{"maximum":%d,"minimum":1,"type":"integer"}`, examples.NumberMax)
		if !strings.Contains(string(schema), want) {
			t.Fatalf("submit's input schema: %s\nwant it to hold %s", schema, want)
		}
		c.refused("submit", map[string]any{"a": 0, "b": 2}, "a")
	})
}

// A malformed row glob would keep no row: both commands refuse it at
// start, naming the flag.
func TestMalformedRowGlobIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"mcp", "--server", "http://127.0.0.1:1", "--rows", "echo-["},
		{"serve", "--db", ":memory:", "--addr", "127.0.0.1:0", "--mcp-rows", "echo-["},
	} {
		cmd := exec.Command(binary, args...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		flag := args[len(args)-2]
		if err == nil || !strings.Contains(string(out), flag+`: the row glob "echo-[" is malformed`) {
			t.Fatalf("asmp %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// /mcp drives the engine in-process: a session's run tools make no HTTP
// request of their own (none reaches the edge's routes, so none is
// authenticated, limited or logged again), and the runs they move record
// the MCP request's principal as their actor.
func TestHTTPSessionsDriveTheEngineInProcess(t *testing.T) {
	url := theServer(t)
	routeCount := func() map[string]string {
		req, _ := http.NewRequest("GET", url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "asmp_http_requests_total{") {
				k, v, _ := strings.Cut(line, "} ")
				out[k] = v
			}
		}
		return out
	}
	before := routeCount()
	c := connect(t, transports[1].make(t, url, agentToken)) // http
	sc := c.step("asmp_start_run", map[string]any{"workflow_id": "config-wizard-v1"})
	run := frame(sc)["run_id"].(string)
	c.step("start", map[string]any{})
	c.step("save", map[string]any{"value": "dark"})
	c.ok("asmp_get_run", map[string]any{"run_id": run})
	// The ledger tools call the ledger as the session's principal, in-process too.
	rc := structured(t, c.call("row_echo-v1", map[string]any{"words": []any{"hi"}}))
	if r, _ := rc["receipt"].(map[string]any); r == nil || r["inv_ID"] == nil {
		t.Fatalf("row tool: %v", rc)
	}
	c.refused("asmp_receipt", map[string]any{"inv_ID": "no-such-inv"}, "")
	after := routeCount()
	for k, v := range after {
		if strings.HasSuffix(k, ` /mcp"`) || strings.Contains(k, `route="GET /metrics"`) {
			continue
		}
		if before[k] != v {
			t.Errorf("an MCP session made HTTP requests of the API: %s went from %q to %s", k, before[k], v)
		}
	}
	evs := httpDo(t, url, adminToken, "GET", "/runs/"+run+"/events", nil)["events"].([]any)
	for _, ev := range evs {
		if a := ev.(map[string]any)["actor"]; a != "agent" {
			t.Fatalf("an event of the MCP session's run has actor %v, want agent: %v", a, ev)
		}
	}
}
