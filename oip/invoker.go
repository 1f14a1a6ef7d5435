package oip

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// TaskActor is the ledger source of invocations made by workflow tasks,
// which run with the server's authority.
const TaskActor = "task"

// progressEvery is how often a row-bound task reports that it still runs.
var progressEvery = 2 * time.Second

// Invoker runs directory rows for workflow tools and background tasks: it
// implements engine.RowInvoker on top of a Service, so every call is an
// invocation (execute: true) recorded in the ledger like one dispatched
// over HTTP, with its attempt and result records.
//
// Which version runs: the one the workflow pins (row: KEY@inv_ID), else
// the row's current version, and that only if its dispatcher held the
// exec scope when dispatching it or was the server (ServerPrincipal);
// otherwise the invocation is recorded refused with the reason, which a
// task's failure transition carries.
//
// Tools: the tool's input is the row's input, the caller is the
// invocation's principal (its name is the records' source), the authority
// to execute is the row version's, as for tasks (SPEC section 9: for a
// workflow's tool the principal that counts is whoever dispatched the row
// version, not the caller; a caller needs only the right to call the
// run's tools), and the key is run:RUN_ID:tool:TOOL:ULID, fresh per call.
// The answer is a ToolResult.
//
// Tasks: the input is the run's data restricted to the row's arg and flag
// names, the principal is TaskActor with every scope (the authority is
// the row version's, above), and the key is task:TASK_ID:ATTEMPT, so that
// attempt n > 1 is dispatched with replay_of naming the invocation of the
// latest earlier attempt that reached the ledger. The execution stops when
// the task's context ends (shutdown, lost lease). Progress reports
// "started", "running Ns" every two seconds, then "finished".
type Invoker struct {
	s *Service
}

var _ engine.RowInvoker = (*Invoker)(nil)

// NewInvoker returns the row invoker of s.
func NewInvoker(s *Service) *Invoker { return &Invoker{s: s} }

// ToolResult is what a row-bound tool answers, as {"result": ToolResult}.
type ToolResult struct {
	// InvID is the receipt's inv_ID: the invocation_result record when the
	// command ran (or the executor refused it), else the invocation.
	InvID string `json:"inv_ID"`
	// Key is the invocation's ledger key.
	Key     string   `json:"key"`
	Outcome *Outcome `json:"outcome"`
	// ExitCode is the command's exit code; null when it did not run.
	ExitCode *int `json:"exit_code"`
	// Stdout is the kept head of the command's standard output.
	Stdout string `json:"stdout"`
	// Output is the parsed stdout of an output_format json row.
	Output json.RawMessage `json:"output,omitempty"`
}

// TaskOutput is what a row-bound task stores under its state's task output
// key (engine.TaskOutput): the parsed JSON output of an output_format json
// row, else the kept head of its standard output.
func (r ToolResult) TaskOutput() any {
	if len(r.Output) > 0 {
		return r.Output
	}
	return r.Stdout
}

// TaskReceipt is what a row-bound task stores under its state's task
// receipt key (engine.TaskReceipt): the invocation's ledger key and receipt.
func (r ToolResult) TaskReceipt() any {
	return map[string]any{"key": r.Key, "inv_ID": r.InvID}
}

// InvokeRow implements engine.RowInvoker. result is a ToolResult; ok is
// true when the outcome's class is succeeded; reason explains any other
// outcome and names the invocation's key and inv_ID. err is set only when
// nothing could be recorded: for a tool, an unknown row (ENotFound) or a
// store failure; for a task, a store failure (an unknown row is a failed
// task with a reason).
func (iv *Invoker) InvokeRow(ctx context.Context, call engine.RowCall) (result any, ok bool, reason string, err error) {
	rowKey, pin, err := workflow.ParseRowRef(call.Key)
	if err != nil {
		return nil, false, "", protocol.Errorf(protocol.EInvalid, "%v", err).With("row", call.Key)
	}
	var rowRec store.LedgerRecord
	var missing string
	wf := rowCall{ref: call.Key}
	if pin != "" {
		if rowRec, missing, err = iv.s.pinnedRow(ctx, rowKey, pin); err != nil {
			return nil, false, "", err
		}
		wf.pinned = &rowRec
	} else if rowRec, err = iv.s.rowRecord(ctx, rowKey); err != nil {
		if protocol.ErrorCode(err) != protocol.ENotFound {
			return nil, false, "", err
		}
		what := "Tool " + strconv.Quote(call.Tool)
		if call.FromData {
			what = "The task of state " + call.State
		}
		missing = fmt.Sprintf("%s is bound to the directory row %q, which is not in the ledger; dispatch it (type %s) first.", what, rowKey, TypeDirectoryRow)
	}
	if missing != "" {
		if call.FromData {
			return nil, false, missing, nil
		}
		return nil, false, "", protocol.Errorf(protocol.ENotFound, "%s", missing).With("row", call.Key)
	}
	input := call.Input
	if input == nil {
		input = map[string]any{}
	}
	var key, replayOf string
	p := auth.Principal{Name: call.Actor, Scopes: call.Scopes}
	if call.FromData {
		input, err = iv.rowInput(rowRec, input)
		if err != nil {
			return nil, false, "", err
		}
		key = taskKey(call.TaskID, call.RunID, call.Attempt)
		if replayOf, err = iv.previousAttempt(ctx, call); err != nil {
			return nil, false, "", err
		}
		if p.Name == "" {
			p.Name = TaskActor
		}
	} else {
		id, err := iv.s.newID(iv.s.now())
		if err != nil {
			return nil, false, "", err
		}
		key = toolKey(call.RunID, call.Tool, strings.TrimPrefix(id, "inv_"))
	}
	if p.Name == "" {
		p.Name = auth.Anonymous
	}
	if p.Scopes == nil {
		p.Scopes = auth.AllScopes
	}
	body := map[string]any{"type": TypeInvocation, "object_key": rowKey, "input": input, "execute": true}
	if replayOf != "" {
		body["replay_of"] = replayOf
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, false, "", fmt.Errorf("oip: encode invocation of %s: %w", call.Key, err)
	}
	dctx := withRowCall(auth.WithPrincipal(ctx, p), wf)
	if call.FromData {
		dctx = CancelExecution(dctx)
	}
	stop := iv.report(call, key)
	rc, err := iv.s.Dispatch(dctx, key, raw)
	stop(rc, err)
	if err != nil {
		return nil, false, "", err
	}
	res := ToolResult{InvID: rc.InvID, Key: key, Outcome: rc.Outcome}
	if rc.Outcome == nil { // not possible with execute: true; be safe
		rc.Outcome = &Outcome{Class: OutcomeFailed, Reason: "The ledger recorded no outcome."}
		res.Outcome = rc.Outcome
	}
	o := rc.Outcome
	res.ExitCode = o.ExitCode
	if o.Stdout != nil {
		res.Stdout = o.Stdout.Text
	}
	res.Output = o.Output
	if o.Class == OutcomeSucceeded {
		return res, true, "", nil
	}
	why := o.Reason
	if why == "" {
		why = "no reason given"
	}
	return res, false, fmt.Sprintf("the directory row %s was %s (invocation %s, receipt %s): %s", call.Key, o.Class, key, rc.InvID, why), nil
}

// rowInput keeps the keys of data that the row declares as args or flags.
func (iv *Invoker) rowInput(rowRec store.LedgerRecord, data map[string]any) (map[string]any, error) {
	_, r, err := iv.s.builder(rowRec)
	if err != nil {
		return nil, err
	}
	in := map[string]any{}
	for _, k := range r.InputKeys() {
		if v, ok := data[k]; ok {
			in[k] = v
		}
	}
	return in, nil
}

// previousAttempt returns the inv_ID of the invocation made by the latest
// earlier attempt of the task that reached the ledger, or "".
func (iv *Invoker) previousAttempt(ctx context.Context, call engine.RowCall) (string, error) {
	for a := call.Attempt - 1; a >= 1 && a >= call.Attempt-64; a-- {
		// An attempt's key holds its invocation, then perhaps its result:
		// the latest record names the invocation either way.
		head, err := iv.s.st.LedgerHead(ctx, taskKey(call.TaskID, call.RunID, a))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("oip: read the task's attempt %d: %w", a, err)
		}
		switch {
		case head.Type == TypeInvocation:
			return head.InvID, nil
		case head.ResultOf != "":
			return head.ResultOf, nil
		}
	}
	return "", nil
}

// report sends the task's progress: started now, running every
// progressEvery, and finished when the returned func is called.
func (iv *Invoker) report(call engine.RowCall, key string) func(Receipt, error) {
	if call.Progress == nil {
		return func(Receipt, error) {}
	}
	start := time.Now()
	call.Progress("started", fmt.Sprintf("Running the directory row %s (invocation %s).", call.Key, key))
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				s := int(now.Sub(start).Seconds())
				call.Progress("running "+strconv.Itoa(s)+"s", fmt.Sprintf("The directory row %s has run for %ds (invocation %s).", call.Key, s, key))
			}
		}
	}()
	return func(rc Receipt, err error) {
		close(done)
		<-stopped
		switch {
		case err != nil:
			call.Progress("finished", "The invocation could not be recorded: "+protocol.ErrorHint(err))
		case rc.Outcome == nil:
			call.Progress("finished", "Recorded as "+rc.InvID+".")
		default:
			h := "Finished: " + rc.Outcome.Class
			if rc.Outcome.ExitCode != nil {
				h += ", exit code " + strconv.Itoa(*rc.Outcome.ExitCode)
			}
			h += " (receipt " + rc.InvID + ")."
			if rc.Outcome.Class != OutcomeSucceeded && rc.Outcome.Reason != "" {
				h += " " + rc.Outcome.Reason
			}
			call.Progress("finished", h)
		}
	}
}

// EnsureRow dispatches body (a directory row, "type": "directory_row")
// under key for the principal in ctx unless the key's latest record
// already is a directory row with the same content, compared as canonical JSON (RFC 8785). It returns the
// receipt of the new record, or of the unchanged latest one, and whether
// it dispatched. Servers use it to install their example rows at start-up
// without growing the ledger on every restart.
func (s *Service) EnsureRow(ctx context.Context, key string, body json.RawMessage) (Receipt, bool, error) {
	if err := CheckKey(key); err != nil {
		return Receipt{}, false, err
	}
	b, err := checkBody(body)
	if err != nil {
		return Receipt{}, false, err
	}
	want, err := jcs.Transform(b)
	if err != nil {
		return Receipt{}, false, invalidf("body", "The row cannot be canonicalised (RFC 8785): %s.", protocol.Truncate(err.Error(), 200))
	}
	latest, err := s.st.LedgerHead(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Receipt{}, false, fmt.Errorf("oip: read row %s: %w", key, err)
	}
	if err == nil {
		if latest, err = s.checkedStore(ctx, latest); err != nil {
			return Receipt{}, false, err
		}
	}
	if err == nil && latest.Type == TypeDirectoryRow {
		if have, err := jcs.Transform(latest.Body); err == nil && bytes.Equal(have, want) {
			// Unchanged, and kept only if workflows may run it: else the
			// same content is dispatched again, with ctx's authority.
			if ok, _, err := s.mayRunForWorkflow(ctx, latest); err != nil {
				return Receipt{}, false, err
			} else if ok {
				return receiptOf(fromStore(latest)), false, nil
			}
		}
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(b, &head) != nil || head.Type != TypeDirectoryRow {
		return Receipt{}, false, invalidf("body.type", "EnsureRow takes a directory row: a body with \"type\": %q.", TypeDirectoryRow)
	}
	rc, err := s.Dispatch(ctx, key, b)
	if err != nil {
		return Receipt{}, false, err
	}
	return rc, true, nil
}

// toolKey is the ledger key of one tool call:
// run:RUN_ID:tool:TOOL:ULID, cut to fit KeyPattern.
func toolKey(runID, tool, ulid string) string {
	head := "run:" + keySafe(runID, 40) + ":tool:"
	tail := ":" + ulid
	return head + keySafe(tool, 128-len(head)-len(tail)) + tail
}

// taskKey is the ledger key of one task attempt: task:TASK_ID:ATTEMPT.
func taskKey(taskID, runID string, attempt int) string {
	if taskID == "" {
		taskID = runID
	}
	tail := ":" + strconv.Itoa(attempt)
	return "task:" + keySafe(taskID, 128-len("task:")-len(tail)) + tail
}

// keySafe replaces characters a ledger key may not hold with '_' and cuts
// s to at most n bytes; "" becomes "_".
func keySafe(s string, n int) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > n {
		b = b[:max(n, 1)]
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

var _ engine.TaskOutput = ToolResult{}
