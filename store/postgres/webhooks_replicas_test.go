package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/storetest"
)

// Two replicas (two stores on one schema), each with two claimers,
// deliver 100 runs × 3 messages × 2 subscriptions: each delivery is
// claimed by one claimer at a time and delivered once, each run's
// messages to each subscription in order.
func TestReplicasDeliverOnceInOrder(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a, b := open(t, u, schema, nil), open(t, u, schema, nil)
	ctx := t.Context()
	for _, id := range []string{"s1", "s2"} {
		if err := a.PutSubscription(ctx, storetest.Sub(id)); err != nil {
			t.Fatal(err)
		}
	}
	const runs = 100
	for i := range runs {
		id := fmt.Sprintf("r%03d", i)
		c := storetest.NewRun(id)
		c.Outbox = []store.Delivery{storetest.Out(id+"-s1-1", "s1", id+"1"), storetest.Out(id+"-s2-1", "s2", id+"2")}
		if err := a.CreateRun(ctx, c); err != nil {
			t.Fatal(err)
		}
		r := c.Run
		for v := 2; v <= 3; v++ {
			n := storetest.Next(r, "go", "NEXT", `{}`)
			n.Outbox = []store.Delivery{storetest.Out(fmt.Sprintf("%s-s1-%d", id, v), "s1", "x"), storetest.Out(fmt.Sprintf("%s-s2-%d", id, v), "s2", "y")}
			if err := []store.Store{a, b}[v%2].CommitRun(ctx, r.Version, n).Wait(); err != nil {
				t.Fatal(err)
			}
			r = n.Run
		}
	}
	now := time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	if got := storetest.DeliverAll(t, []store.WebhookStore{a, b, a, b}, now); got != runs*3*2 {
		t.Fatalf("delivered %d, want %d", got, runs*3*2)
	}
}

// A commit group's outbox is written in the group's one statement per
// commit: deliveries of commits grouped together are each stored with
// their commit, and the lost compare-and-set of one member stores none
// of its deliveries while the others' are stored.
func TestGroupedCommitsStoreTheirOutbox(t *testing.T) {
	u := testURL(t)
	s := open(t, u, freshSchema(t, u), nil)
	ctx := t.Context()
	if err := s.PutSubscription(ctx, storetest.Sub("s")); err != nil {
		t.Fatal(err)
	}
	var runs []store.Run
	for i := range 8 {
		c := storetest.NewRun(fmt.Sprintf("g%d", i))
		if err := s.CreateRun(ctx, c); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, c.Run)
	}
	release := postgres.HoldCommits(s)
	var ps []store.Pending
	for i, r := range runs {
		n := storetest.Next(r, "go", "NEXT", `{}`)
		n.Outbox = []store.Delivery{storetest.Out(fmt.Sprintf("d%d", i), "s", "m")}
		expected := r.Version
		if i == 3 { // expects version 7: loses its compare-and-set
			expected, n.Run.Version, n.Event.Seq = 7, 8, 8
		}
		ps = append(ps, s.CommitRun(ctx, expected, n))
	}
	release()
	for i, p := range ps {
		err := p.Wait()
		if (i == 3) != (err != nil) {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	ds, err := s.ListDeliveries(ctx, "s", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 7 {
		t.Fatalf("stored %d deliveries, want 7 (all but the lost commit's)", len(ds))
	}
	for _, d := range ds {
		if d.ID == "d3" {
			t.Fatal("the lost commit's delivery was stored")
		}
	}
	if st := s.CommitStats(); st.Groups > 2 || st.Solo != 0 {
		t.Fatalf("commit stats %+v: want the commits sent in at most two groups, none alone", st)
	}
}
