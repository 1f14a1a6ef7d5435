package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/oip/wire"
	"github.com/asmp-dev/asmp/protocol"
)

// watcher follows the directory: it reads every current row (following
// the pages), and when the set of rows or their versions changed it
// tells its subscribers. It reads on a timer, and at once when poked (the
// bridge itself dispatched something).
type watcher struct {
	list  func(ctx context.Context) ([]wire.DirectoryRow, error)
	size  func(ctx context.Context) (int64, error) // the ledger's size: no change, no read
	every time.Duration
	log   *slog.Logger

	mu     sync.Mutex
	rows   []wire.DirectoryRow
	fp     string
	loaded bool
	seen   int64 // the ledger size of the last read
	subs   map[int]func([]wire.DirectoryRow)
	next   int
	kick   chan struct{}
	once   sync.Once
}

// newWatcher returns a watcher of the directory of c: every poll it
// reads the ledger's size (its checkpoint), and the rows only when the
// ledger grew.
func newWatcher(c *client.Client, every time.Duration, log *slog.Logger) *watcher {
	if every <= 0 {
		every = DefaultPoll
	}
	return &watcher{list: clientRows(c), size: clientSize(c), every: every, log: log,
		subs: map[int]func([]wire.DirectoryRow){}, kick: make(chan struct{}, 1)}
}

// start reads the directory once, then follows it until ctx ends. Only
// the first call does anything.
func (w *watcher) start(ctx context.Context) {
	w.once.Do(func() {
		w.refresh(ctx)
		go w.loop(ctx)
	})
}

func (w *watcher) loop(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.kick:
		}
		w.refresh(ctx)
	}
}

// poke asks for a read now.
func (w *watcher) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// refresh reads the directory and tells the subscribers when it changed.
func (w *watcher) refresh(ctx context.Context) {
	size, err := w.size(ctx)
	if err == nil {
		w.mu.Lock()
		same := w.loaded && size == w.seen
		w.mu.Unlock()
		if same {
			return
		}
	}
	rows, err := w.list(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("reading the directory failed; row tools stay as they were", "err", err)
		}
		return
	}
	fp := fingerprint(rows)
	w.mu.Lock()
	w.loaded, w.seen = true, size
	if fp == w.fp {
		w.mu.Unlock()
		return
	}
	w.rows, w.fp = rows, fp
	subs := slices.Collect(maps.Values(w.subs))
	w.mu.Unlock()
	for _, f := range subs {
		f(rows)
	}
}

func fingerprint(rows []wire.DirectoryRow) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.Key)
		b.WriteByte(0)
		b.WriteString(r.InvID)
		b.WriteByte(0)
	}
	return b.String()
}

func (w *watcher) current() []wire.DirectoryRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rows
}

// subscribe calls f with the rows after every change, until the returned
// func is called.
func (w *watcher) subscribe(f func([]wire.DirectoryRow)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.next
	w.next++
	w.subs[id] = f
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs, id)
	}
}

// clientRows lists every current row through c, page by page.
func clientRows(c *client.Client) func(ctx context.Context) ([]wire.DirectoryRow, error) {
	return func(ctx context.Context) ([]wire.DirectoryRow, error) {
		var out []wire.DirectoryRow
		for r, err := range c.DirectoryRows(ctx) {
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// clientSize reads the ledger's size through c (its signed checkpoint,
// which the server caches per size).
func clientSize(c *client.Client) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		ck, err := c.Checkpoint(ctx)
		if err != nil {
			return 0, err
		}
		return ck.TreeSize, nil
	}
}

// syncRows makes the session's row tools the rows of type cli that pass
// the --rows glob: row_<key>, mapped like the dynamic tools; of two rows
// whose names collide the later (by key) is left out and logged.
func (s *session) syncRows(rows []wire.DirectoryRow) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	rows = slices.Clone(rows)
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	next := map[string]wire.DirectoryRow{}
	var fp strings.Builder
	for _, r := range rows {
		if r.Type != "cli" || !matchRow(s.opts.Rows, r.Key) {
			continue
		}
		name := protocol.ToolName(RowToolPrefix + r.Key)
		if prev, ok := next[name]; ok {
			s.log.Warn("row tool names collide; the later row is left out", "tool", name, "kept", prev.Key, "left_out", r.Key)
			continue
		}
		next[name] = r
		fmt.Fprintf(&fp, "%s=%s;", name, r.InvID)
	}
	s.mu.Lock()
	if fp.String() == s.rowFP {
		s.mu.Unlock()
		return
	}
	old := s.rowSet
	s.rowSet, s.rowFP = next, fp.String()
	s.mu.Unlock()
	var gone []string
	for n := range old {
		if _, ok := next[n]; !ok {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	for _, n := range slices.Sorted(maps.Keys(next)) {
		r := next[n]
		if o, ok := old[n]; ok && o.InvID == r.InvID {
			continue
		}
		s.srv.AddTool(&mcp.Tool{
			Name:         n,
			Description:  rowDescription(r),
			InputSchema:  RowSchema(r.Row),
			OutputSchema: rowOutput,
			Annotations:  &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
		}, s.rowHandler(r.Key))
	}
}

var rowOutput = map[string]any{"type": "object", "properties": map[string]any{
	"receipt":   anyObject,
	"argv":      map[string]any{"type": "array", "items": str},
	"command":   str,
	"executed":  map[string]any{"type": "boolean"},
	"exit_code": map[string]any{"type": "integer"},
	"stdout":    str, "stderr": str,
	"output": map[string]any{},
}}

func rowDescription(r wire.DirectoryRow) string {
	var b strings.Builder
	if d := strings.TrimSpace(r.Description); d != "" {
		b.WriteString(d)
		if !strings.HasSuffix(d, ".") {
			b.WriteString(".")
		}
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "Runs %s (OIP directory row %q, version %s). A call records an invocation in the ledger and answers its receipt and the exact argv; the command runs only for a caller allowed to execute.", r.Command, r.Key, r.InvID)
	return b.String()
}

// RowSchema returns the JSON Schema of a row's input: one property per
// arg and flag (its type, description and default; arrays of scalars),
// the required ones required, no others allowed, merged with the row's
// own schema (its property keywords are added to ours, its required
// names too, and its other keywords kept).
func RowSchema(r wire.Row) map[string]any {
	props := map[string]any{}
	var required []string
	add := func(p wire.Param, where string) {
		prop := map[string]any{}
		switch t, _ := protocol.NormalizeType(p.Type); t {
		case protocol.TypeArray:
			prop["type"] = "array"
			prop["items"] = map[string]any{"type": []string{"string", "number", "boolean"}}
		case "":
		default:
			prop["type"] = t
		}
		desc := strings.TrimSpace(p.Description)
		if desc != "" && !strings.HasSuffix(desc, ".") {
			desc += "."
		}
		prop["description"] = strings.TrimSpace(desc + " " + where)
		if len(p.Default) > 0 {
			var v any
			if json.Unmarshal(p.Default, &v) == nil {
				prop["default"] = v
			}
		}
		props[p.Name] = prop
		if p.Required {
			required = append(required, p.Name)
		}
	}
	for i, a := range r.Args {
		add(a, fmt.Sprintf("(positional argument %d)", i+1))
	}
	for _, f := range r.Flags {
		flag := "--" + f.Name
		if f.ShortAlias != "" {
			flag = f.ShortAlias
		}
		add(f, fmt.Sprintf("(flag %s)", flag))
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	var own map[string]any
	if len(r.Schema) > 0 && json.Unmarshal(r.Schema, &own) == nil {
		if op, ok := own["properties"].(map[string]any); ok {
			for name, v := range op {
				extra, ok := v.(map[string]any)
				mine, known := props[name].(map[string]any)
				if !ok || !known {
					continue // the row refuses keys it does not declare
				}
				for k, kv := range extra {
					if _, set := mine[k]; !set || k == "description" && mine[k] == "" {
						mine[k] = kv
					}
				}
			}
		}
		if req, ok := own["required"].([]any); ok {
			for _, v := range req {
				if n, ok := v.(string); ok && !slices.Contains(required, n) {
					if _, known := props[n]; known {
						required = append(required, n)
					}
				}
			}
		}
		for k, v := range own {
			switch k {
			case "properties", "required", "type", "additionalProperties", "$schema", "$id":
			default:
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
		}
	}
	if len(required) > 0 {
		sort.Strings(required)
		out["required"] = required
	}
	return out
}

// invocationKey names one invocation a row tool records: unique, and
// readable in the ledger as the bridge's.
func invocationKey(rowKey string) string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	if len(rowKey) > 80 { // keys are ASCII (oip.KeyPattern)
		rowKey = rowKey[:80]
	}
	return "mcp:" + rowKey + ":" + id.String()
}

// rowResult is what a row tool answers.
type rowResult struct {
	Receipt  *wire.Receipt   `json:"receipt"`
	Argv     []string        `json:"argv"`
	Command  string          `json:"command,omitempty"`
	Executed bool            `json:"executed"`
	ExitCode *int            `json:"exit_code,omitempty"`
	Stdout   string          `json:"stdout,omitempty"`
	Stderr   string          `json:"stderr,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Outcome  *wire.Outcome   `json:"outcome,omitempty"`
	// Hint says why a refused invocation was refused.
	Hint string `json:"hint,omitempty"`
}

// rowHandler records an invocation of the row key with the call's
// arguments as input (executed when the caller may: session.execute) and
// answers its receipt and argv. A refused invocation (input the row
// rejects, execution not allowed) is an isError result with the reason;
// an executing call refused because the token's identity changed is made
// again without execution.
func (s *session) rowHandler(key string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = withCaller(ctx, req.Extra)
		raw := req.Params.Arguments
		if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
			raw = json.RawMessage("{}")
		}
		input, err := protocol.DecodeObject(raw, 0)
		if err != nil {
			return errorResult(refusal(400, "The arguments of row %s must be a JSON object keyed by its arg and flag names: %s", key, protocol.ErrorHint(err))), nil
		}
		execute := s.execute(ctx)
		rc, err := s.c.Invoke(ctx, invocationKey(key), client.Invocation{ObjectKey: key, Input: input, Execute: execute})
		if err == nil && execute && rc.Outcome != nil && rc.Outcome.Class == wire.OutcomeRefused && !s.mayStillExecute(ctx) {
			// The token lost exec (or the server --allow-exec) since it was
			// read: build the command, as for any caller without it.
			rc, err = s.c.Invoke(ctx, invocationKey(key), client.Invocation{ObjectKey: key, Input: input})
		}
		if err != nil {
			return errorResult(err), nil
		}
		out := rowResult{Receipt: rc, Outcome: rc.Outcome}
		if cmd, err := s.builtCommand(ctx, rc.InvID); err == nil {
			out.Argv, out.Command = cmd.Argv, cmd.Line
		} else if rc.Outcome == nil || rc.Outcome.Class != wire.OutcomeRefused {
			s.log.Warn("reading the invocation's record failed", "inv_ID", rc.InvID, "err", err)
		}
		if o := rc.Outcome; o != nil && o.Class != wire.OutcomeRefused {
			out.Executed = true
			out.ExitCode = o.ExitCode
			if o.Stdout != nil {
				out.Stdout = o.Stdout.Text
			}
			if o.Stderr != nil {
				out.Stderr = o.Stderr.Text
			}
			out.Output = o.Output
		}
		if out.Argv == nil {
			out.Argv = []string{}
		}
		refused := rc.Outcome != nil && rc.Outcome.Class == wire.OutcomeRefused
		if refused {
			out.Hint = rc.Outcome.Reason
		}
		res := okResult(out, rowSummary(key, out))
		if refused {
			res.IsError = true
			res.Content = append([]mcp.Content{&mcp.TextContent{Text: "Refused (recorded as " + rc.InvID + "): " + rc.Outcome.Reason}}, res.Content[1:]...)
		}
		return res, nil
	}
}

func rowSummary(key string, r rowResult) string {
	line := strings.Join(r.Argv, " ")
	if r.Command != "" {
		line = r.Command
	}
	if r.Executed && r.ExitCode != nil {
		return fmt.Sprintf("Ran %s (row %s, receipt %s): exit status %d.", line, key, r.Receipt.InvID, *r.ExitCode)
	}
	return fmt.Sprintf("Built %s (row %s, receipt %s); not executed.", line, key, r.Receipt.InvID)
}

// builtCommand reads the command an invocation recorded: in its attempt
// record (for an executed one, the record its result is the result of).
func (s *session) builtCommand(ctx context.Context, invID string) (*wire.Command, error) {
	rec, err := s.c.Receipt(ctx, invID)
	if err != nil {
		return nil, err
	}
	if rec.ResultOf != "" {
		if rec, err = s.c.Receipt(ctx, rec.ResultOf); err != nil {
			return nil, err
		}
	}
	var body struct {
		Command *wire.Command `json:"command"`
	}
	if err := json.Unmarshal(rec.Body, &body); err != nil || body.Command == nil {
		return nil, fmt.Errorf("record %s holds no built command", rec.InvID)
	}
	return body.Command, nil
}
