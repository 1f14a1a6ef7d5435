package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/client/embedded"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/spec"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// loopWorkflow ticks a self-loop n times, then finishes.
func loopWorkflow() *workflow.Definition {
	b := workflow.New("loop-v1", "LOOP").Description("Tick, then finish.")
	b.State("LOOP").Hint("Tick or finish.")
	b.State("END").Hint("Finished.")
	b.Transition("LOOP", "tick", "LOOP")
	b.Transition("LOOP", "finish", "END")
	return b.MustBuild()
}

func allWorkflows() []*workflow.Definition {
	return append(examples.AllWith(examples.Options{PaymentStep: 20 * time.Millisecond}), loopWorkflow())
}

// fixture is one backend under test, with its engine.
type fixture struct {
	name string
	b    client.Backend
	eng  *engine.Engine
	url  string // the HTTP server's URL ("" for embedded)
}

func newEngine(t testing.TB) *engine.Engine {
	t.Helper()
	eng, err := engine.New(memstore.New(), allWorkflows(), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := eng.StartWorkers(&engine.WorkerOptions{Poll: 20 * time.Millisecond})
	t.Cleanup(func() { w.Stop(time.Second) })
	return eng
}

// httpFixture serves a fresh engine over a real HTTP server.
func httpFixture(t testing.TB, opts *server.Options) *fixture {
	t.Helper()
	eng := newEngine(t)
	c, url := serveEngine(t, eng, opts)
	return &fixture{name: "http", b: c, eng: eng, url: url}
}

// serveEngine serves eng over a real HTTP server until the test ends and
// returns a client of it and its URL.
func serveEngine(t testing.TB, eng *engine.Engine, opts *server.Options) (*client.Client, string) {
	t.Helper()
	srv := server.New(eng, opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	c, err := client.New(ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, ts.URL
}

func embeddedFixture(t testing.TB) *fixture {
	t.Helper()
	eng := newEngine(t)
	return &fixture{name: "embedded", b: embedded.New(eng), eng: eng}
}

// forEachBackend runs test once over HTTP and once in-process: the one
// shared table both backends must pass.
func forEachBackend(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Run("http", func(t *testing.T) { test(t, httpFixture(t, nil)) })
	t.Run("embedded", func(t *testing.T) { test(t, embeddedFixture(t)) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// must(call())(t) returns call's value, failing t on its error.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

func validFrame(t *testing.T, f protocol.Frame) {
	t.Helper()
	b, _ := json.Marshal(f)
	if err := spec.Validate(spec.StateFrame, b); err != nil {
		t.Fatalf("frame does not validate: %v\n%s", err, b)
	}
}

func validCLI(t *testing.T, c protocol.CLI) {
	t.Helper()
	b, _ := json.Marshal(c)
	if err := spec.Validate(spec.CLI, b); err != nil {
		t.Fatalf("CLI object does not validate: %v\n%s", err, b)
	}
}

// wantError checks err is an *Error with status and a hint containing
// every part.
func wantError(t *testing.T, err error, status int, parts ...string) *client.Error {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want *client.Error %d", err, err, status)
	}
	if ce.Status != status || ce.Code != protocol.CodeOf(status) {
		t.Fatalf("error status/code = %d/%s, want %d/%s (hint %q)", ce.Status, ce.Code, status, protocol.CodeOf(status), ce.Hint)
	}
	if ce.Hint == "" || ce.Error() != ce.Hint {
		t.Fatalf("error without a hint: %#v", ce)
	}
	for _, p := range parts {
		if !strings.Contains(ce.Hint, p) {
			t.Fatalf("hint %q lacks %q", ce.Hint, p)
		}
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != ce.Code || pe.Hint != ce.Hint {
		t.Fatalf("*client.Error does not unwrap to the matching *protocol.Error: %v", pe)
	}
	return ce
}

func TestDiscoveryAndCatalog(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		ctx := ctx(t)
		d := must(f.b.Discover(ctx))(t)
		validFrame(t, d.Frame)
		if d.RunID != engine.DiscoveryRunID || d.State != engine.DiscoveryState {
			t.Fatalf("discovery = %+v", d.Frame)
		}
		want := []string{"start:config-wizard-v1", "start:expense-approval-v1", "start:loop-v1"}
		if got := d.Actions(); !slices.Equal(got, want) {
			t.Fatalf("discovery actions = %v, want %v", got, want)
		}
		wfs := must(f.b.Workflows(ctx))(t)
		if len(wfs) != 3 || wfs[0].WorkflowID != "config-wizard-v1" || !wfs[0].Default || wfs[0].InitialState != "INITIAL" ||
			!slices.Contains(wfs[0].States, "CONFIRM") || wfs[1].Default {
			t.Fatalf("workflows = %+v", wfs)
		}
		// Following a start href creates a run of that workflow.
		ns, _ := d.Action("start:expense-approval-v1")
		if ns.Href != wfs[1].StartHref {
			t.Fatalf("start href %q != catalog start_href %q", ns.Href, wfs[1].StartHref)
		}
		run := must(f.b.TransitionHref(ctx, ns.Href, nil, nil))(t)
		if run.WorkflowID != "expense-approval-v1" || run.State != "SUBMIT" || run.Version() != 1 {
			t.Fatalf("started by href: %+v (etag %q)", run.Frame, run.ETag)
		}
		// And a next_states href fires that transition.
		w := must(f.b.StartRun(ctx, "", nil))(t)
		start, _ := w.Action("start")
		next := must(f.b.TransitionHref(ctx, start.Href, nil, nil))(t)
		if next.State != "CONFIGURE" {
			t.Fatalf("href transition -> %s", next.State)
		}
	})
}

// The client loop of the seed: frame, CLI, pick, transition, CLI again.
func TestConfigWizardThroughResolve(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		ctx := ctx(t)
		run := must(f.b.StartRun(ctx, "", nil))(t)
		validFrame(t, run.Frame)
		if run.WorkflowID != "config-wizard-v1" || run.State != "INITIAL" || run.ETag != `"1"` || run.Version() != 1 {
			t.Fatalf("start = %+v etag %q", run.Frame, run.ETag)
		}
		steps := []struct {
			typed      string
			prompt     string
			options    []protocol.CLIOption
			inputHint  string
			wantAction string
			wantInput  map[string]any
			state      string
		}{
			{"1", "Config wizard", []protocol.CLIOption{{Action: "start", Label: "Start wizard", Keys: "1"}, {Action: "exit", Label: "Exit", Keys: "2"}}, "", "start", map[string]any{}, "CONFIGURE"},
			{"dark mode", "Set value", []protocol.CLIOption{{Action: "save", Label: "Save", Keys: "enter"}}, "Value (string):", "save", map[string]any{"value": "dark mode"}, "CONFIRM"},
			{"y", "Apply configuration?", []protocol.CLIOption{{Action: "confirm", Label: "Yes, apply", Keys: "y"}, {Action: "cancel", Label: "No, cancel", Keys: "n"}}, "", "confirm", map[string]any{}, "DONE"},
		}
		cur := run
		for i, s := range steps {
			cli := must(f.b.CLI(ctx, cur.RunID))(t)
			validCLI(t, cli)
			if cli.Prompt != s.prompt || !slices.Equal(cli.Options, s.options) || cli.InputHint != s.inputHint || cli.RunID != run.RunID {
				t.Fatalf("step %d: CLI = %+v", i, cli)
			}
			action, input, err := client.Resolve(cli, cur.Frame, s.typed)
			if err != nil || action != s.wantAction || !equalJSON(input, s.wantInput) {
				t.Fatalf("step %d: Resolve(%q) = %q %v %v", i, s.typed, action, input, err)
			}
			next := must(f.b.Transition(ctx, cur.RunID, action, input, &client.TransitionOptions{IfMatch: cur.ETag}))(t)
			validFrame(t, next.Frame)
			if next.State != s.state || next.Version() != cur.Version()+1 {
				t.Fatalf("step %d: -> %s v%d", i, next.State, next.Version())
			}
			cur = next
		}
		if cur.Status != protocol.StatusCompleted || cur.Data["value"] != "dark mode" || len(cur.NextStates) != 0 {
			t.Fatalf("final frame = %+v", cur.Frame)
		}
		got := must(f.b.Frame(ctx, run.RunID))(t)
		if got.State != "DONE" || got.ETag != `"4"` {
			t.Fatalf("GET frame = %s %q", got.State, got.ETag)
		}
		cli := must(f.b.CLI(ctx, run.RunID))(t)
		if cli.Prompt != protocol.DefaultPrompt || cli.Hint != "Configuration applied." || len(cli.Options) != 0 {
			t.Fatalf("final CLI = %+v", cli)
		}
		log := must(f.b.Events(ctx, run.RunID))(t)
		if log.RunID != run.RunID || log.WorkflowID != "config-wizard-v1" || len(log.Events) != 4 {
			t.Fatalf("events = %+v", log)
		}
		var acts []string
		for i, ev := range log.Events {
			if ev.ID != int64(i+1) || ev.Time.IsZero() || ev.Actor == "" || ev.To == "" {
				t.Fatalf("event %d = %+v", i, ev)
			}
			acts = append(acts, ev.Action)
		}
		if !slices.Equal(acts, []string{"", "start", "save", "confirm"}) || log.Events[3].Status != "completed" || log.Events[3].From != "CONFIRM" {
			t.Fatalf("event actions = %v, last = %+v", acts, log.Events[3])
		}
	})
}

// equalJSON reports whether a and b encode to the same JSON; a value that
// cannot be encoded equals nothing.
func equalJSON(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && string(x) == string(y)
}

// Every refusal keeps its status, code and the server's hint.
func TestErrorsKeepTheirHints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		ctx := ctx(t)
		const ghost = "0190aaaa-0000-7000-8000-000000000000"
		_, err := f.b.Frame(ctx, ghost)
		wantError(t, err, 404, "Run not found")
		if !client.IsNotFound(err) || client.IsForbidden(err) || !errors.Is(err, client.ErrNotFound) || client.StatusOf(err) != 404 {
			t.Fatalf("404 helpers: %v", err)
		}
		_, err = f.b.CLI(ctx, ghost)
		wantError(t, err, 404, "Run not found")
		_, err = f.b.Transition(ctx, ghost, "start", nil, nil)
		wantError(t, err, 404, "Run not found")
		// The documented order: an unknown run is 404 before a malformed If-Match.
		_, err = f.b.Transition(ctx, ghost, "start", nil, &client.TransitionOptions{IfMatch: "abc"})
		wantError(t, err, 404, "Run not found")
		_, err = f.b.Events(ctx, ghost)
		wantError(t, err, 404, "Run not found")
		_, err = f.b.InvokeTool(ctx, ghost, "policy_check", nil)
		wantError(t, err, 404, "Run not found")
		_, err = f.b.Resource(ctx, ghost, "policy")
		wantError(t, err, 404, "Run not found")
		_, err = f.b.StartRun(ctx, "no-such-wf", nil)
		wantError(t, err, 404, "Workflow not found", "config-wizard-v1")

		run := must(f.b.StartRun(ctx, "config-wizard-v1", map[string]any{"origin": "test"}))(t)
		if run.Data["origin"] != "test" {
			t.Fatalf("initial data = %v", run.Data)
		}
		// 403: not offered now; the hint names the state and the offered actions.
		_, err = f.b.Transition(ctx, run.RunID, "confirm", nil, nil)
		ce := wantError(t, err, 403, "INITIAL", "start")
		if !client.IsForbidden(err) || !slices.Equal(ce.Allowed(), []string{"start", "exit"}) {
			t.Fatalf("403 allowed = %v", ce.Allowed())
		}
		must(f.b.Transition(ctx, run.RunID, "start", nil, nil))(t)
		// 400: missing expects key, wrong type.
		_, err = f.b.Transition(ctx, run.RunID, "save", nil, nil)
		wantError(t, err, 400, `"value"`)
		if !client.IsInvalid(err) {
			t.Fatal("IsInvalid")
		}
		_, err = f.b.Transition(ctx, run.RunID, "save", map[string]any{"value": 42}, nil)
		wantError(t, err, 400, "string")
		// 409: a stale If-Match; a malformed one is 400.
		_, err = f.b.Transition(ctx, run.RunID, "save", map[string]any{"value": "v"}, &client.TransitionOptions{IfMatch: `"1"`})
		wantError(t, err, 409, "version 2")
		if !client.IsConflict(err) {
			t.Fatal("IsConflict")
		}
		_, err = f.b.Transition(ctx, run.RunID, "save", map[string]any{"value": "v"}, &client.TransitionOptions{IfMatch: "abc"})
		wantError(t, err, 400, "If-Match")
		// A weak tag never matches (RFC 9110), even of the current version.
		_, err = f.b.Transition(ctx, run.RunID, "save", map[string]any{"value": "v"}, &client.TransitionOptions{IfMatch: `W/"2"`})
		wantError(t, err, 409, "weak entity tag")
		// A bare version number is accepted as If-Match.
		next := must(f.b.Transition(ctx, run.RunID, "save", map[string]any{"value": "v"}, &client.TransitionOptions{IfMatch: "2"}))(t)
		if next.State != "CONFIRM" {
			t.Fatalf("save -> %s", next.State)
		}
		// Tools and resources not bound to the state: 403.
		_, err = f.b.InvokeTool(ctx, run.RunID, "policy_check", map[string]any{"amount": 5})
		wantError(t, err, 403, "policy_check", "CONFIRM")
		_, err = f.b.Resource(ctx, run.RunID, "policy")
		wantError(t, err, 403, "policy", "CONFIRM")
	})
}

func TestToolsResourcesGuards(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		ctx := ctx(t)
		run := must(f.b.StartRun(ctx, "expense-approval-v1", nil))(t)
		res := must(f.b.InvokeTool(ctx, run.RunID, "policy_check", map[string]any{"amount": 5000}))(t)
		m, ok := res.(map[string]any)
		if !ok || m["route"] != "escalate" || m["limit"] != int64(examples.ApprovalLimit) {
			t.Fatalf("tool result = %#v", res)
		}
		_, err := f.b.InvokeTool(ctx, run.RunID, "policy_check", map[string]any{"amount": "lots"})
		wantError(t, err, 400, "amount")
		_, err = f.b.InvokeTool(ctx, run.RunID, "policy_check", map[string]any{"amount": -1})
		wantError(t, err, 400, "positive")
		c := must(f.b.Resource(ctx, run.RunID, "policy"))(t)
		if !strings.HasPrefix(c.MimeType, "text/markdown") || !strings.Contains(string(c.Body), "Expense policy") {
			t.Fatalf("resource = %q %q", c.MimeType, c.Body)
		}
		// Typed input from Resolve, several fields as key=value pairs.
		cli := must(f.b.CLI(ctx, run.RunID))(t)
		action, input, err := client.Resolve(cli, run.Frame, `submit amount=5000 description="Team offsite"`)
		if err != nil || action != "submit" || input["amount"] != int64(5000) || input["description"] != "Team offsite" {
			t.Fatalf("Resolve = %q %v %v", action, input, err)
		}
		review := must(f.b.Transition(ctx, run.RunID, action, input, nil))(t)
		if review.State != "REVIEW" || !slices.Equal(review.Actions(), []string{"escalate", "reject", "escalate_to_manager"}) {
			t.Fatalf("review = %s %v", review.State, review.Actions())
		}
		// A guard refuses approve: 403 with the guard's reason as hint.
		_, err = f.b.Transition(ctx, run.RunID, "approve", nil, nil)
		ce := wantError(t, err, 403, "cannot be approved directly")
		if ce.Fields["refused_by"] != "guard" {
			t.Fatalf("guard fields = %v", ce.Fields)
		}
		claim := must(f.b.Resource(ctx, run.RunID, "claim"))(t)
		var cl map[string]any
		if json.Unmarshal(claim.Body, &cl) != nil || cl["description"] != "Team offsite" || claim.MimeType != "application/json" {
			t.Fatalf("claim resource = %q %s", claim.MimeType, claim.Body)
		}
	})
}

// A background task: the stream yields processing, progress, then the
// terminal frame, and stops by itself.
func TestStreamFollowsTaskToTheEnd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		ctx := ctx(t)
		run := must(f.b.StartRun(ctx, "expense-approval-v1", nil))(t)
		must(f.b.Transition(ctx, run.RunID, "submit", map[string]any{"amount": 12.5, "description": "Lunch"}, nil))(t)
		var states, progress []string
		var ids []int64
		approved := false
		for it, err := range f.b.Stream(ctx, run.RunID, nil) {
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			switch {
			case it.Frame != nil:
				validFrame(t, it.Frame.Frame)
				states = append(states, it.Frame.State)
				ids = append(ids, it.Frame.ID)
				if !approved {
					approved = true
					paying := must(f.b.Transition(ctx, run.RunID, "approve", nil, nil))(t)
					if paying.Status != protocol.StatusProcessing || !slices.Equal(paying.Actions(), []string{"cancel"}) {
						t.Fatalf("approve -> %s %s %v", paying.State, paying.Status, paying.Actions())
					}
				}
			case it.Progress != nil:
				progress = append(progress, it.Progress.Progress)
			}
		}
		if !slices.Equal(states, []string{"REVIEW", "PAYING", "PAID"}) || !slices.Equal(ids, []int64{2, 3, 4}) {
			t.Fatalf("stream states = %v ids = %v", states, ids)
		}
		if len(progress) < 3 || progress[len(progress)-1] != "100%" {
			t.Fatalf("progress = %v", progress)
		}
		// A finished run streams its terminal frame and stops at once.
		n := 0
		for it, err := range f.b.Stream(ctx, run.RunID, nil) {
			if err != nil || it.Frame == nil || it.Frame.State != "PAID" {
				t.Fatalf("stream of a finished run: %+v %v", it, err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("%d items", n)
		}
	})
}

func TestStreamResumesFromLastEventID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		ctx := ctx(t)
		run := must(f.b.StartRun(ctx, "", nil))(t)
		must(f.b.Transition(ctx, run.RunID, "start", nil, nil))(t)
		must(f.b.Transition(ctx, run.RunID, "save", map[string]any{"value": "v"}, nil))(t)
		must(f.b.Transition(ctx, run.RunID, "cancel", nil, nil))(t)
		var got []string
		for it, err := range f.b.Stream(ctx, run.RunID, &client.StreamOptions{LastEventID: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, it.Frame.State)
		}
		if !slices.Equal(got, []string{"CONFIRM", "CANCELLED"}) {
			t.Fatalf("resumed stream = %v", got)
		}
		// Unknown run and a Last-Event-ID ahead of the run: errors, no retries.
		for _, c := range []struct {
			run    string
			last   int64
			status int
		}{{"0190aaaa-0000-7000-8000-000000000000", 0, 404}, {run.RunID, 99, 400}} {
			var errs []error
			for _, err := range f.b.Stream(ctx, c.run, &client.StreamOptions{LastEventID: c.last}) {
				errs = append(errs, err)
			}
			if len(errs) != 1 {
				t.Fatalf("stream(%s, %d) yielded %v", c.run, c.last, errs)
			}
			wantError(t, errs[0], c.status)
		}
	})
}

// Breaking out of the loop ends the stream; a cancelled context ends it
// with the context's error.
func TestStreamStopsEarly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		run := must(f.b.StartRun(ctx(t), "", nil))(t)
		for it, err := range f.b.Stream(ctx(t), run.RunID, nil) {
			if err != nil || it.Frame == nil {
				t.Fatal(it, err)
			}
			break
		}
		c, cancel := context.WithCancel(t.Context())
		defer cancel()
		var last error
		for it, err := range f.b.Stream(c, run.RunID, nil) {
			if it.Frame != nil {
				cancel()
			}
			last = err
		}
		if !errors.Is(last, context.Canceled) {
			t.Fatalf("after cancel: %v", last)
		}
	})
}

// A reader that falls far behind (more than the server's subscriber
// buffer) still gets every frame exactly once, in order.
func TestStreamSlowReaderLosesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		ctx := ctx(t)
		run := must(f.b.StartRun(ctx, "loop-v1", nil))(t)
		const ticks = 400 // > engine.DefaultSubscriberBuffer
		var ids []int64
		for it, err := range f.b.Stream(ctx, run.RunID, &client.StreamOptions{Backoff: time.Millisecond}) {
			if err != nil {
				t.Fatalf("after %d frames: %v", len(ids), err)
			}
			if it.Frame == nil {
				continue
			}
			ids = append(ids, it.Frame.ID)
			if len(ids) == 1 {
				// Do not read while the run races ahead.
				for range ticks {
					must(f.b.Transition(ctx, run.RunID, "tick", nil, nil))(t)
				}
				must(f.b.Transition(ctx, run.RunID, "finish", nil, nil))(t)
			}
		}
		if len(ids) != ticks+2 {
			t.Fatalf("%d frames, want %d", len(ids), ticks+2)
		}
		for i, id := range ids {
			if id != int64(i+1) {
				t.Fatalf("frame %d has id %d", i, id)
			}
		}
	})
}
