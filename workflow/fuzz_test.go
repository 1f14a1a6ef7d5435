package workflow_test

import (
	"os"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/workflow"
)

// FuzzLoad feeds arbitrary bytes to the workflow file loader: it must
// return a definition or an error, never panic, and a definition it returns
// must be internally consistent.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"testdata/config-wizard.yaml", "testdata/broken.yaml", "testdata/time.yaml", "testdata/alias-bomb.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"workflow_id":"a-b","initial_state":"A","states":{"A":{}},"transitions":[]}`))
	f.Add([]byte("workflow_id: a\nstates: !!binary xx\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := workflow.Load("fuzz.yaml", src, nil)
		if err != nil {
			return
		}
		if _, ok := d.State(d.InitialState); !ok {
			t.Fatalf("loaded definition's initial state %q is undeclared", d.InitialState)
		}
		for _, tr := range d.Transitions {
			if _, ok := d.State(tr.To); !ok {
				t.Fatalf("transition to undeclared %q", tr.To)
			}
		}
		_ = d.Mermaid(d.InitialState)
		_ = d.DOT("")
		// Timers, retries and schedules of a loaded definition work for
		// any data: an error value, never a panic.
		entered := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, s := range d.States {
			for _, due := range s.DueTimers(map[string]any{"due_at": "2026-01-02T00:00:00Z", "n": 1}, entered) {
				if due.Err == nil && due.Timer.At == "" && !due.At.After(entered) {
					t.Fatalf("timer %s of %s is due at %v, not after entering at %v", due.Timer.Action, s.Name, due.At, entered)
				}
			}
			if s.Task != nil && s.Task.Retry != nil {
				for a := 1; a <= s.Task.Retry.MaxAttempts && a < 100; a++ {
					if w := s.Task.Retry.Delay(a, nil); w < 0 || w > s.Task.Retry.MaxBackoff {
						t.Fatalf("retry wait %v after attempt %d is outside [0, %v]", w, a, s.Task.Retry.MaxBackoff)
					}
				}
			}
		}
		for _, sc := range d.Schedules {
			next := sc.Next(entered)
			if !next.IsZero() && !next.After(entered) {
				t.Fatalf("schedule %q: Next(%v) = %v", sc.Cron, entered, next)
			}
			_, _ = sc.Missed(entered, entered.Add(48*time.Hour))
		}
	})
}
