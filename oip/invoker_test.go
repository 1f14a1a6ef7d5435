package oip_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/runner"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store/memstore"
)

const (
	invEchoRow = `{"type":"directory_row","command":"echo","args":[{"name":"words","type":"array"}],"flags":[{"name":"n","type":"boolean","short_alias":"-n"}]}`
	invJSONRow = `{"type":"directory_row","command":"echo","output_format":"json","args":[{"name":"words","type":"array"}]}`
)

var keyRE = regexp.MustCompile(oip.KeyPattern)

func newInvoker(t *testing.T, allow ...string) (*oip.Service, *oip.Invoker) {
	t.Helper()
	o := &oip.Options{}
	if allow != nil {
		ex, err := runner.New(runner.Options{Allow: allow, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		o.Executor = ex
	}
	svc, err := oip.New(memstore.New(), o)
	if err != nil {
		t.Fatal(err)
	}
	for k, b := range map[string]string{"echo": invEchoRow, "json": invJSONRow} {
		if _, err := svc.Dispatch(context.Background(), k, json.RawMessage(b)); err != nil {
			t.Fatal(err)
		}
	}
	return svc, oip.NewInvoker(svc)
}

func TestInvokerTool(t *testing.T) {
	svc, iv := newInvoker(t, "echo")
	ctx := context.Background()
	res, ok, reason, err := iv.InvokeRow(ctx, engine.RowCall{
		Key: "json", Input: map[string]any{"words": []any{`{"n":`, int64(42), "}"}},
		RunID: "0190f1c2-0000-7000-8000-000000000001", State: "S", Tool: "lint", Actor: "alice", Scopes: auth.AllScopes,
	})
	if err != nil || !ok || reason != "" {
		t.Fatalf("ok=%v reason=%q err=%v", ok, reason, err)
	}
	tr := res.(oip.ToolResult)
	if tr.Outcome.Class != oip.OutcomeSucceeded || *tr.ExitCode != 0 || tr.Stdout != "{\"n\": 42 }\n" || string(tr.Output) != `{"n":42}` {
		t.Fatalf("%+v", tr)
	}
	if !strings.HasPrefix(tr.Key, "run:0190f1c2-0000-7000-8000-000000000001:tool:lint:") || !keyRE.MatchString(tr.Key) {
		t.Fatalf("key %q", tr.Key)
	}
	// The wire shape of the tool's answer.
	b, _ := json.Marshal(tr)
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"inv_ID", "outcome", "exit_code", "stdout", "output"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("answer lacks %s: %s", k, b)
		}
	}
	// Recorded as the caller, attempt then result.
	h, _, err := svc.History(ctx, tr.Key, 0, 0)
	if err != nil || len(h) != 2 || h[0].Source != "alice" || h[1].InvID != tr.InvID || h[1].ResultOf != h[0].InvID {
		t.Fatalf("history %+v %v", h, err)
	}

	// A caller without the exec scope of its own: the row version's
	// authority counts (the server dispatched it), so it runs, recorded
	// as the caller's.
	res, ok, reason, err = iv.InvokeRow(ctx, engine.RowCall{Key: "echo", Input: map[string]any{"words": []any{"x"}}, RunID: "r", Tool: "t", Actor: "bob", Scopes: []string{auth.ScopeRead, auth.ScopeRuns}})
	tr = res.(oip.ToolResult)
	if err != nil || !ok || tr.Outcome.Class != oip.OutcomeSucceeded || tr.Stdout != "x\n" {
		t.Fatalf("a caller without exec: %+v ok=%v reason=%q err=%v", tr, ok, reason, err)
	}
	if h, _, _ := svc.History(ctx, tr.Key, 0, 0); len(h) != 2 || h[0].Source != "bob" {
		t.Fatalf("records of the call %+v", h)
	}
	// Input the row does not take: refused, with the hint.
	res, ok, _, err = iv.InvokeRow(ctx, engine.RowCall{Key: "echo", Input: map[string]any{"bogus": "x"}, RunID: "r", Tool: "t"})
	if tr = res.(oip.ToolResult); err != nil || ok || tr.Outcome.Class != oip.OutcomeRefused || !strings.Contains(tr.Outcome.Reason, "bogus") {
		t.Fatalf("bad input: %+v %v", tr.Outcome, err)
	}
	// An unknown row is an error: nothing to record.
	_, _, _, err = iv.InvokeRow(ctx, engine.RowCall{Key: "missing", RunID: "r", Tool: "t"})
	if protocol.ErrorCode(err) != protocol.ENotFound || !strings.Contains(protocol.ErrorHint(err), `Tool "t" is bound to the directory row "missing"`) {
		t.Fatalf("unknown row: %v", err)
	}
	// Odd and long tool names still give valid keys.
	res, _, _, err = iv.InvokeRow(ctx, engine.RowCall{Key: "echo", RunID: "r/1 é", Tool: strings.Repeat("très long ", 30)})
	if tr = res.(oip.ToolResult); err != nil || !keyRE.MatchString(tr.Key) {
		t.Fatalf("key %q %v", tr.Key, err)
	}
}

func TestInvokerExecDisabled(t *testing.T) {
	_, iv := newInvoker(t)
	res, ok, reason, err := iv.InvokeRow(context.Background(), engine.RowCall{Key: "echo", RunID: "r", Tool: "t", Actor: "alice"})
	if err != nil || ok || res.(oip.ToolResult).Outcome.Class != oip.OutcomeRefused || !strings.Contains(reason, "--allow-exec") {
		t.Fatalf("ok=%v reason=%q err=%v", ok, reason, err)
	}
}

func TestInvokerTaskAttemptsReplay(t *testing.T) {
	svc, iv := newInvoker(t, "echo")
	ctx := context.Background()
	var mu sync.Mutex
	var progress []string
	call := engine.RowCall{
		Key: "echo", FromData: true, RunID: "run1", State: "WORK", TaskID: "run1.3", Attempt: 1, Actor: oip.TaskActor,
		// The run's data: keys the row does not declare are dropped.
		Input: map[string]any{"words": []any{"a", "b"}, "n": false, "amount": 12.5, "note": "x"},
		Progress: func(p, h string) {
			mu.Lock()
			progress = append(progress, p+"|"+h)
			mu.Unlock()
		},
	}
	res, ok, reason, err := iv.InvokeRow(ctx, call)
	if err != nil || !ok || reason != "" {
		t.Fatalf("attempt 1: ok=%v %q %v", ok, reason, err)
	}
	first := res.(oip.ToolResult)
	if first.Key != "task:run1.3:1" || first.Stdout != "a b\n" {
		t.Fatalf("attempt 1: %+v", first)
	}
	mu.Lock()
	if len(progress) != 2 || !strings.HasPrefix(progress[0], "started|") || !strings.HasPrefix(progress[1], "finished|Finished: succeeded, exit code 0") {
		t.Fatalf("progress %q", progress)
	}
	mu.Unlock()
	h1, _, _ := svc.History(ctx, first.Key, 0, 0)
	if h1[0].Source != oip.TaskActor || !strings.Contains(string(h1[0].Body), `"input":{"n":false,"words":["a","b"]}`) {
		t.Fatalf("attempt record %s source %s", h1[0].Body, h1[0].Source)
	}

	// Attempt 2 (say, after a crash) replays attempt 1; attempt 4
	// replays attempt 2, since attempt 3 never reached the ledger.
	call.Attempt = 2
	res, _, _, err = iv.InvokeRow(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	second := res.(oip.ToolResult)
	h2, _, _ := svc.History(ctx, second.Key, 0, 0)
	if second.Key != "task:run1.3:2" || h2[0].ReplayOf != h1[0].InvID {
		t.Fatalf("attempt 2: %+v replay_of %q want %q", second, h2[0].ReplayOf, h1[0].InvID)
	}
	call.Attempt = 4
	res, _, _, _ = iv.InvokeRow(ctx, call)
	h4, _, _ := svc.History(ctx, res.(oip.ToolResult).Key, 0, 0)
	if h4[0].ReplayOf != h2[0].InvID {
		t.Fatalf("attempt 4 replays %q, want %q", h4[0].ReplayOf, h2[0].InvID)
	}
	// Readable both ways.
	rec, err := svc.Record(ctx, h1[0].InvID)
	if err != nil || len(rec.ReplayedBy) != 1 || rec.ReplayedBy[0] != h2[0].InvID {
		t.Fatalf("replayed_by %+v %v", rec.ReplayedBy, err)
	}
	rec, _ = svc.Record(ctx, h2[0].InvID)
	if rec.ReplayOf != h1[0].InvID || len(rec.ReplayedBy) != 1 || rec.ReplayedBy[0] != h4[0].InvID {
		t.Fatalf("attempt 2 record %+v", rec)
	}
}

func TestInvokerTaskFailures(t *testing.T) {
	_, iv := newInvoker(t, "echo")
	ctx := context.Background()
	// Unknown row: a failed task with a reason, no error.
	_, ok, reason, err := iv.InvokeRow(ctx, engine.RowCall{Key: "missing", FromData: true, State: "WORK", TaskID: "r.2", Attempt: 1})
	if err != nil || ok || !strings.Contains(reason, "The task of state WORK is bound to the directory row \"missing\"") {
		t.Fatalf("ok=%v reason=%q err=%v", ok, reason, err)
	}
	// Output that is not JSON for a json row: failed, the reason names the
	// invocation and receipt.
	res, ok, reason, err := iv.InvokeRow(ctx, engine.RowCall{Key: "json", FromData: true, TaskID: "r.3", Attempt: 1, Input: map[string]any{"words": []any{"nope"}}})
	tr := res.(oip.ToolResult)
	if err != nil || ok || tr.Outcome.Class != oip.OutcomeFailed || !strings.Contains(reason, "task:r.3:1") || !strings.Contains(reason, tr.InvID) || !strings.Contains(reason, "not one JSON value") {
		t.Fatalf("ok=%v reason=%q err=%v", ok, reason, err)
	}
	// Without the exec feature: refused.
	_, iv = newInvoker(t)
	_, ok, reason, _ = iv.InvokeRow(ctx, engine.RowCall{Key: "echo", FromData: true, TaskID: "r.4", Attempt: 1})
	if ok || !strings.Contains(reason, "was refused") || !strings.Contains(reason, "--allow-exec") {
		t.Fatalf("ok=%v reason=%q", ok, reason)
	}
}

func TestEnsureRow(t *testing.T) {
	svc, _ := newInvoker(t)
	ctx := context.Background()
	row := json.RawMessage(`{"type":"directory_row","command":"date","description":"now"}`)
	rc, did, err := svc.EnsureRow(ctx, "date", row)
	if err != nil || !did {
		t.Fatalf("first: %v %v", did, err)
	}
	// The same content, spelled differently: nothing dispatched.
	rc2, did, err := svc.EnsureRow(ctx, "date", json.RawMessage(`{ "description": "now", "command": "date", "type": "directory_row" }`))
	if err != nil || did || rc2.InvID != rc.InvID {
		t.Fatalf("unchanged: %v %+v %v", did, rc2, err)
	}
	rc3, did, err := svc.EnsureRow(ctx, "date", json.RawMessage(`{"type":"directory_row","command":"date","description":"the time"}`))
	if err != nil || !did || rc3.Supersedes != rc.InvID {
		t.Fatalf("changed: %v %+v %v", did, rc3, err)
	}
	if h, _, _ := svc.History(ctx, "date", 0, 0); len(h) != 2 {
		t.Fatalf("history %d", len(h))
	}
	for _, bad := range []string{`{"command":"date"}`, `{"type":"invocation","object_key":"date"}`, `[]`, `{"type":"directory_row"}`} {
		if _, _, err := svc.EnsureRow(ctx, "x", json.RawMessage(bad)); protocol.ErrorCode(err) != protocol.EInvalid {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
