package tui_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/client/embedded"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/app/tui"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

func newEngine(t *testing.T, o examples.Options) *engine.Engine {
	t.Helper()
	eng, err := engine.New(memstore.New(), examples.AllWith(o), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := eng.StartWorkers(&engine.WorkerOptions{Poll: 20 * time.Millisecond})
	t.Cleanup(func() { w.Stop(time.Second) })
	return eng
}

// backends gives the UI a local engine and a real HTTP server.
func backends(t *testing.T) map[string]client.Backend { return backendsWith(t, examples.Options{}) }

// backendsWith is backends serving the built-in workflows with o.
func backendsWith(t *testing.T, o examples.Options) map[string]client.Backend {
	local := embedded.New(newEngine(t, o))
	eng := newEngine(t, o)
	srv := server.New(eng, nil)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	c, err := client.New(ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]client.Backend{"local": local, "http": c}
}

// screen waits until the output shows every part (in any order).
func screen(t *testing.T, tm *teatest.TestModel, parts ...string) {
	t.Helper()
	var seen bytes.Buffer
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		seen.Reset()
		seen.Write(b)
		for _, p := range parts {
			if !bytes.Contains(b, []byte(p)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

func key(k tea.KeyType) tea.KeyMsg { return tea.KeyMsg{Type: k} }

func start(t *testing.T, o tui.Options) *teatest.TestModel {
	o.ASCII = true
	return teatest.NewTestModel(t, tui.NewModel(t.Context(), o), teatest.WithInitialTermSize(100, 40))
}

func finalResult(t *testing.T, tm *teatest.TestModel) tui.Result {
	t.Helper()
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second))
	return fm.(*tui.Model).Result()
}

// The whole config wizard through the keyboard, asserting the screen at
// each step.
func TestConfigWizardByKeys(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			var started atomic.Value
			tm := start(t, tui.Options{Backend: b, WorkflowID: "config-wizard-v1", OnRun: func(f *client.RunFrame) { started.Store(f.RunID) }})
			screen(t, tm, "ASMP config-wizard-v1 * INITIAL", "Config wizard", "Press 1 to start, or 2 to exit.", "> 1. Start wizard [1]", "  2. Exit [2]", "1-9 pick · q quit")
			tm.Type("1") // the option's key
			// CONFIGURE: one option that takes input opens its form at once.
			screen(t, tm, "Set value", "Enter your config value, then choose Save.", "1. Save [enter] value (string)", "Value (string):", "value (string):", "enter Save")
			tm.Send(key(tea.KeyEnter)) // an empty string is refused client-side
			screen(t, tm, "value is empty")
			tm.Type("dark mode")
			tm.Send(key(tea.KeyEnter))
			screen(t, tm, "Apply configuration?", "Confirm to apply or cancel.", "1. Yes, apply [y]", "2. No, cancel [n]", "y/n keys", "Chose Save.")
			tm.Send(key(tea.KeyDown)) // arrows move; y picks regardless
			tm.Type("y")
			id, _ := started.Load().(string)
			screen(t, tm, "[ok] Run completed", "State:  DONE", "Hint:   Configuration applied.", "Data:   value=dark mode", "Run id: "+id, "enter or q to exit")
			tm.Send(key(tea.KeyEnter))
			r := finalResult(t, tm)
			if r.RunID != id || r.Status != protocol.StatusCompleted || r.State != "DONE" || !strings.Contains(r.Summary(), "completed in state DONE") {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

// Cancel by arrow keys and enter; another client's change arrives through
// the stream.
func TestArrowsAndStreamUpdates(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			run, err := b.StartRun(t.Context(), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			tm := start(t, tui.Options{Backend: b, RunID: run.RunID})
			screen(t, tm, "Config wizard")
			// Another client moves the run: the screen follows.
			if _, err := b.Transition(t.Context(), run.RunID, "start", nil, nil); err != nil {
				t.Fatal(err)
			}
			screen(t, tm, "Set value", "value (string):", "Moved to CONFIGURE by another client; what you typed was discarded.", "space go on")
			// Keys meant for the state the run left do nothing, Enter included.
			tm.Type("y")
			tm.Send(key(tea.KeyEnter))
			tm.Type("1")
			tm.Type(" ")
			screen(t, tm, "The run is at CONFIGURE.")
			if f, err := b.Frame(t.Context(), run.RunID); err != nil || f.State != "CONFIGURE" {
				t.Fatalf("keys typed for the old state moved the run: %v %v", f, err)
			}
			tm.Type("x")
			tm.Send(key(tea.KeyEnter))
			// The options are drawn once keys act on them (a key sent
			// while the new screen settles is dropped on purpose).
			screen(t, tm, "Apply configuration?", "Chose Save.", "1. Yes, apply [y]")
			tm.Send(key(tea.KeyDown))
			screen(t, tm, "> 2. No, cancel")
			tm.Send(key(tea.KeyEnter))
			screen(t, tm, "Run completed", "State:  CANCELLED", "Configuration cancelled.", "enter or q to exit")
			tm.Type("q")
			if r := finalResult(t, tm); r.State != "CANCELLED" {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

// flaky fails the first transition with a server error.
type flaky struct {
	client.Backend
	failed atomic.Bool
}

func (f *flaky) Transition(ctx context.Context, runID, action string, input map[string]any, o *client.TransitionOptions) (*client.RunFrame, error) {
	if !f.failed.Swap(true) {
		return nil, &client.Error{Status: http.StatusServiceUnavailable, Code: protocol.EUnavailable, Hint: "The server is busy; try again."}
	}
	return f.Backend.Transition(ctx, runID, action, input, o)
}

// Typed fields, client-side validation, a server error with retry, and a
// background task with a progress bar.
func TestExpenseWithProgressAndErrors(t *testing.T) {
	for name, b := range backendsWith(t, examples.Options{PaymentStep: 150 * time.Millisecond}) {
		t.Run(name, func(t *testing.T) {
			fb := &flaky{Backend: b}
			tm := start(t, tui.Options{Backend: fb, WorkflowID: "expense-approval-v1"})
			screen(t, tm, "New expense claim", "amount (number):", "description (string):")
			tm.Type("lots")
			tm.Send(key(tea.KeyTab))
			tm.Type("Team lunch")
			tm.Send(key(tea.KeyEnter))
			screen(t, tm, "amount must be a number such as 12.5")
			for range 4 {
				tm.Send(key(tea.KeyBackspace))
			}
			tm.Type("12.5")
			tm.Send(key(tea.KeyEnter)) // to the next field
			tm.Send(key(tea.KeyEnter)) // submit
			// The form stays filled: enter sends it again.
			screen(t, tm, "[x] The server is busy; try again.", "enter send again")
			tm.Send(key(tea.KeyEnter))
			screen(t, tm, "Review the claim", "1. Approve [a]", "2. Reject [r] reason (string) critical", "Milestones: [ok] Claim submitted")
			tm.Type("a")
			screen(t, tm, "PAYING", "Reserving funds", "%")
			screen(t, tm, "Run completed", "State:  PAID", "Claim submitted -> Claim approved -> Paid", "enter or q to exit")
			tm.Send(key(tea.KeyEnter))
			if r := finalResult(t, tm); r.State != "PAID" {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

// Attaching to an unknown run ends with the server's hint.
func TestUnknownRun(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			r, err := tui.RunFull(t.Context(), tui.Options{Backend: b, RunID: "0190aaaa-0000-7000-8000-000000000000",
				In: strings.NewReader(""), Out: &bytes.Buffer{}})
			if !client.IsNotFound(err) || !strings.Contains(err.Error(), "Run not found") || r.Status != "" {
				t.Fatalf("RunFull = %+v, %v", r, err)
			}
		})
	}
}

// The line-oriented fallback through the whole wizard.
func TestPlainLoop(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			in := strings.NewReader("3\n1\nsave\n?\ndark mode\nmaybe\ny\n")
			var out bytes.Buffer
			r, err := tui.RunPlain(t.Context(), tui.Options{Backend: b, In: in, Out: &out, ASCII: true})
			if err != nil {
				t.Fatal(err)
			}
			got := out.String()
			for _, want := range []string{
				"-- INITIAL [active] --\nConfig wizard\nPress 1 to start, or 2 to exit.\n  1) Start wizard [1]\n  2) Exit [2]\n> ",
				`[x] "3" is not an option here. Type a number 1-2, an action (start, exit) or a key (1 for start, 2 for exit).`,
				"-- CONFIGURE [active] --\nSet value\nEnter your config value, then choose Save.\n  1) Save [enter] (value (string))\nValue (string):\n> ",
				"[x] Option 1 (Save, action save) needs input: value (string).",
				`Type 1, an action (save) or a key (enter for save). save takes value (string): type "save <value>" or just the value.`,
				"[ok] save -> CONFIRM",
				"  1) Yes, apply [y]\n  2) No, cancel [n]\n",
				`[x] "maybe" is not an option here.`,
				"[ok] confirm -> DONE",
				"[ok] Run completed in state DONE: Configuration applied.\nRun id: " + r.RunID,
			} {
				if !strings.Contains(got, want) {
					t.Fatalf("output lacks %q:\n%s", want, got)
				}
			}
			if r.Status != "completed" {
				t.Fatalf("result %+v", r)
			}
			// Input that ends early leaves the run where it is.
			out.Reset()
			r2, err := tui.RunPlain(t.Context(), tui.Options{Backend: b, In: strings.NewReader("1\n"), Out: &out, ASCII: true})
			if err != nil || r2.State != "CONFIGURE" || !strings.Contains(out.String(), "Input ended; run "+r2.RunID+" stays at CONFIGURE") {
				t.Fatalf("early EOF: %+v %v\n%s", r2, err, out.String())
			}
			// q leaves.
			out.Reset()
			if _, err := tui.RunPlain(t.Context(), tui.Options{Backend: b, RunID: r2.RunID, In: strings.NewReader("q\n"), Out: &out}); err != nil || !strings.Contains(out.String(), "Leaving") {
				t.Fatalf("q: %v\n%s", err, out.String())
			}
		})
	}
}

// The plain loop waits out a background task, printing its progress.
func TestPlainProcessing(t *testing.T) {
	b := backendsWith(t, examples.Options{PaymentStep: 30 * time.Millisecond})["http"]
	in := strings.NewReader("amount=5 description=Pens\na\n")
	var out bytes.Buffer
	r, err := tui.RunPlain(t.Context(), tui.Options{Backend: b, WorkflowID: "expense-approval-v1", In: in, Out: &out, ASCII: true})
	if err != nil || r.State != "PAID" {
		t.Fatalf("%+v %v\n%s", r, err, out.String())
	}
	for _, want := range []string{"-- PAYING [processing] --", "100% Paid", "-> PAID [completed]", "Milestones: Claim submitted -> Claim approved -> Paid"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestInteractiveDetection(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if tui.Interactive(strings.NewReader(""), &bytes.Buffer{}, env(map[string]string{"TERM": "xterm"})) {
		t.Fatal("a pipe is not a terminal")
	}
	if tui.Interactive(nil, nil, env(map[string]string{"TERM": "dumb"})) {
		t.Fatal("TERM=dumb is not interactive")
	}
	if !tui.UTF8(env(map[string]string{"LANG": "en_US.UTF-8"})) || tui.UTF8(env(map[string]string{"LC_ALL": "C", "LANG": "en_US.UTF-8"})) || tui.UTF8(env(nil)) {
		t.Fatal("UTF8 detection")
	}
}

// startReview starts an expense claim and submits it: the run waits in
// REVIEW, where reject is critical.
func startReview(t *testing.T, b client.Backend) string {
	t.Helper()
	run, err := b.StartRun(t.Context(), "expense-approval-v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Transition(t.Context(), run.RunID, "submit", map[string]any{"amount": 12.5, "description": "Team lunch"}, nil); err != nil {
		t.Fatal(err)
	}
	return run.RunID
}

// A critical action is sent only after a y; n keeps the form filled.
func TestCriticalActionAsksFirst(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			id := startReview(t, b)
			tm := start(t, tui.Options{Backend: b, RunID: id})
			screen(t, tm, "Review the claim", "2. Reject [r] reason (string) critical")
			tm.Type("r")
			screen(t, tm, "reason (string):")
			tm.Type("too much")
			tm.Send(key(tea.KeyEnter))
			screen(t, tm, "Reject (reject) is marked critical. Send it? y yes, n no", "reason = too much", "y send it")
			tm.Type("n")
			screen(t, tm, "Not sent: Reject.", "reason (string):")
			if f, err := b.Frame(t.Context(), id); err != nil || f.State != "REVIEW" {
				t.Fatalf("after n the run is %v (%v), want still REVIEW", f, err)
			}
			tm.Send(key(tea.KeyEnter)) // the form kept the reason: ask again
			screen(t, tm, "is marked critical. Send it?")
			tm.Type("y")
			screen(t, tm, "State:  REJECTED", "enter or q to exit")
			tm.Send(key(tea.KeyEnter))
			if r := finalResult(t, tm); r.State != "REJECTED" {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

// The line-oriented loop asks too, unless Yes is set.
func TestPlainCriticalActionAsksFirst(t *testing.T) {
	b := backends(t)["local"]
	id := startReview(t, b)
	var out bytes.Buffer
	r, err := tui.RunPlain(t.Context(), tui.Options{Backend: b, RunID: id, In: strings.NewReader("reject too much\nno\nreject too much\ny\n"), Out: &out, ASCII: true})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"reject is marked critical. Send it? Type y to confirm: Not sent: reject.",
		"reject is marked critical. Send it? Type y to confirm: [ok] reject -> REJECTED",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q:\n%s", want, got)
		}
	}
	if r.State != "REJECTED" {
		t.Fatalf("result %+v", r)
	}

	id = startReview(t, b)
	out.Reset()
	r, err = tui.RunPlain(t.Context(), tui.Options{Backend: b, RunID: id, Yes: true, In: strings.NewReader("reject too much\n"), Out: &out, ASCII: true})
	if err != nil || r.State != "REJECTED" || strings.Contains(out.String(), "Send it?") {
		t.Fatalf("with Yes: %+v %v\n%s", r, err, out.String())
	}
}

// A state without a CLI hook: its options get keys, and the generated
// input hint is shown only in the form it belongs to, not as a leftover
// label under the list.
func TestStateWithoutHook(t *testing.T) {
	def, err := workflow.Load("nohook.yaml", []byte(`workflow_id: nohook-v1
initial_state: DECIDE
states: {DECIDE: {hint: Decide.}, OK: {hint: Approved.}, NO: {hint: Rejected.}}
transitions:
  - {from: DECIDE, action: approve, to: OK}
  - {from: DECIDE, action: reject, to: NO, expects: {reason: string}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(memstore.New(), []*workflow.Definition{def}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := embedded.New(eng)
	tm := start(t, tui.Options{Backend: b})
	var shown []byte
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		shown = b
		return bytes.Contains(b, []byte("> 1. approve [a]")) && bytes.Contains(b, []byte("  2. reject [e] reason (string)")) && bytes.Contains(b, []byte("1-9 pick"))
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	if bytes.Contains(shown, []byte("reason (string):")) {
		t.Fatalf("a leftover input label is shown under the options:\n%s", shown)
	}
	tm.Type("a")
	screen(t, tm, "State:  OK", "enter or q to exit")
	tm.Send(key(tea.KeyEnter))
	if r := finalResult(t, tm); r.State != "OK" {
		t.Fatalf("result = %+v", r)
	}
}
