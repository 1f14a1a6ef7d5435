// Package mcpbridge serves ASMP workflows and OIP directory rows to Model
// Context Protocol hosts (SPEC section 15). One implementation backs both
// transports: `asmp mcp` (stdio, talking to an asmp server over HTTP
// through client.Client) and `/mcp` of `asmp serve` (MCP's streamable
// HTTP transport). A /mcp session drives runs through the engine
// in-process, with the same backend as the SDK's in-process client
// (client/embedded): the MCP request was authenticated and limited once
// at the edge, its principal is carried in, and each write is checked
// against its scope with the edge's own check; its ledger tools (row
// tools, dispatch, receipts) call the ledger's own handler as that
// principal, whose routes check their scopes. Either way the engine's and
// the ledger's refusals apply unchanged.
//
// A session has static tools (asmp_list_workflows, asmp_start_run,
// asmp_get_run, asmp_transition, asmp_invoke, asmp_dispatch,
// asmp_receipt), one tool per current directory row (row_<key>), and,
// once asmp_start_run or asmp_get_run has named a run, that run's offered
// actions and stage tools (client.ToolsWithCLI) as dynamic tools that
// follow the run's state: after every transition the list is rebuilt and
// the SDK sends notifications/tools/list_changed. Refusals of the server
// (400, 403, 404, 409) are tool results with isError and the hint, never
// protocol errors.
//
// Sessions keep a current run, so the bridge speaks the session-based MCP
// protocol versions (up to 2025-11-25); a client asking for a newer one
// is answered with the newest of those.
package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/oip/wire"
	"github.com/asmp-dev/asmp/protocol"
)

// Defaults for Options fields left zero.
const (
	// DefaultPoll is how often the directory is read for changed rows.
	DefaultPoll = 3 * time.Second
	// DefaultSettle bounds how long an action that enters a processing
	// state waits for the run to settle before it answers.
	DefaultSettle = 5 * time.Minute
)

// Static tool names.
const (
	ToolListWorkflows = "asmp_list_workflows"
	ToolStartRun      = "asmp_start_run"
	ToolGetRun        = "asmp_get_run"
	ToolTransition    = "asmp_transition"
	ToolInvoke        = "asmp_invoke"
	ToolDispatch      = "asmp_dispatch"
	ToolReceipt       = "asmp_receipt"
	// RowToolPrefix starts the tool name of a directory row.
	RowToolPrefix = "row_"
)

// Options configure a bridge. A nil *Options means all defaults.
type Options struct {
	// Rows is a glob (path.Match) over row keys: only matching rows of
	// type cli become tools. "" means every row.
	Rows string
	// Execute reports whether a row tool call of ctx asks to run its
	// command (execute: true); otherwise the invocation records the built
	// command only. nil means: as the caller may. Serve asks GET /whoami
	// (the server executes and the token holds exec; asked again after an
	// executing call was refused), NewHandler reads the session's
	// principal. The server still refuses execution to a token without the
	// exec scope, or when it runs without --allow-exec.
	Execute func(ctx context.Context) bool
	// Logger receives collisions and failures of background refreshes;
	// nil discards.
	Logger *slog.Logger
	// Settle bounds the wait of an action that enters a processing state
	// (0 = DefaultSettle).
	Settle time.Duration
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if out.Settle <= 0 {
		out.Settle = DefaultSettle
	}
	return out
}

// protocolVersions are the MCP versions a session speaks: those with
// sessions (the 2026 protocol has none to keep a current run in).
var protocolVersions = slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= "2026" })

// implementation names the bridge to MCP clients.
var implementation = &mcp.Implementation{Name: "asmp", Title: "ASMP workflows and OIP directory rows", Version: "1"}

const instructions = `This server drives ASMP workflows: finite state machines whose every answer (a State Frame) names the only valid next actions.
Start a run with asmp_start_run (or pick one up with asmp_get_run): the run's offered actions then appear as tools named by the action, and its stage tools as tool_<name>; the list changes with the run's state (notifications/tools/list_changed).
A refused call answers isError with the server's hint: read it and choose again. Directory rows are tools too (row_<key>): a call records an invocation in the OIP ledger and answers the exact argv.`

// runBackend is what a session's run tools drive: client.Backend, and
// the bounds and skills its frames name. `asmp mcp` drives a server over
// HTTP (*client.Client); /mcp drives the engine in-process through the
// SDK's in-process backend (engineRuns).
type runBackend interface {
	client.Backend
	Constraints(ctx context.Context, frame protocol.Frame) (client.Constraints, error)
	Skill(ctx context.Context, rawURL string) (*client.Content, error)
}

// session is one MCP session: its server, what it drives runs through
// and the asmp client of the ledger, its current run and the tools it
// registered for it.
type session struct {
	runs runBackend     // runs, frames, transitions, stage tools
	c    *client.Client // the OIP ledger: dispatch, invocations, receipts, the directory
	opts Options
	srv  *mcp.Server
	log  *slog.Logger
	rows *watcher // nil: no row tools
	// gate, when set, decides execution when opts.Execute is nil.
	gate *execGate

	// syncMu serialises rebuilding the tool, resource and prompt lists.
	syncMu  sync.Mutex
	mu      sync.Mutex // guards the fields below
	runID   string
	frame   *protocol.Frame
	dyn     []string          // dynamic tool names registered
	dynFP   map[string]string // registered dynamic tool -> its definition as JSON
	runRes  string            // the current run's resource as registered, as JSON
	res     []string          // resource URIs registered for the current run
	prompt  []string          // prompt names registered
	rowSet  map[string]wire.DirectoryRow
	rowFP   string
	stopW   func() // ends the directory subscription
	onClose []func()
	closed  bool
}

// newSession builds the MCP server of one session driving runs through
// runs and the ledger through c. rows, when not nil, is the directory the
// session's row tools follow.
func newSession(runs runBackend, c *client.Client, opts Options, rows *watcher) *session {
	s := &session{runs: runs, c: c, opts: opts, log: opts.Logger, rows: rows, rowSet: map[string]wire.DirectoryRow{}}
	s.srv = mcp.NewServer(implementation, &mcp.ServerOptions{
		Instructions:              instructions,
		InitializedHandler:        s.initialized,
		SupportedProtocolVersions: protocolVersions,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
		},
	})
	s.srv.AddReceivingMiddleware(s.unknownTools)
	s.addStatic()
	s.addTemplates()
	if rows != nil {
		s.syncRows(rows.current())
	}
	return s
}

// initialized starts following the directory once the client has
// initialized the session (close ends it).
func (s *session) initialized(_ context.Context, req *mcp.InitializedRequest) {
	s.mu.Lock()
	if s.rows != nil && s.stopW == nil && !s.closed {
		s.stopW = s.rows.subscribe(s.syncRows)
		// Rows that changed between the session's start and now.
		go s.syncRows(s.rows.current())
	}
	s.mu.Unlock()
}

// addOnClose makes close call f too.
func (s *session) addOnClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onClose = append(s.onClose, f)
}

// close ends the session's subscriptions.
func (s *session) close() {
	s.mu.Lock()
	stop, onClose := s.stopW, s.onClose
	s.stopW, s.onClose, s.closed = nil, nil, true
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	for _, f := range onClose {
		f()
	}
}

// handler adapts a tool function: errors the server answered become
// isError results with the hint; other errors (the server unreachable)
// too, so a host always gets a readable answer.
func (s *session) handler(f func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (any, string, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = withCaller(ctx, req.Extra)
		out, summary, err := f(ctx, req, req.Params.Arguments)
		if err != nil {
			return errorResult(err), nil
		}
		return okResult(out, summary), nil
	}
}

// okResult is a result with structured content and its JSON as text
// (after a one-line summary, when there is one).
func okResult(out any, summary string) *mcp.CallToolResult {
	b, err := json.Marshal(out)
	if err != nil {
		return errorResult(fmt.Errorf("encoding the answer: %w", err))
	}
	var content []mcp.Content
	if summary != "" {
		content = append(content, &mcp.TextContent{Text: summary})
	}
	content = append(content, &mcp.TextContent{Text: string(b)})
	return &mcp.CallToolResult{Content: content, StructuredContent: json.RawMessage(b)}
}

// errorResult is an isError result: the hint as text, and the server's
// status, code, hint and other fields as structured content.
func errorResult(err error) *mcp.CallToolResult {
	hint := client.HintOf(err)
	sc := map[string]any{"hint": hint}
	var ae *client.Error
	if errors.As(err, &ae) {
		sc["status"] = ae.Status
		sc["error"] = ae.Code
		for k, v := range ae.Fields {
			if _, ok := sc[k]; !ok {
				sc[k] = v
			}
		}
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: hint}}, StructuredContent: sc}
}

// refusal is a tool-level refusal the bridge itself answers (bad
// arguments), with a hint, as the server would.
func refusal(status int, format string, args ...any) error {
	return &client.Error{Status: status, Code: protocol.CodeOf(status), Hint: fmt.Sprintf(format, args...)}
}

// decodeArgs decodes a tool call's arguments (a JSON object, or empty)
// into v, refusing unknown fields with a hint.
func decodeArgs(tool string, raw json.RawMessage, v any) error {
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return refusal(400, "The arguments of %s do not fit its input schema: %v.", tool, err)
	}
	if err := protocol.CheckSurrogates(raw); err != nil {
		return refusal(400, "The arguments of %s: %s", tool, protocol.ErrorHint(err))
	}
	return nil
}

// runView is what the run tools answer: the frame, the CLI object when
// read, and the dynamic tools the session now offers for it.
type runView struct {
	Frame *protocol.Frame `json:"frame"`
	CLI   *protocol.CLI   `json:"cli,omitempty"`
	Tools []string        `json:"tools"`
}

func objectSchema(props map[string]any, required ...string) map[string]any {
	m := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		m["required"] = required
	}
	return m
}

var (
	str       = map[string]any{"type": "string"}
	anyObject = map[string]any{"type": "object"}
	runOutput = map[string]any{"type": "object", "properties": map[string]any{
		"frame": anyObject, "cli": anyObject, "tools": map[string]any{"type": "array", "items": str},
	}}
)

func (s *session) addStatic() {
	s.srv.AddTool(&mcp.Tool{
		Name: ToolListWorkflows, Description: "List the workflows this ASMP server serves (id, description, initial state, states).",
		InputSchema:  objectSchema(map[string]any{}),
		OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"workflows": map[string]any{"type": "array", "items": anyObject}}},
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.handler(func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (any, string, error) {
		if err := decodeArgs(ToolListWorkflows, args, &struct{}{}); err != nil {
			return nil, "", err
		}
		wfs, err := s.runs.Workflows(ctx)
		if err != nil {
			return nil, "", err
		}
		ids := make([]string, len(wfs))
		for i, w := range wfs {
			ids[i] = w.WorkflowID
		}
		return map[string]any{"workflows": wfs}, "Workflows: " + strings.Join(ids, ", ") + ".", nil
	}))
	s.srv.AddTool(&mcp.Tool{
		Name:        ToolStartRun,
		Description: "Start a run of a workflow (default: the server's default workflow) and make it this session's current run: its offered actions become tools.",
		InputSchema: objectSchema(map[string]any{
			"workflow_id": map[string]any{"type": "string", "description": "The workflow to run (asmp_list_workflows); omit for the default."},
			"data":        map[string]any{"type": "object", "description": "Initial run data."},
		}),
		OutputSchema: runOutput,
	}, s.handler(func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (any, string, error) {
		var a struct {
			WorkflowID string         `json:"workflow_id"`
			Data       map[string]any `json:"data"`
		}
		if err := decodeArgs(ToolStartRun, args, &a); err != nil {
			return nil, "", err
		}
		f, err := s.runs.StartRun(ctx, a.WorkflowID, normalize(a.Data))
		if err != nil {
			return nil, "", err
		}
		return s.adopt(ctx, &f.Frame)
	}))
	s.srv.AddTool(&mcp.Tool{
		Name:         ToolGetRun,
		Description:  "Read a run's current frame and CLI object, and make it this session's current run: its offered actions become tools.",
		InputSchema:  objectSchema(map[string]any{"run_id": str}, "run_id"),
		OutputSchema: runOutput,
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.handler(func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (any, string, error) {
		var a struct {
			RunID string `json:"run_id"`
		}
		if err := decodeArgs(ToolGetRun, args, &a); err != nil {
			return nil, "", err
		}
		f, err := s.runs.Frame(ctx, a.RunID)
		if err != nil {
			return nil, "", err
		}
		return s.adopt(ctx, &f.Frame)
	}))
	s.srv.AddTool(&mcp.Tool{
		Name:        ToolTransition,
		Description: "Fire an action the run's frame offers, with the fields it expects in data. For the current run the action tools do the same.",
		InputSchema: objectSchema(map[string]any{
			"run_id": str, "action": str,
			"data": map[string]any{"type": "object", "description": "The fields the action expects."},
		}, "run_id", "action"),
		OutputSchema: runOutput,
	}, s.handler(func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (any, string, error) {
		var a struct {
			RunID  string         `json:"run_id"`
			Action string         `json:"action"`
			Data   map[string]any `json:"data"`
		}
		if err := decodeArgs(ToolTransition, args, &a); err != nil {
			return nil, "", err
		}
		f, err := s.runs.Transition(ctx, a.RunID, a.Action, normalize(a.Data), nil)
		if err != nil {
			s.refreshIfCurrent(ctx, a.RunID)
			return nil, "", err
		}
		return s.moved(ctx, req, &f.Frame)
	}))
	s.srv.AddTool(&mcp.Tool{
		Name:        ToolInvoke,
		Description: "Call a stage tool bound to the run's current state; the run stays where it is.",
		InputSchema: objectSchema(map[string]any{
			"run_id": str, "tool": str, "input": map[string]any{"type": "object"},
		}, "run_id", "tool"),
		OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"result": map[string]any{}}},
	}, s.handler(func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (any, string, error) {
		var a struct {
			RunID string         `json:"run_id"`
			Tool  string         `json:"tool"`
			Input map[string]any `json:"input"`
		}
		if err := decodeArgs(ToolInvoke, args, &a); err != nil {
			return nil, "", err
		}
		res, err := s.runs.InvokeTool(ctx, a.RunID, a.Tool, normalize(a.Input))
		if err != nil {
			return nil, "", err
		}
		return map[string]any{"result": res}, "", nil
	}))
	s.srv.AddTool(&mcp.Tool{
		Name:        ToolDispatch,
		Description: `Append an object to the OIP ledger under key: a directory row ({"type":"directory_row","command":...}) or an invocation ({"type":"invocation","object_key":ROW,"input":{...}}). Answers the receipt.`,
		InputSchema: objectSchema(map[string]any{
			"key": str, "body": map[string]any{"type": "object", "description": `The object; its "type" is directory_row or invocation.`},
		}, "key", "body"),
		OutputSchema: anyObject,
	}, s.handler(func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (any, string, error) {
		var a struct {
			Key  string          `json:"key"`
			Body json.RawMessage `json:"body"`
		}
		if err := decodeArgs(ToolDispatch, args, &a); err != nil {
			return nil, "", err
		}
		rc, err := s.c.Dispatch(ctx, a.Key, a.Body)
		if err != nil {
			return nil, "", err
		}
		if s.rows != nil {
			s.rows.poke()
		}
		return rc, fmt.Sprintf("Dispatched %s as %s (seq %d).", rc.ObjectKey, rc.InvID, rc.Seq), nil
	}))
	s.srv.AddTool(&mcp.Tool{
		Name:         ToolReceipt,
		Description:  "Read a ledger record by the inv_ID of its receipt.",
		InputSchema:  objectSchema(map[string]any{"inv_ID": str}, "inv_ID"),
		OutputSchema: anyObject,
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.handler(func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (any, string, error) {
		var a struct {
			InvID string `json:"inv_ID"`
		}
		if err := decodeArgs(ToolReceipt, args, &a); err != nil {
			return nil, "", err
		}
		rec, err := s.c.Receipt(ctx, a.InvID)
		if err != nil {
			return nil, "", err
		}
		return rec, "", nil
	}))
}

var staticTools = []string{ToolListWorkflows, ToolStartRun, ToolGetRun, ToolTransition, ToolInvoke, ToolDispatch, ToolReceipt}

// normalize turns the json.Numbers of decoded arguments into int64 or
// float64, as the server's decoder does.
func normalize(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	v, err := protocol.NormalizeNumbers(m)
	if err != nil {
		return m
	}
	out, _ := v.(map[string]any)
	return out
}

// adopt makes f's run the session's current run and answers its view.
func (s *session) adopt(ctx context.Context, f *protocol.Frame) (any, string, error) {
	s.mu.Lock()
	s.runID = f.RunID
	s.mu.Unlock()
	return s.show(ctx, f, true)
}

// moved answers a frame a transition produced: it waits for a processing
// run to settle (reporting progress), and when the run is the current one
// the dynamic tools follow it.
func (s *session) moved(ctx context.Context, req *mcp.CallToolRequest, f *protocol.Frame) (any, string, error) {
	if f.Status == protocol.StatusProcessing {
		f = s.settle(ctx, req, f)
	}
	return s.show(ctx, f, false)
}

// show syncs the session's lists to f when it is the current run's frame,
// and answers the run's view.
func (s *session) show(ctx context.Context, f *protocol.Frame, withCLI bool) (any, string, error) {
	var cli protocol.CLI
	var cliErr error
	if !protocol.Terminal(f.Status) || withCLI {
		cli, cliErr = s.runs.CLI(ctx, f.RunID)
	}
	view := runView{Frame: f}
	if withCLI && cliErr == nil {
		view.CLI = &cli
	}
	s.mu.Lock()
	current := s.runID == f.RunID
	s.mu.Unlock()
	if current {
		view.Tools = s.syncRun(ctx, f, cli)
	}
	if view.Tools == nil {
		view.Tools = []string{}
	}
	return view, summarize(f, view.Tools, current), nil
}

// summarize is the one-line text of a run view.
func summarize(f *protocol.Frame, tools []string, current bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s of %s is in %s (%s)", f.RunID, f.WorkflowID, f.State, f.Status)
	if h := strings.TrimSpace(f.Hint); h != "" {
		b.WriteString(": " + h)
	}
	if !strings.HasSuffix(b.String(), ".") {
		b.WriteString(".")
	}
	if current {
		if len(tools) == 0 {
			b.WriteString(" No action tools now.")
		} else {
			b.WriteString(" Tools now: " + strings.Join(tools, ", ") + ".")
		}
	}
	return b.String()
}

// refreshIfCurrent re-reads the current run after a refusal, so that the
// tools follow a run another client moved.
func (s *session) refreshIfCurrent(ctx context.Context, runID string) {
	s.mu.Lock()
	current := s.runID != "" && s.runID == runID
	s.mu.Unlock()
	if !current {
		return
	}
	if f, err := s.runs.Frame(ctx, runID); err == nil {
		cli, _ := s.runs.CLI(ctx, runID)
		s.syncRun(ctx, &f.Frame, cli)
	}
}

// settle follows the run's stream until it leaves processing, sending a
// progress notification per progress line when the caller asked for
// progress (a progress token). It returns the settled frame, or the last
// one seen when the wait ends first.
func (s *session) settle(ctx context.Context, req *mcp.CallToolRequest, f *protocol.Frame) *protocol.Frame {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Settle)
	defer cancel()
	token := req.Params.GetProgressToken()
	last := f
	var done float64
	for item, err := range s.runs.Stream(ctx, f.RunID, nil) {
		if err != nil {
			break
		}
		if p := item.Progress; p != nil && token != nil {
			if v, ok := percent(p.Progress); ok && v > done {
				done = v
			}
			msg := strings.TrimSpace(p.Progress + " " + p.Hint)
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: done, Total: 100, Message: msg})
		}
		if item.Frame != nil {
			fr := item.Frame.Frame
			last = &fr
			if fr.Status != protocol.StatusProcessing {
				break
			}
		}
	}
	if last.Status == protocol.StatusProcessing {
		// The stream ended first: the current frame is the truth.
		if rf, err := s.runs.Frame(context.WithoutCancel(ctx), f.RunID); err == nil {
			last = &rf.Frame
		}
	}
	return last
}

// percent reads a progress string such as "45%" or "45".
func percent(s string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return min(v, 100), true
}

// syncRun rebuilds the session's dynamic tools, run resources and skill
// prompts for f (the current run's frame) and returns the dynamic tool
// names. A terminal frame leaves no dynamic tools. The SDK sends
// list_changed for every list that changed.
func (s *session) syncRun(ctx context.Context, f *protocol.Frame, cli protocol.CLI) []string {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.runID != f.RunID {
		s.mu.Unlock()
		return nil
	}
	s.frame = f
	old := s.dyn
	reserved := map[string]bool{}
	for _, n := range staticTools {
		reserved[n] = true
	}
	for n := range s.rowSet {
		reserved[n] = true
	}
	s.mu.Unlock()

	var defs []client.ToolDef
	if !protocol.Terminal(f.Status) {
		cons, err := s.runs.Constraints(ctx, *f)
		if err != nil {
			s.log.Warn("the run's workflow version could not be read: its tools' schemas lack the fields' bounds", "run", f.RunID, "err", err)
		}
		defs, err = client.ToolsWithConstraints(*f, cli, cons)
		if err != nil {
			s.log.Warn("tool names collide; the first keeps the name", "run", f.RunID, "err", err)
		}
	}
	var names []string
	var tools []*mcp.Tool
	for _, d := range defs {
		if reserved[d.Name] {
			s.log.Warn("a workflow tool is left out: its name is a bridge tool's", "run", f.RunID, "tool", d.Name, "target", d.Target)
			continue
		}
		t := &mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: d.Parameters, OutputSchema: runOutput}
		if d.Kind == client.ToolStage {
			t.OutputSchema = map[string]any{"type": "object", "properties": map[string]any{"result": map[string]any{}}}
		}
		if d.IsCritical {
			t.Annotations = &mcp.ToolAnnotations{DestructiveHint: ptr(true)}
		}
		names = append(names, d.Name)
		tools = append(tools, t)
	}
	var gone []string
	for _, n := range old {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	s.mu.Lock()
	fps := s.dynFP
	s.mu.Unlock()
	next := make(map[string]string, len(tools))
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	for _, t := range tools {
		// A tool registered as it is now is left alone: adding it again
		// would tell the client the list changed when it did not.
		b, _ := json.Marshal(t)
		next[t.Name] = string(b)
		if fps[t.Name] == string(b) {
			continue
		}
		s.srv.AddTool(t, s.dynamicHandler(t.Name))
	}
	s.mu.Lock()
	s.dyn, s.dynFP = names, next
	s.mu.Unlock()
	s.syncRunResources(ctx, f)
	return names
}

func ptr[T any](v T) *T { return &v }

// dynamicHandler calls the current run's tool name: it fires the action
// or calls the stage tool it stands for (client.Call).
func (s *session) dynamicHandler(name string) mcp.ToolHandler {
	return s.handler(func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (any, string, error) {
		s.mu.Lock()
		f := s.frame
		s.mu.Unlock()
		if f == nil {
			return nil, "", refusal(404, "No current run: start one with %s or pick one with %s.", ToolStartRun, ToolGetRun)
		}
		res, err := client.CallOn(ctx, s.runs, *f, name, args)
		if err != nil {
			s.refreshIfCurrent(ctx, f.RunID)
			return nil, "", err
		}
		if res.Frame == nil {
			return map[string]any{"result": res.Result}, "", nil
		}
		return s.moved(ctx, req, &res.Frame.Frame)
	})
}

// unknownTools answers a tools/call of a name the session does not offer
// now (an action of an earlier state, a tool of another run, a typo) as
// the dynamic tools answer a refusal: an isError result with the hint
// (what is offered now), not the SDK's JSON-RPC error without one. A host
// that called a tool it listed a moment ago reads why it is gone.
func (s *session) unknownTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil || s.offers(call.Params.Name) {
			return next(ctx, method, req)
		}
		s.mu.Lock()
		current := s.frame != nil
		s.mu.Unlock()
		if !current {
			return errorResult(refusal(404, "No tool %q here: no run is current, so no action tools are offered. Start one with %s or pick one with %s; the other tools are in tools/list.",
				call.Params.Name, ToolStartRun, ToolGetRun)), nil
		}
		// The current run's frame decides: what it offers is called, any
		// other name is refused with the tools it offers now (client.Call).
		return s.dynamicHandler(call.Params.Name)(ctx, call)
	}
}

// offers reports whether name is one of the session's tools now.
func (s *session) offers(name string) bool {
	if slices.Contains(staticTools, name) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, row := s.rowSet[name]
	return row || slices.Contains(s.dyn, name)
}

// CheckRows refuses a row glob (Options.Rows) that path.Match cannot
// read: it would keep no row.
func CheckRows(glob string) error {
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Errorf("the row glob %q is malformed (%w); write it as path.Match reads it: * any characters, ? one, [a-z] a class, e.g. 'number-facts.*'", glob, err)
	}
	return nil
}

// matchRow reports whether a row key passes the --rows glob.
func matchRow(glob, key string) bool {
	if glob == "" {
		return true
	}
	ok, err := path.Match(glob, key)
	return err == nil && ok
}
