package sqlite

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
	for name, q := range map[string]string{
		"claim":      claimTimersQuery,
		"next timer": nextTimerQuery,
	} {
		var args []any
		if name == "claim" {
			args = []any{"w", 9, 5, 100}
		}
		p := queryPlan(t, q, args...)
		if !strings.Contains(p, "INDEX timers_ready") || strings.Contains(p, "SCAN timers;") || strings.HasSuffix(p, "SCAN timers") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("plan of the %s: %s", name, p)
		}
	}
}

// A list of the runs due before a time reads the timers due before it
// through timers_due and looks their runs up by id: it never walks the
// runs, nor every timer.
func TestDueBeforeListUsesTimersDue(t *testing.T) {
	for _, f := range []store.RunFilter{
		{DueBefore: time.Unix(100, 0), Limit: 50},
		{DueBefore: time.Unix(100, 0), WorkflowID: "wf", State: "S", Limit: 50, Before: store.RunCursor{UpdatedAt: time.Unix(5, 0), ID: "x"}},
	} {
		q, args := listRunsQuery(f)
		p := queryPlan(t, q, args...)
		if !strings.Contains(p, "INDEX timers_due") || strings.Contains(p, "SCAN runs") || strings.Contains(p, "SCAN timers") {
			t.Errorf("plan of %+v: %s", f, p)
		}
	}
}

// A commit that enters a state finds the run's old timers as a range of
// the primary key (their ids begin with the run's), not by a scan.
func TestTimerVoidUsesThePrimaryKey(t *testing.T) {
	if p := queryPlan(t, voidTimersQuery, runTimersArgs("r")...); !strings.Contains(p, "PRIMARY KEY (id>? AND id<?)") {
		t.Fatalf("plan of voiding a run's timers: %s", p)
	}
}
