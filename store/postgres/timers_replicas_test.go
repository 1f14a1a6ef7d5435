package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/storetest"
)

// Two replicas (two stores on one schema), each with two claimers, claim
// 1,000 timers due at once: each is claimed exactly once, in due order;
// once the leases end, each is claimed exactly once again; a commit on
// one replica that leaves the state voids the run's timers for both.
func TestReplicasClaimTimersOnce(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a, b := open(t, u, schema, nil), open(t, u, schema, nil)
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const runs, each = 100, 10
	var first store.Commit
	for i := range runs {
		c := storetest.NewRun(fmt.Sprintf("r%03d", i))
		for j := range each {
			c.Timers = append(c.Timers, storetest.At(fmt.Sprintf("a%d", j), t0.Add(time.Duration(i*each+j)*time.Millisecond), ""))
		}
		if err := a.CreateRun(ctx, c); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = c
		}
	}
	now := t0.Add(time.Minute)
	if got := storetest.ClaimAllTimers(t, []store.TimerStore{a, b, a, b}, now); len(got) != runs*each {
		t.Fatalf("claimed %d timers, want %d", len(got), runs*each)
	}
	if err := b.CommitRun(ctx, 1, storetest.Enter(first.Run, "go", "WAIT")).Wait(); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Hour) // the leases (an hour) ended
	if got := storetest.ClaimAllTimers(t, []store.TimerStore{a, b, a, b}, later); len(got) != (runs-1)*each {
		t.Fatalf("reclaimed %d timers, want %d (the first run's were voided)", len(got), (runs-1)*each)
	}
}
