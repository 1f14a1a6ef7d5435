package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// Claiming due timers and finding the next one walk timers_ready from its
// start: no scan of the pending timers and no sort, so a claim costs the
// timers it takes whatever the number pending.
func TestTimerClaimUsesItsIndex(t *testing.T) {
	s := openPlanStore(t)
	now := time.Unix(100, 0)
	for name, q := range map[string][]any{
		claimTimersQuery: {now, 100, "w", now.Add(time.Minute)},
		nextTimerQuery:   nil,
	} {
		plan := explain(t, s, name, q...)
		if !strings.Contains(plan, "using timers_ready") || strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("plan of\n%s\n%s\nwant a walk of timers_ready, no sort", name, plan)
		}
	}
}

// A list of the runs due before a time reads the timers due before it
// through timers_due and looks their runs up by id: it never walks the
// runs, nor every timer.
func TestDueBeforeListUsesTimersDue(t *testing.T) {
	s := openPlanStore(t)
	for _, f := range []store.RunFilter{
		{DueBefore: time.Unix(100, 0), Limit: 50},
		{DueBefore: time.Unix(100, 0), WorkflowID: "wf", State: "S", Limit: 50, Before: store.RunCursor{UpdatedAt: time.Unix(5, 0), ID: "x"}},
	} {
		q, args := listRunsQuery(f)
		plan := explain(t, s, q, args...)
		if !strings.Contains(plan, "using timers_due") || !strings.Contains(plan, "using runs_pkey") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "runs_updated") || strings.Contains(plan, "runs_list") {
			t.Errorf("plan of %+v:\n%s\nwant a walk of timers_due and lookups of runs by id", f, plan)
		}
	}
}

// A commit that enters a state finds the run's old timers through
// timers_run.
func TestTimerVoidUsesTimersRun(t *testing.T) {
	s := openPlanStore(t)
	if plan := explain(t, s, `DELETE FROM timers WHERE run_id = $1`, "r"); !strings.Contains(plan, "timers_run") {
		t.Fatalf("plan of voiding a run's timers:\n%s", plan)
	}
}

// Claiming a task walks tasks_ready from its start: no walk of the tasks
// waiting out a backoff or a live lease, and no sort.
func TestTaskClaimUsesItsIndex(t *testing.T) {
	s := openPlanStore(t)
	now := time.Unix(100, 0)
	for _, wfs := range [][]string{nil, {"wf"}} {
		plan := explain(t, s, claimTaskQuery, now, "w", now.Add(time.Minute), wfs)
		if !strings.Contains(plan, "tasks_ready") || strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan on tasks") {
			t.Errorf("plan of the task claim (workflows %v):\n%s\nwant a walk of tasks_ready, no sort", wfs, plan)
		}
	}
}
