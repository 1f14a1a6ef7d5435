package workflow_test

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/workflow"
)

const timersYAML = `workflow_id: deploy-approval-v1
initial_state: REVIEW
states:
  REVIEW:
    hint: Approve or reject the deploy.
    timers:
      - {after: 10m, action: escalate, data: {level: 2, note: nobody reviewed}}
      - {at: 'data.due_at', action: expire}
  ESCALATED:
    hint: The on-call lead decides.
    timers: [{after: 1d12h, action: expire}]
  DONE: {}
  EXPIRED: {}
transitions:
  - {from: REVIEW, action: approve, to: DONE}
  - {from: REVIEW, action: escalate, to: ESCALATED, expects: {level: integer, note: string}}
  - {from: REVIEW, action: expire, to: EXPIRED}
  - {from: ESCALATED, action: approve, to: DONE}
  - {from: ESCALATED, action: expire, to: EXPIRED}
`

func timersBuilder(escalateAfter time.Duration) *workflow.Builder {
	b := workflow.New("deploy-approval-v1", "REVIEW")
	b.State("REVIEW").Hint("Approve or reject the deploy.").
		Timer(workflow.Timer{After: escalateAfter, Action: "escalate", Data: map[string]any{"level": 2, "note": "nobody reviewed"}}).
		At("data.due_at", "expire")
	b.State("ESCALATED").Hint("The on-call lead decides.").After(36*time.Hour, "expire")
	b.State("DONE")
	b.State("EXPIRED")
	b.Transition("REVIEW", "approve", "DONE")
	b.Transition("REVIEW", "escalate", "ESCALATED").Expect("level", "integer").Expect("note", "string")
	b.Transition("REVIEW", "expire", "EXPIRED")
	b.Transition("ESCALATED", "approve", "DONE")
	b.Transition("ESCALATED", "expire", "EXPIRED")
	return b
}

// Timers load from a file and from the builder into the same definition,
// with the same version.
func TestTimersFromFileAndBuilder(t *testing.T) {
	f, err := workflow.Load("deploy.yaml", []byte(timersYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := timersBuilder(10 * time.Minute).Build()
	if err != nil {
		t.Fatal(err)
	}
	if f.Version() != g.Version() {
		t.Fatalf("file and builder have different versions:\n%s\n%s", f.Canonical(), g.Canonical())
	}
	review, _ := f.State("REVIEW")
	if len(review.Timers) != 2 {
		t.Fatalf("REVIEW has %d timers", len(review.Timers))
	}
	esc, ok := review.Timer("escalate")
	if !ok || esc.After != 10*time.Minute || esc.At != "" {
		t.Fatalf("escalate timer = %+v", esc)
	}
	// Data is JSON values, as a request body decodes (integers as int64).
	if want := map[string]any{"level": int64(2), "note": "nobody reviewed"}; !reflect.DeepEqual(esc.Data, want) {
		t.Errorf("timer data = %#v, want %#v", esc.Data, want)
	}
	if exp, _ := review.Timer("expire"); exp.At != "data.due_at" || exp.After != 0 {
		t.Errorf("expire timer = %+v", exp)
	}
	escalated, _ := f.State("ESCALATED")
	if escalated.Timers[0].After != 36*time.Hour {
		t.Errorf("1d12h parsed as %v", escalated.Timers[0].After)
	}
}

// Timers are part of the version (a pinned run keeps the timers it
// started with); a workflow without timers keeps its version from before
// timers existed.
func TestTimersAndTheVersion(t *testing.T) {
	base, _ := timersBuilder(10 * time.Minute).Build()
	other, _ := timersBuilder(20 * time.Minute).Build()
	if base.Version() == other.Version() {
		t.Error("changing a timer's duration kept the version")
	}
	// 600s and 10m are one duration, so one version.
	spelled, err := workflow.Load("deploy.yaml", []byte(strings.Replace(timersYAML, "after: 10m", "after: 600s", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if spelled.Version() != base.Version() {
		t.Error("after: 600s and after: 10m have different versions")
	}
	// A workflow without timers has the version it had before timers
	// existed (the config wizard's; server/testdata/golden pins it too);
	// expense-approval-v1 has one, REVIEW's escalate_to_manager after
	// 48h, so its version names it (server/testdata/golden pins that one).
	for id, want := range map[string]struct{ version, timers string }{
		"config-wizard-v1":    {"sha256:01ba2a4089bae28ee3a4b9e7c06e276a767de5454f1f2ddefe16f992365ab434", ""},
		"expense-approval-v1": {"sha256:da9003be617a5ca26d2c9d93d3bb63fd905114575964c117e1ab7fc61096d6a0", `"timers":[{"action":"escalate_to_manager","after":"48h0m0s"}]`},
	} {
		found := false
		for _, d := range examples.All() {
			if d.ID == id {
				found = true
				if d.Version() != want.version {
					t.Errorf("%s: version %s, want %s", id, d.Version(), want.version)
				}
				c := string(d.Canonical())
				if want.timers == "" && strings.Contains(c, `"timers"`) || strings.Contains(c, `"retry"`) {
					t.Errorf("%s: canonical document names timers or retry: %s", id, c)
				}
				if want.timers != "" && (!strings.Contains(c, want.timers) || strings.Count(c, `"timers"`) != 1) {
					t.Errorf("%s: canonical document does not name only the timer %s: %s", id, want.timers, c)
				}
			}
		}
		if !found {
			t.Errorf("built-in %s is gone", id)
		}
	}
	// A stored version keeps its timers.
	stored, err := workflow.LoadStored(base.Canonical(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Version() != base.Version() {
		t.Fatal("stored definition has another version")
	}
	s, _ := stored.State("REVIEW")
	if esc, ok := s.Timer("escalate"); !ok || esc.After != 10*time.Minute || esc.Data["level"] != int64(2) {
		t.Fatalf("stored escalate timer = %+v", esc)
	}
	entered := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	due := s.DueTimers(map[string]any{"due_at": "2026-05-02T17:00:00+02:00"}, entered)
	if len(due) != 2 || !due[0].At.Equal(entered.Add(10*time.Minute)) || !due[1].At.Equal(time.Date(2026, 5, 2, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("stored definition's due timers = %+v", due)
	}
}

func TestDueTimers(t *testing.T) {
	entered := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	b := workflow.New("due-v1", "A")
	b.State("A").
		After(48*time.Hour, "a").
		At("data.due_at", "b").
		At(`date(data.day) - duration("1h")`, "c")
	b.State("Z")
	for _, a := range []string{"a", "b", "c"} {
		b.Transition("A", a, "Z")
	}
	d := b.MustBuild()
	s, _ := d.State("A")

	due := s.DueTimers(map[string]any{"due_at": "2026-05-03T09:30:00Z", "day": "2026-06-01T00:00:00Z"}, entered)
	want := []time.Time{
		entered.Add(48 * time.Hour),
		time.Date(2026, 5, 3, 9, 30, 0, 0, time.UTC),
		time.Date(2026, 5, 31, 23, 0, 0, 0, time.UTC),
	}
	for i, w := range want {
		if due[i].Err != nil || !due[i].At.Equal(w) {
			t.Errorf("timer %s: due %v (%v), want %v", due[i].Timer.Action, due[i].At, due[i].Err, w)
		}
	}

	// An `at` that fails or yields no time is a *TimerError the engine can
	// record; the other timers still get their times.
	for _, tc := range []struct {
		name   string
		data   map[string]any
		notATM bool
		msg    string
	}{
		{"missing", map[string]any{"day": "2026-06-01T00:00:00Z"}, true, "yields nil"},
		{"a number", map[string]any{"due_at": 5, "day": "2026-06-01T00:00:00Z"}, true, "yields int"},
		{"not RFC 3339", map[string]any{"due_at": "next tuesday", "day": "2026-06-01T00:00:00Z"}, true, `"next tuesday" is not an RFC 3339 time`},
		{"after 2262", map[string]any{"due_at": "3000-01-01T00:00:00Z", "day": "2026-06-01T00:00:00Z"}, true, "after 2262-04-11T23:47:16Z"},
		// Within the last second a store keeps: past what GET /runs
		// ?due_before= is clamped to, so a timer there would be listed by
		// no due_before.
		{"the last storable instant", map[string]any{"due_at": "2262-04-11T23:47:16.854775807Z", "day": "2026-06-01T00:00:00Z"}, true, "after 2262-04-11T23:47:16Z"},
	} {
		due := s.DueTimers(tc.data, entered)
		var te *workflow.TimerError
		if !errors.As(due[1].Err, &te) || te.Action != "b" || te.State != "A" || te.At != "data.due_at" {
			t.Errorf("%s: error %v, want a TimerError of timer b", tc.name, due[1].Err)
			continue
		}
		if tc.notATM != errors.Is(due[1].Err, workflow.ErrNotATime) || !strings.Contains(due[1].Err.Error(), tc.msg) {
			t.Errorf("%s: error %q, want one saying %q", tc.name, due[1].Err, tc.msg)
		}
		if due[0].Err != nil || due[2].Err != nil {
			t.Errorf("%s: other timers failed too: %v, %v", tc.name, due[0].Err, due[2].Err)
		}
	}
	// A time before 1970 (the zero time too, which a store cannot keep)
	// is long past: due when the state is entered, by a string or a time.
	for _, day := range []string{"0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z"} {
		due = s.DueTimers(map[string]any{"due_at": day, "day": day}, entered)
		if due[1].Err != nil || !due[1].At.Equal(entered) || due[2].Err != nil || !due[2].At.Equal(entered) {
			t.Errorf("due_at %s: due %v (%v) and %v (%v), want both %v", day, due[1].At, due[1].Err, due[2].At, due[2].Err, entered)
		}
	}
	// An `after` that reaches past 2262 from the entry cannot be stored
	// either (a store keeps nanoseconds since 1970): like such an `at`, it
	// is not set, rather than wrapping round to a time long past and
	// firing at once. (After is at most MaxDelay, 100 years: an entry
	// after 2162.)
	long := workflow.New("long-v1", "A")
	long.State("A").After(workflow.MaxDelay, "a")
	long.State("Z")
	long.Transition("A", "a", "Z")
	ls, _ := long.MustBuild().State("A")
	due = ls.DueTimers(nil, time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))
	var te *workflow.TimerError
	if !errors.As(due[0].Err, &te) || te.Action != "a" || te.After != workflow.MaxDelay ||
		!strings.Contains(due[0].Err.Error(), "after 2262-04-11T23:47:16Z") || !strings.Contains(due[0].Err.Error(), "after 876000h0m0s") {
		t.Errorf("after 36500d from 2200: due %v (%v), want a TimerError saying it is after 2262", due[0].At, due[0].Err)
	}
	// An expression that cannot be evaluated for this data.
	due = s.DueTimers(map[string]any{"due_at": "2026-05-03T09:30:00Z", "day": "someday"}, entered)
	if due[2].Err == nil || !strings.Contains(due[2].Err.Error(), "could not be evaluated") {
		t.Errorf("date(\"someday\"): %v", due[2].Err)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"10m": 10 * time.Minute, "90s": 90 * time.Second, "1h30m": 90 * time.Minute, "300ms": 300 * time.Millisecond,
		"2d": 48 * time.Hour, "1d12h": 36 * time.Hour, "1.5d": 36 * time.Hour, "1d1h1m1s": 25*time.Hour + 61*time.Second,
		"0": 0, "-1d": -24 * time.Hour, " 5m ": 5 * time.Minute,
	} {
		got, err := workflow.ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"999999999d", "100000d100000d", "9000000000s9000000000s", "9999999999999999h"} {
		if got, err := workflow.ParseDuration(in); err == nil || !strings.Contains(err.Error(), "too long a duration: the longest is") {
			t.Errorf("ParseDuration(%q) = %v, %v; want an error saying it is too long", in, got, err)
		}
	}
	for _, in := range []string{"", "10", "d", "1w", "1 d", "tomorrow", "1d-1h", "1..5d", "-", "1..5h"} {
		if got, err := workflow.ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		} else if !strings.Contains(err.Error(), "e.g. 90s, 10m, 2d, 1d12h") {
			t.Errorf("ParseDuration(%q): error %q does not say what a duration looks like", in, err)
		}
	}
}

// wantProblem loads src and checks that it is refused with the problem
// want ("path: message"), at a position in the file.
func wantProblem(t *testing.T, name, src, want string) {
	t.Helper()
	_, err := workflow.Load("w.yaml", []byte(src), nil)
	if err == nil {
		t.Errorf("%s: loaded, want %q", name, want)
		return
	}
	if !regexp.MustCompile(`(?m)^w\.yaml:[1-9][0-9]*:[1-9][0-9]*: ` + regexp.QuoteMeta(want)).MatchString(err.Error()) {
		t.Errorf("%s: want %q with its position in:\n%v", name, want, err)
	}
}

func TestTimerProblems(t *testing.T) {
	head := "workflow_id: t-v1\ninitial_state: A\ntransitions:\n  - {from: A, action: go, to: B, expects: {n: integer, s: {type: string, maxLength: 3}}}\n  - {from: A, action: stop, to: B}\nstates:\n  B: {}\n  A:\n    timers:\n"
	for name, tc := range map[string]struct{ timer, want string }{
		"bad duration":    {"      - {after: 10, action: stop}", `states.A.timers[0].after: "10" is not a duration`},
		"zero duration":   {"      - {after: 0s, action: stop}", `states.A.timers[0].after: after must be more than 0, got 0s`},
		"negative":        {"      - {after: -5m, action: stop}", `states.A.timers[0].after: after must be more than 0`},
		"past storable":   {"      - {after: 36501d, action: stop}", `states.A.timers[0].after: after 876024h0m0s is more than 36500d (100 years)`},
		"neither":         {"      - {action: stop}", `states.A.timers[0]: a timer needs after`},
		"both":            {"      - {after: 5m, at: data.x, action: stop}", `states.A.timers[0]: a timer has after (a duration) or at`},
		"at syntax":       {"      - {at: 'data.x +', action: stop}", `states.A.timers[0].at: at expression cannot yield a time`},
		"at not a time":   {"      - {at: '1 + 2', action: stop}", `states.A.timers[0].at: at expression cannot yield a time: the expression does not yield a time: it yields int`},
		"no action":       {"      - {after: 5m}", `states.A.timers[0].action: a timer needs an action: the transition from state A it fires (it has: go, stop)`},
		"unknown action":  {"      - {after: 5m, action: fly}", `states.A.timers[0].action: timer names action "fly", but state A has no such transition (it has: go, stop)`},
		"two for one":     {"      - {after: 5m, action: stop}\n      - {after: 9m, action: stop}", `states.A.timers[1].action: state A has a timer for action "stop" already`},
		"unexpected data": {"      - {after: 5m, action: go, data: {n: 1, x: 2}}", `states.A.timers[0].data.x: action "go" does not expect field "x"`},
		"data to none":    {"      - {after: 5m, action: stop, data: {x: 2}}", `states.A.timers[0].data.x: action "stop" expects no input`},
		"data type":       {"      - {after: 5m, action: go, data: {n: ten}}", `states.A.timers[0].data.n: action "go" expects field "n" to be integer, got string`},
		"data bound":      {"      - {after: 5m, action: go, data: {s: abcd}}", `states.A.timers[0].data.s: Field "s" must be at most 3 characters`},
	} {
		wantProblem(t, name, head+tc.timer+"\n", tc.want)
	}
	if _, err := workflow.Load("w.yaml", []byte(head+"      - {after: 5m, action: stop, when: 3}\n"), nil); err == nil || !strings.Contains(err.Error(), `w.yaml:10:35: states.A.timers[0].when: unknown field "when"`) {
		t.Errorf("unknown timer field: %v", err)
	}
	// Fields the timer leaves out may come from the run's data.
	if _, err := workflow.Load("w.yaml", []byte(head+"      - {after: 5m, action: go, data: {n: 1}}\n"), nil); err != nil {
		t.Errorf("a timer giving some expected fields: %v", err)
	}
	// The builder is held to the same rules.
	b := workflow.New("t-v1", "A")
	b.State("A").After(-time.Minute, "go").At("data.x", "nope")
	b.State("B")
	b.Transition("A", "go", "B")
	_, err := b.Build()
	if err == nil || !strings.Contains(err.Error(), "states.A.timers[0].after: after must be more than 0") || !strings.Contains(err.Error(), `states.A.timers[1].action: timer names action "nope"`) {
		t.Errorf("builder timers: %v", err)
	}
}

// Graphs say which transitions a timer fires, and when.
func TestGraphsNameTimers(t *testing.T) {
	d, err := workflow.Load("deploy.yaml", []byte(timersYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := d.Mermaid("")
	for _, want := range []string{"REVIEW --> EXPIRED : expire [at data.due_at]", "ESCALATED --> EXPIRED : expire [after 36h0m0s]", "REVIEW --> DONE : approve\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, m)
		}
	}
	if dot := d.DOT(""); !strings.Contains(dot, `"REVIEW" -> "ESCALATED" [label="escalate\n(level: integer, note: string)\n[after 10m0s]"]`) {
		t.Errorf("dot lacks the escalate timer:\n%s", dot)
	}
}

// A task's on_success and on_failure are fired by the task alone; a
// timeout on a task is a transition of its own.
func TestTimerCannotFireATasksAction(t *testing.T) {
	src := `workflow_id: t-v1
initial_state: DEPLOY
states:
  DEPLOY:
    task: {row: DEPLOY_ROW, on_success: deployed, on_failure: failed}
    timers: [{after: 30m, action: failed}]
  DONE: {}
  FAILED: {}
transitions:
  - {from: DEPLOY, action: deployed, to: DONE}
  - {from: DEPLOY, action: failed, to: FAILED}
  - {from: DEPLOY, action: abandon, to: FAILED}
`
	wantProblem(t, "on_failure", src, `states.DEPLOY.timers[0].action: action "failed" is the task's; only the task fires it`)
	wantProblem(t, "on_success", strings.Replace(src, "action: failed}]", "action: deployed}]", 1), `states.DEPLOY.timers[0].action: action "deployed" is the task's`)
	if _, err := workflow.Load("w.yaml", []byte(strings.Replace(src, "action: failed}]", "action: abandon}]", 1)), nil); err != nil {
		t.Errorf("a timeout with its own transition: %v", err)
	}
}

// A timer's body: its own data over the run's, for the fields the action
// expects.
func TestTimerBody(t *testing.T) {
	tm := &workflow.Timer{After: time.Minute, Action: "escalate", Data: map[string]any{"level": int64(2)}}
	expects := map[string]string{"level": "integer", "note": "string", "owner": "string"}
	got := tm.Body(expects, map[string]any{"level": int64(1), "note": "from the run", "other": true})
	want := map[string]any{"level": int64(2), "note": "from the run"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Body = %#v, want %#v (owner is in neither, so the action's check will name it)", got, want)
	}
	if got := tm.Body(nil, map[string]any{"x": 1}); len(got) != 0 {
		t.Errorf("Body of an action expecting nothing = %#v", got)
	}
}

// FormatDuration spells a duration in its largest whole unit, as files
// write them, and ParseDuration reads it back.
func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{48 * time.Hour: "48h", 90 * time.Minute: "90m", 90 * time.Second: "90s", 1500 * time.Millisecond: "1.5s", 0: "0h"} {
		got := workflow.FormatDuration(d)
		if got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := workflow.ParseDuration(got); err != nil || back != d {
			t.Errorf("ParseDuration(%q) = %v, %v, want %v", got, back, err, d)
		}
	}
}

// An `at` expression is evaluated within the bounds of a guard's (steps,
// time, memory): it runs in the commit that enters its state and again for
// every frame of the run's event log, so an expression that is quadratic
// in the run's data is stopped, and the timer is not set, saying why.
func TestDueTimerAtIsBounded(t *testing.T) {
	b := workflow.New("slow-v1", "A")
	b.State("A").At("none(data.a, {# in data.b}) ? data.due : data.due", "go")
	b.State("Z")
	b.Transition("A", "go", "Z")
	s, _ := b.MustBuild().State("A")
	a, bs := make([]any, 10000), make([]any, 10000)
	for i := range a {
		a[i], bs[i] = int64(i), int64(i+10000)
	}
	start := time.Now()
	due := s.DueTimers(map[string]any{"a": a, "b": bs, "due": "2030-01-01T00:00:00Z"}, time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	var te *workflow.TimerError
	if !errors.As(due[0].Err, &te) || !strings.Contains(due[0].Err.Error(), "was stopped") {
		t.Fatalf("quadratic at: due %v (%v) after %s, want a TimerError saying it was stopped", due[0].At, due[0].Err, time.Since(start))
	}
	// Within the bounds it yields its time as before.
	due = s.DueTimers(map[string]any{"a": a[:10], "b": bs[:10], "due": "2030-01-01T00:00:00Z"}, time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	if due[0].Err != nil || !due[0].At.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("small data: due %v (%v)", due[0].At, due[0].Err)
	}
}
