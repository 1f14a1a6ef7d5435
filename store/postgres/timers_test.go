package postgres_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/storetest"
)

// withRuns claims through ClaimDueTimersWithRuns and checks that each
// timer comes with its run's current value.
type withRuns struct {
	*postgres.Store
	t *testing.T
}

func (w withRuns) ClaimDueTimers(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Timer, error) {
	ts, runs, err := w.ClaimDueTimersWithRuns(ctx, now, limit, owner, leaseUntil)
	if err != nil {
		return nil, err
	}
	if len(runs) != len(ts) {
		w.t.Errorf("%d runs for %d timers", len(runs), len(ts))
		return ts, nil
	}
	for i, tm := range ts {
		want, err := w.GetRun(ctx, tm.RunID)
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(runs[i], want) {
			w.t.Errorf("timer %s came with run %+v, want %+v", tm.ID, runs[i], want)
		}
	}
	return ts, nil
}

// ClaimDueTimersWithRuns claims like ClaimDueTimers (each timer once,
// across replicas and claimers of both kinds, in due order) and returns
// each timer with its run as stored: here runs at several versions, whose
// timers' due order is not their runs' order.
func TestClaimDueTimersWithRuns(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a, b := open(t, u, schema, nil), open(t, u, schema, nil)
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const runs, each = 40, 5
	for i := range runs {
		c := storetest.NewRun(fmt.Sprintf("r%03d", i))
		for j := range each {
			c.Timers = append(c.Timers, storetest.At(fmt.Sprintf("a%d", j), t0.Add(time.Duration((runs-i)*each+j*7)*time.Millisecond), ""))
		}
		if err := a.CreateRun(ctx, c); err != nil {
			t.Fatal(err)
		}
		for v := int64(1); v <= int64(i%3); v++ { // a commit that keeps the timers
			next := storetest.Next(c.Run, "tick", "START", fmt.Sprintf(`{"v":%d}`, v))
			if err := a.CommitRun(ctx, c.Run.Version, next).Wait(); err != nil {
				t.Fatal(err)
			}
			c.Run = next.Run
		}
	}
	now := t0.Add(time.Minute)
	claimers := []store.TimerStore{withRuns{a, t}, b, withRuns{b, t}, a}
	if got := storetest.ClaimAllTimers(t, claimers, now); len(got) != runs*each {
		t.Fatalf("claimed %d timers, want %d", len(got), runs*each)
	}
	if ts, rs, err := a.ClaimDueTimersWithRuns(ctx, now, 10, "late", now.Add(time.Hour)); err != nil || len(ts) != 0 || len(rs) != 0 {
		t.Fatalf("a claim after all were claimed = %v, %v, %v; want none", ts, rs, err)
	}
}
