package workflow_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/workflow"
)

const retryYAML = `workflow_id: flaky-v1
initial_state: RUN
states:
  RUN:
    task: {row: FLAKY, on_success: done, on_failure: failed,
           retry: {max_attempts: 5, backoff: 2s, max_backoff: 1m, jitter: true}}
  DONE: {}
  FAILED: {}
transitions:
  - {from: RUN, action: done, to: DONE}
  - {from: RUN, action: failed, to: FAILED}
`

func TestRetryFromFileAndBuilder(t *testing.T) {
	f, err := workflow.Load("flaky.yaml", []byte(retryYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := f.State("RUN")
	want := workflow.RetryPolicy{MaxAttempts: 5, Backoff: 2 * time.Second, MaxBackoff: time.Minute, Jitter: true}
	if r := s.Task.Retry; r == nil || r.MaxAttempts != want.MaxAttempts || r.Backoff != want.Backoff || r.MaxBackoff != want.MaxBackoff || !r.Jitter {
		t.Fatalf("retry = %+v, want %+v", r, want)
	}
	b := workflow.New("flaky-v1", "RUN")
	b.State("RUN").RowTask("FLAKY", "done", "failed").TaskRetry(want)
	b.State("DONE")
	b.State("FAILED")
	b.Transition("RUN", "done", "DONE")
	b.Transition("RUN", "failed", "FAILED")
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if g.Version() != f.Version() {
		t.Fatalf("file and builder differ:\n%s\n%s", f.Canonical(), g.Canonical())
	}
	// The policy is part of the version, and a stored version keeps it.
	noRetry, _ := workflow.Load("flaky.yaml", []byte(strings.Replace(retryYAML, ",\n           retry: {max_attempts: 5, backoff: 2s, max_backoff: 1m, jitter: true}", "", 1)), nil)
	if noRetry == nil || noRetry.Version() == f.Version() {
		t.Fatal("dropping the retry policy kept the version")
	}
	stored, err := workflow.LoadStored(f.Canonical(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ss, _ := stored.State("RUN"); ss.Task.Retry == nil || ss.Task.Retry.MaxAttempts != 5 || ss.Task.Retry.Backoff != want.Backoff || ss.Task.Retry.MaxBackoff != want.MaxBackoff || !ss.Task.Retry.Jitter {
		t.Fatalf("stored retry = %+v, want %+v", ss.Task.Retry, s.Task.Retry)
	}
	// Without max_backoff the cap is 100 × backoff, written into the
	// version: leaving it out and writing it are one version.
	implicit, err := workflow.Load("flaky.yaml", []byte(strings.Replace(retryYAML, "max_backoff: 1m", "max_backoff: 200s", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	omitted, err := workflow.Load("flaky.yaml", []byte(strings.Replace(retryYAML, "max_backoff: 1m, ", "", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if os, _ := omitted.State("RUN"); os.Task.Retry.MaxBackoff != 200*time.Second {
		t.Errorf("default max_backoff = %v, want 200s", os.Task.Retry.MaxBackoff)
	}
	if implicit.Version() != omitted.Version() {
		t.Error("max_backoff left out and written as 100 × backoff have different versions")
	}
}

func TestRetryProblems(t *testing.T) {
	src := func(retry string) string {
		return strings.Replace(retryYAML, "max_attempts: 5, backoff: 2s, max_backoff: 1m, jitter: true", retry, 1)
	}
	for name, tc := range map[string]struct{ retry, want string }{
		"no attempts":  {"max_attempts: 0, backoff: 2s", `states.RUN.task.retry.max_attempts: max_attempts must be at least 1`},
		"no backoff":   {"max_attempts: 3", `states.RUN.task.retry.backoff: backoff must be more than 0`},
		"zero backoff": {"max_attempts: 3, backoff: 0s", `states.RUN.task.retry.backoff: backoff must be more than 0`},
		"bad backoff":  {"max_attempts: 3, backoff: soon", `states.RUN.task.retry.backoff: "soon" is not a duration`},
		"bad max":      {"max_attempts: 3, backoff: 2s, max_backoff: 1y", `states.RUN.task.retry.max_backoff: "1y" is not a duration`},
		"max < base":   {"max_attempts: 3, backoff: 2s, max_backoff: 1s", `states.RUN.task.retry.max_backoff: max_backoff 1s is less than backoff 2s`},
		"zero max":     {"max_attempts: 3, backoff: 2s, max_backoff: 0s", `states.RUN.task.retry.max_backoff: max_backoff 0s is less than backoff 2s`},
		"fraction":     {"max_attempts: 2.9, backoff: 2s", `states.RUN.task.retry.max_attempts: max_attempts must be a whole number of attempts, got 2.9`},
		"too many":     {"max_attempts: 10001, backoff: 2s", `states.RUN.task.retry.max_attempts: max_attempts must be at most 10000`},
		"backoff 2262": {"max_attempts: 3, backoff: 106751d", `states.RUN.task.retry.backoff: backoff 2562024h0m0s is more than 36500d (100 years)`},
		"max 2262":     {"max_attempts: 3, backoff: 1d, max_backoff: 73000d", `states.RUN.task.retry.max_backoff: max_backoff 1752000h0m0s is more than 36500d (100 years)`},
	} {
		wantProblem(t, name, src(tc.retry), tc.want)
	}
	b := workflow.New("flaky-v1", "RUN")
	b.State("RUN").RowTask("FLAKY", "done", "").TaskRetry(workflow.RetryPolicy{MaxAttempts: 2, Backoff: -time.Second})
	b.State("DONE")
	b.Transition("RUN", "done", "DONE")
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "states.RUN.task.retry.backoff: backoff must be more than 0") {
		t.Errorf("builder retry: %v", err)
	}
}

// A retry's wait never passes MaxDelay, however its doubling grows: the
// time an event names is the time the retry is stored to start at.
func TestRetryDelayNeverPassesMaxDelay(t *testing.T) {
	p := workflow.RetryPolicy{MaxAttempts: 40, Backoff: workflow.MaxDelay / 2}
	for attempt := 1; attempt < 40; attempt++ {
		if d := p.Delay(attempt, nil); d <= 0 || d > workflow.MaxDelay {
			t.Fatalf("Delay(%d) = %v, want within (0, %v]", attempt, d, workflow.MaxDelay)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	p := workflow.RetryPolicy{MaxAttempts: 10, Backoff: 2 * time.Second, MaxBackoff: time.Minute}
	for attempt, want := range map[int]time.Duration{
		-1: 2 * time.Second, 0: 2 * time.Second, 1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second,
		4: 16 * time.Second, 5: 32 * time.Second, 6: time.Minute, 7: time.Minute, 1000: time.Minute, 1 << 40: time.Minute,
	} {
		if got := p.Delay(attempt, nil); got != want {
			t.Errorf("Delay(%d) = %v, want %v", attempt, got, want)
		}
	}
	// A cap below the first wait (which validation refuses) still caps.
	if got := (workflow.RetryPolicy{MaxAttempts: 3, Backoff: 10 * time.Second, MaxBackoff: 5 * time.Second}).Delay(1, nil); got != 5*time.Second {
		t.Errorf("Delay with max_backoff below backoff = %v, want 5s", got)
	}
	// No cap given: 100 × backoff, and no overflow however many attempts.
	huge := workflow.RetryPolicy{MaxAttempts: 3, Backoff: time.Duration(1 << 60)}
	if got := huge.Delay(100, nil); got <= 0 {
		t.Errorf("Delay overflowed: %v", got)
	}
	if got := (workflow.RetryPolicy{MaxAttempts: 3, Backoff: time.Second}).Delay(50, nil); got != 100*time.Second {
		t.Errorf("default cap: %v, want 100s", got)
	}

	// Full jitter: the computed wait times rnd() in [0, 1).
	j := p
	j.Jitter = true
	for _, tc := range []struct {
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{1, 0, 0}, {1, 0.5, time.Second}, {3, 0.25, 2 * time.Second}, {9, 0.5, 30 * time.Second},
		{3, 1, 0}, {3, -0.5, 0}, // out of range: the shortest wait
	} {
		if got := j.Delay(tc.attempt, func() float64 { return tc.rnd }); got != tc.want {
			t.Errorf("jittered Delay(%d) with rnd %v = %v, want %v", tc.attempt, tc.rnd, got, tc.want)
		}
	}
	for range 100 {
		if got := j.Delay(4, nil); got < 0 || got >= 16*time.Second {
			t.Fatalf("jittered Delay(4) = %v, outside [0, 16s)", got)
		}
	}
}

// A task that always fails, retried on a fake clock: five attempts at 0s,
// 2s, 6s, 14s and 30s, then the failure action, nothing after.
func TestRetryCountsAndTiming(t *testing.T) {
	p := &workflow.RetryPolicy{MaxAttempts: 5, Backoff: 2 * time.Second, MaxBackoff: time.Minute}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clock.NewFake(start)
	var attempts []time.Duration
	failedAt := time.Duration(-1)
	var attempt func(n int)
	attempt = func(n int) {
		attempts = append(attempts, c.Now().Sub(start))
		// The attempt fails.
		wait, again := p.Next(n, nil)
		if !again {
			failedAt = c.Now().Sub(start)
			return
		}
		c.AfterFunc(wait, func() { attempt(n + 1) })
	}
	attempt(1)
	c.Advance(time.Hour)
	want := []time.Duration{0, 2 * time.Second, 6 * time.Second, 14 * time.Second, 30 * time.Second}
	if len(attempts) != len(want) {
		t.Fatalf("attempts at %v, want %v", attempts, want)
	}
	for i := range want {
		if attempts[i] != want[i] {
			t.Fatalf("attempts at %v, want %v", attempts, want)
		}
	}
	if failedAt != 30*time.Second || c.Pending() != 0 {
		t.Errorf("failure action at %v with %d timers pending; want at 30s, none", failedAt, c.Pending())
	}
	// No policy: one attempt.
	var none *workflow.RetryPolicy
	if _, again := none.Next(1, nil); again {
		t.Error("a task without a retry policy is retried")
	}
}

// A value of the wrong kind in a file is named in the file's terms, with
// its position, never with the loader's Go types.
func TestFileTypeErrorsInPlainWords(t *testing.T) {
	for from, want := range map[string]string{
		"jitter: true":    `jitter: "yes"`,
		"max_attempts: 5": `max_attempts: "five"`,
		"backoff: 2s":     `backoff: [2]`,
	} {
		_, err := workflow.Load("flaky.yaml", []byte(strings.Replace(retryYAML, from, want, 1)), nil)
		if err == nil {
			t.Errorf("%s: loaded", want)
			continue
		}
		msg := err.Error()
		wantMsg := map[string]string{`jitter: "yes"`: "expected true or false here, not a string", `max_attempts: "five"`: "expected a whole number here, not a string",
			`backoff: [2]`: "expected a string here, not a list"}[want]
		if !strings.Contains(msg, wantMsg) || strings.Contains(msg, "Go struct") || !regexp.MustCompile(`\[\d+:\d+\]`).MatchString(msg) {
			t.Errorf("%s: %q, want %q with its position and no Go types", want, msg, wantMsg)
		}
	}
}
