package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/storetest"
)

// A restart keeps the outbox: subscriptions, pending deliveries and
// attempts are there after a reopen. A delivery claimed by the process
// that stopped is claimable again: at once on SQLite (the file lock
// proves its holder is gone, so Open frees its leases), once its lease
// ends on Postgres (another replica may still hold it).
func TestWebhooksSurviveRestart(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		if !b.Durable {
			t.Skip("nothing survives the process in memory")
		}
		p := b.New(t)
		s := p.Open(t)
		ctx := t.Context()
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for _, id := range []string{"s", "s2"} {
			if err := s.PutSubscription(ctx, storetest.Sub(id)); err != nil {
				t.Fatal(err)
			}
		}
		c := storetest.NewRun("run")
		c.Outbox = []store.Delivery{storetest.Out("d1", "s", "m1"), storetest.Out("d2", "s2", "m2")}
		if err := s.CreateRun(ctx, c); err != nil {
			t.Fatal(err)
		}
		ds, err := s.ClaimDeliveries(ctx, t0, 10, "old", t0.Add(time.Hour))
		if err != nil || len(ds) != 2 {
			t.Fatalf("claim = %v, %v; want both", ds, err)
		}
		if err := storetest.RecordAttempt(ctx, s, "d1", "old", store.DeliveryAttempt{At: t0, Status: 503, Class: "non_2xx"}, store.DeliveryPending, t0.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s = p.Open(t)
		if _, err := s.GetSubscription(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.PendingDeliveries(ctx); err != nil || n != 2 {
			t.Fatalf("PendingDeliveries after the restart = %d, %v; want 2", n, err)
		}
		if as, err := s.DeliveryAttempts(ctx, "d1", 0, 0); err != nil || len(as) != 1 || as[0].Status != 503 {
			t.Fatalf("attempts after the restart = %+v, %v", as, err)
		}
		now := t0.Add(10 * time.Second)
		ds, err = s.ClaimDeliveries(ctx, now, 10, "new", now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"d2", "d1"} // d2 freed by Open (and due first)
		if b.Name == "postgres" {
			want = []string{"d1"} // d2 still under the old lease
		}
		if got := ids(ds); !slices.Equal(got, want) {
			t.Fatalf("claim after the restart = %q, want %q", got, want)
		}
		if b.Name == "postgres" {
			ds, err = s.ClaimDeliveries(ctx, t0.Add(time.Hour), 10, "new", t0.Add(2*time.Hour))
			if err != nil || len(ds) != 1 || ds[0].ID != "d2" {
				t.Fatalf("claim once the old lease ended = %v, %v; want d2", ds, err)
			}
		}
	})
}

func ids(ds []store.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}
