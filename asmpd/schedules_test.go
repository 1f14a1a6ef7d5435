package asmpd_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/asmpd"
	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/workflow"
)

func scheduledFlow(t *testing.T, cron string) *workflow.Definition {
	t.Helper()
	b := workflow.New("nightly", "RUN")
	b.State("RUN")
	b.State("DONE")
	b.Transition("RUN", "finish", "DONE")
	if cron != "" {
		b.Schedule(workflow.Schedule{Cron: cron})
	}
	return b.MustBuild()
}

// A served file's schedule is stored at start and starts its runs while
// the server runs; a restart with a file that dropped it deletes it.
func TestServerStartsScheduledRuns(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "sched.db")
	fc := clock.NewFake(time.Date(2026, 5, 4, 9, 0, 30, 0, time.UTC))
	def := scheduledFlow(t, "*/5 * * * *")
	d := open(t, asmpd.Config{DB: db, Workflows: []*workflow.Definition{def}, Clock: fc})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	fc.Advance(4*time.Minute + 30*time.Second)
	want := engine.ScheduleRunID(def.Schedules[0].Key(), time.Date(2026, 5, 4, 9, 5, 0, 0, time.UTC))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := d.Engine().GetRun(t.Context(), want); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the schedule's run of 09:05 was not started within 10s of the clock reaching it")
		}
		time.Sleep(5 * time.Millisecond) // the loop's goroutine, not the clock
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d.Close()

	d2 := open(t, asmpd.Config{DB: db, Workflows: []*workflow.Definition{scheduledFlow(t, "")}, Clock: fc})
	ss, err := d2.Engine().ListSchedules(t.Context(), "", 0)
	if err != nil || len(ss) != 0 {
		t.Fatalf("schedules after a restart with a file without them = %+v, %v; want none", ss, err)
	}
}
