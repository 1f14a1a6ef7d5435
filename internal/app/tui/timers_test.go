package tui_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/client/embedded"
	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/app/tui"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

var timerT0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// timerBackends serve a review whose REVIEW state escalates after 10
// minutes, on engines with the fake clock fc: a local engine and a real
// HTTP server.
func timerBackends(t *testing.T, fc *clock.Fake) map[string]client.Backend {
	t.Helper()
	b := workflow.New("review-v1", "REVIEW")
	b.State("REVIEW").Timer(workflow.Timer{After: 10 * time.Minute, Action: "escalate"})
	b.State("DONE")
	b.Transition("REVIEW", "touch", "REVIEW")
	b.Transition("REVIEW", "approve", "DONE")
	b.Transition("REVIEW", "escalate", "DONE")
	def, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	eng := func() *engine.Engine {
		e, err := engine.New(memstore.New(), []*workflow.Definition{def}, &engine.Options{Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	srv := server.New(eng(), nil)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	c, err := client.New(ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]client.Backend{"local": embedded.New(eng()), "http": c}
}

// asmp attach shows each pending timer with the time left, from the
// frame's timer links; a change another client makes re-arms it on screen
// (through the stream), and it is gone once the run leaves the state.
func TestAttachShowsTimers(t *testing.T) {
	fc := clock.NewFake(timerT0)
	for name, b := range timerBackends(t, fc) {
		t.Run(name, func(t *testing.T) {
			due := fc.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
			run, err := b.StartRun(t.Context(), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			tm := start(t, tui.Options{Backend: b, RunID: run.RunID, Now: fc.Now})
			screen(t, tm, "timer escalate in 10m0s (at "+due+")")
			fc.Advance(2 * time.Second)
			screen(t, tm, "timer escalate in 9m58s (at "+due+")") // redrawn as time passes
			if _, err := b.Transition(t.Context(), run.RunID, "touch", nil, nil); err != nil {
				t.Fatal(err)
			}
			rearmed := fc.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
			screen(t, tm, "timer escalate in 10m0s (at "+rearmed+")")
			if _, err := b.Transition(t.Context(), run.RunID, "approve", nil, nil); err != nil {
				t.Fatal(err)
			}
			screen(t, tm, "State:  DONE")
			tm.Quit()
		})
	}
}

// The plain UI prints the timers under the options.
func TestPlainShowsTimers(t *testing.T) {
	fc := clock.NewFake(timerT0)
	for name, b := range timerBackends(t, fc) {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if _, err := tui.RunPlain(t.Context(), tui.Options{Backend: b, In: strings.NewReader("q\n"), Out: &out, ASCII: true, Now: fc.Now}); err != nil {
				t.Fatal(err)
			}
			due := fc.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
			if !strings.Contains(out.String(), "\ntimer escalate in 10m0s (at "+due+")\n") {
				t.Fatalf("plain UI without the timer due at %s:\n%s", due, out.String())
			}
		})
	}
}
