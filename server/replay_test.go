package server_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/workflow"
)

// guardedLoop is a workflow whose "finish" is offered while open holds: a
// guard that answers differently later, as one reading the clock does.
func guardedLoop(open *atomic.Bool) *workflow.Definition {
	b := workflow.New("guarded-loop-v1", "LOOP")
	b.State("LOOP").Hint("Tick.").Milestone("looping")
	b.State("DONE").Hint("Done.")
	b.Transition("LOOP", "tick", "LOOP").Expects(map[string]string{"n": "integer"})
	b.Transition("LOOP", "finish", "DONE").Guard(func(map[string]any) (bool, string) {
		return open.Load(), "closed now"
	})
	b.Transition("LOOP", "stop", "DONE")
	return b.MustBuild()
}

// A stream resumed from the start shows exactly the lines a live
// subscriber saw, byte for byte, although the guard of "finish" answers
// otherwise by then and the events keep only their changes.
func TestReplayedStreamEqualsLive(t *testing.T) {
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			var open atomic.Bool
			open.Store(true)
			e := start(t, setup{defs: []*workflow.Definition{guardedLoop(&open)}, newStor: backends[name]})
			id := e.do("POST", "/runs", map[string]any{"data": map[string]any{"blob": strings.Repeat("b", 20000)}}).json(t)["run_id"].(string)
			live := e.openStream("/runs/" + id + "/stream")
			live.nextRaw(t) // the current frame (id 1)
			var lines []string
			for i := 1; i <= 30; i++ {
				frame(t, e.fire(id, "tick", map[string]any{"n": i}), 200)
				lines = append(lines, live.nextRaw(t))
			}
			open.Store(false)
			frame(t, e.fire(id, "stop", nil), 200)
			lines = append(lines, live.nextRaw(t))
			if !strings.Contains(lines[0], `"action":"finish"`) {
				t.Fatalf("live frames did not offer finish while the guard allowed it: %.300s", lines[0])
			}
			replay := e.openStream("/runs/"+id+"/stream", "Last-Event-ID", "1")
			for i, want := range lines {
				if got := replay.nextRaw(t); got != want {
					t.Fatalf("replayed line %d differs from the live one:\n%.400s\nlive:\n%.400s", i, got, want)
				}
			}
			replay.ended(t, 5*time.Second)
		})
	}
}

// nextRaw returns the next line that is not a heartbeat, as sent.
func (sc *streamConn) nextRaw(t *testing.T) string {
	t.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-sc.lines:
			if !ok {
				t.Fatalf("stream ended while waiting for a line")
			}
			raw := <-sc.raw
			if m["heartbeat"] == true {
				continue
			}
			checkStreamFrame(t, raw)
			return raw
		case <-timer.C:
			t.Fatalf("no stream line within 5s")
		}
	}
}
