package oip

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/oip/execution"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// Execution is one invocation to run, handed to an Executor after its
// attempt record is in the ledger (declared in package oip/execution, which
// the executor imports instead of this package).
type Execution = execution.Execution

// Executor runs invocations dispatched with "execute": true (see
// execution.Executor). Service calls it only when the principal may
// execute.
type Executor = execution.Executor

// invocationRequest is the dispatched invocation body.
type invocationRequest struct {
	Type      string          `json:"type"`
	ObjectKey string          `json:"object_key"`
	Input     json.RawMessage `json:"input"`
	Execute   bool            `json:"execute"`
	ReplayOf  string          `json:"replay_of"`
}

var invocationKeys = map[string]bool{"type": true, "object_key": true, "input": true, "execute": true, "replay_of": true}

// invocationBody is the stored body of an invocation record.
type invocationBody struct {
	Type      string           `json:"type"`
	ObjectKey string           `json:"object_key"`
	RowInvID  string           `json:"row_inv_ID"`
	Input     json.RawMessage  `json:"input"`
	Execute   bool             `json:"execute"`
	ReplayOf  string           `json:"replay_of,omitempty"`
	Command   *command.Command `json:"command,omitempty"`
	Outcome   *Outcome         `json:"outcome,omitempty"`
}

// resultBody is the stored body of an invocation_result record.
type resultBody struct {
	Type      string  `json:"type"`
	ObjectKey string  `json:"object_key"`
	Outcome   Outcome `json:"outcome"`
}

func parseInvocation(body []byte) (invocationRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return invocationRequest{}, invalidf("body", "The invocation is not a JSON object: %v.", err)
	}
	for k := range fields {
		if !invocationKeys[k] {
			return invocationRequest{}, invalidf("body."+k, "Unknown field %q in the invocation; allowed: type, object_key, input, execute, replay_of.", protocol.Truncate(k, 64))
		}
	}
	var req invocationRequest
	if raw, ok := fields["object_key"]; !ok || json.Unmarshal(raw, &req.ObjectKey) != nil {
		return req, invalidf("body.object_key", "body.object_key is required: the key of the directory row to invoke.")
	}
	if err := CheckKey(req.ObjectKey); err != nil {
		return req, invalidf("body.object_key", "body.object_key %q is not a valid key (%s).", protocol.Truncate(req.ObjectKey, 140), KeyPattern)
	}
	if raw, ok := fields["execute"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &req.Execute) != nil {
			return req, invalidf("body.execute", "body.execute must be true or false.")
		}
	}
	if raw, ok := fields["replay_of"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &req.ReplayOf) != nil || req.ReplayOf == "" {
			return req, invalidf("body.replay_of", "body.replay_of must be the inv_ID of the invocation this one replays.")
		}
	}
	req.Input = json.RawMessage("{}")
	if raw, ok := fields["input"]; ok && string(raw) != "null" {
		if len(raw) == 0 || raw[0] != '{' {
			return req, invalidf("body.input", "body.input must be a JSON object keyed by the row's arg and flag names.")
		}
		req.Input = raw
	}
	return req, nil
}

// dispatchInvocation records an invocation of a directory row (SPEC
// section 9). Without execution one record holds the constructed command;
// an invocation whose input is invalid, or that asks for execution without
// the authority, is recorded as refused. With execution the attempt is
// recorded first, the Executor runs it, and an invocation_result record
// holds the outcome; the receipt is then the result's.
func (s *Service) dispatchInvocation(ctx context.Context, key string, body []byte) (Receipt, error) {
	req, err := parseInvocation(body)
	if err != nil {
		return Receipt{}, err
	}
	if req.ObjectKey == key {
		return Receipt{}, invalidf("key", "The invocation's key %q is its row's key; give the invocation a key of its own (for example %q).", key, key+"-run-1")
	}
	wf, forWorkflow := rowCallOf(ctx)
	var rowRec store.LedgerRecord
	if forWorkflow && wf.pinned != nil {
		rowRec = *wf.pinned
	} else if rowRec, err = s.rowRecord(ctx, req.ObjectKey); err != nil {
		return Receipt{}, err
	}
	mayRun, notMine := true, ""
	if req.Execute && forWorkflow && wf.pinned == nil {
		if mayRun, notMine, err = s.mayRunForWorkflow(ctx, rowRec); err != nil {
			return Receipt{}, err
		}
	}
	if req.ReplayOf != "" {
		if req.ReplayOf, err = s.resolveReplayOf(ctx, req.ReplayOf); err != nil {
			return Receipt{}, err
		}
	}
	ib := invocationBody{
		Type: TypeInvocation, ObjectKey: req.ObjectKey, RowInvID: rowRec.InvID,
		Input: req.Input, Execute: req.Execute, ReplayOf: req.ReplayOf,
	}
	b, r, err := s.builder(rowRec)
	var cmd *command.Command
	if err == nil {
		var input map[string]any
		if input, err = protocol.DecodeObject(req.Input, s.maxDepth); err == nil {
			cmd, err = b.Build(input)
		}
	}
	p := auth.FromContext(ctx)
	switch {
	case err != nil:
		ib.Outcome = refused("The input does not fit the row: " + protocol.ErrorHint(err))
	case req.Execute && s.exec == nil:
		ib.Command = cmd
		ib.Outcome = refused("Execution is disabled on this server; it runs only with --allow-exec.")
	case req.Execute && !forWorkflow && !auth.MayExecute(true, p): // s.exec is set
		// A workflow's tool or task runs with the authority of its row
		// version (SPEC sections 9 and 16: the workflow pins it, or its
		// dispatcher held exec), checked above; a caller who may fire the
		// run's tools needs no exec of its own.
		ib.Command = cmd
		ib.Outcome = refused(fmt.Sprintf("The caller %q lacks the %s scope needed to execute.", p.Name, auth.ScopeExec))
	case req.Execute && !mayRun:
		ib.Command = cmd
		ib.Outcome = refused(notMine)
	default:
		ib.Command = cmd
	}
	attempt, err := s.appendJSON(ctx, key, TypeInvocation, ib, "", req.ReplayOf)
	if err != nil {
		return Receipt{}, err
	}
	rc := receiptOf(attempt)
	rc.Outcome = ib.Outcome
	if ib.Outcome != nil || !req.Execute {
		return rc, nil
	}

	// Execute: the attempt is durable; run it and record the result even
	// if the client has gone. The run itself stops with ctx only when the
	// caller asked for that (CancelExecution).
	execCtx := context.WithoutCancel(ctx)
	if cancelExecution(ctx) {
		execCtx = ctx
	}
	ctx = context.WithoutCancel(ctx)
	out := s.exec.Execute(execCtx, Execution{
		AttemptID: attempt.InvID, Key: key, RowKey: req.ObjectKey, RowInvID: rowRec.InvID,
		Row: r, Command: cmd, Principal: p,
	})
	result, err := s.appendJSON(ctx, key, TypeInvocationResult, resultBody{Type: TypeInvocationResult, ObjectKey: req.ObjectKey, Outcome: out}, attempt.InvID, "")
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) || out.Output == nil {
			return Receipt{}, err
		}
		// The command's JSON output cannot be hashed faithfully: keep
		// the outcome without it.
		out.Output = nil
		out.Reason = "output not recorded: " + pe.Hint
		if result, err = s.appendJSON(ctx, key, TypeInvocationResult, resultBody{Type: TypeInvocationResult, ObjectKey: req.ObjectKey, Outcome: out}, attempt.InvID, ""); err != nil {
			return Receipt{}, err
		}
	}
	rc = receiptOf(result)
	rc.Outcome = &out
	return rc, nil
}

type cancelKey struct{}

// CancelExecution returns ctx marked so that an invocation dispatched with
// it and executed is stopped (the Executor kills its process) when ctx is
// cancelled; its result, class failed, is still recorded. Without the mark
// an execution outlives its caller's context, so an HTTP client that goes
// away does not stop it. Workflow tasks use it, so that a server shutting
// down or a task losing its lease stops the command.
func CancelExecution(ctx context.Context) context.Context {
	return context.WithValue(ctx, cancelKey{}, true)
}

func cancelExecution(ctx context.Context) bool {
	v, _ := ctx.Value(cancelKey{}).(bool)
	return v
}

func refused(reason string) *Outcome {
	return &Outcome{Class: OutcomeRefused, Reason: reason}
}

// resolveReplayOf returns the inv_ID of the invocation that replay_of
// names: an invocation's own, or for an invocation_result (the receipt a
// client gets from an executed invocation) its attempt's.
func (s *Service) resolveReplayOf(ctx context.Context, invID string) (string, error) {
	sr, err := s.st.LedgerRecord(ctx, invID)
	if errors.Is(err, store.ErrNotFound) {
		return "", protocol.Errorf(protocol.ENotFound, "body.replay_of names no ledger record (%q); give the inv_ID of an earlier invocation.", protocol.Truncate(invID, 64)).With("field", "body.replay_of")
	}
	if err != nil {
		return "", fmt.Errorf("oip: read replayed record: %w", err)
	}
	if sr, err = s.checkedStore(ctx, sr); err != nil {
		return "", err
	}
	switch sr.Type {
	case TypeInvocation:
		return sr.InvID, nil
	case TypeInvocationResult:
		if sr.ResultOf != "" {
			return sr.ResultOf, nil
		}
	}
	return "", invalidf("body.replay_of", "body.replay_of names a record of type %s; only an invocation (or its invocation_result) can be replayed.", sr.Type)
}

// appendJSON encodes a body built by the service, checks it like a
// dispatched one, and appends it.
func (s *Service) appendJSON(ctx context.Context, key, typ string, v any, resultOf, replayOf string) (Record, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return Record{}, fmt.Errorf("oip: encode %s: %w", typ, err)
	}
	b, err := checkBody(buf.Bytes())
	if err != nil {
		return Record{}, err
	}
	t, err := s.template(ctx, key, typ, b)
	if err != nil {
		return Record{}, err
	}
	t.ResultOf, t.ReplayOf = resultOf, replayOf
	return s.appendRecord(ctx, t, nil)
}
