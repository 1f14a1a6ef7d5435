package main_test

import (
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The served binary fires state timers: runs whose deadline has passed
// expire as actor "timer", exactly once, also when the server is killed
// with -9 right after storing them (whichever of the two processes fires
// them). The engine's tests cover a timer that falls due while the server
// is down (with a fake clock); here the real binary's loop does the work.
func TestTimersFireInTheServedBinaryAcrossKill9(t *testing.T) {
	db := filepath.Join(t.TempDir(), "asmp.db")
	p := serve(t, "--db", db, "testdata/deadline.yaml")
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	const runs = 20
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = frameOf(t, p.do("POST", "/runs", map[string]any{"data": map[string]any{"due_at": past}}), 201).RunID
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	q := serve(t, "--db", db, "testdata/deadline.yaml")
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range ids {
		for {
			f := frameOf(t, q.do("GET", "/runs/"+id, nil), 200)
			if f.State == "EXPIRED" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s is still in %s after restart:\n%s", id, f.State, q.stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		var log struct {
			Events []struct {
				Kind, Action, Actor string
			} `json:"events"`
		}
		if err := json.Unmarshal(q.do("GET", "/runs/"+id+"/events", nil).body, &log); err != nil {
			t.Fatal(err)
		}
		fired := 0
		for _, e := range log.Events {
			if e.Actor == "timer" {
				fired++
				if e.Action != "expire" || e.Kind != "transition" {
					t.Fatalf("run %s: timer event %+v", id, e)
				}
			}
		}
		if fired != 1 || len(log.Events) != 2 {
			t.Fatalf("run %s: events %+v, want created and one expire by the timer", id, log.Events)
		}
	}
}
