package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// testListDeliveriesOutOfOrder: deliveries whose ids do not grow with
// the commits that store them (ids are the caller's) still list by id,
// newest (highest) first.
func testListDeliveriesOutOfOrder(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	r := createWith(t, s, "run", Out("d5", "a", "1"))
	for i, id := range []string{"d3", "d9", "d1"} {
		r = commitWith(t, s, r, Out(id, "a", fmt.Sprint(i+2)))
	}
	if got := fmt.Sprint(deliveryIDs(mustList(t, s, "a", "", 0))); got != "[d9 d5 d3 d1]" {
		t.Fatalf("deliveries = %s, want [d9 d5 d3 d1]", got)
	}
	if got := fmt.Sprint(deliveryIDs(mustList(t, s, "a", "d5", 0))); got != "[d3 d1]" {
		t.Fatalf("deliveries after d5 = %s, want [d3 d1]", got)
	}
}

// testRecordAttempts: RecordAttempts records each attempt as
// RecordAttempt would, in order (a delivery settled earlier in the batch
// is no longer held), each refused one on its own (unknown, not held,
// a bad status) without keeping the others from being recorded.
func testRecordAttempts(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	for _, id := range []string{"d1", "d2", "d3", "d4"} {
		createWith(t, s, "run-"+id, Out(id, "a", "m-"+id))
	}
	if errs, err := s.RecordAttempts(ctx(), "w", nil); err != nil || len(errs) != 0 {
		t.Fatalf("RecordAttempts of nothing = %v, %v", errs, err)
	}
	at := t0.Add(time.Minute)
	wantDeliveries(t, "claim", claimDel(t, s, at, 3, "w"), "d1", "d2", "d3")
	ok := store.DeliveryAttempt{At: at, Status: 204, Class: "delivered", Duration: time.Millisecond}
	bad := store.DeliveryAttempt{At: at, Status: 500, Class: "non_2xx", Duration: 2 * time.Millisecond, Answer: "oops", Error: "HTTP 500"}
	retry := at.Add(5 * time.Second)
	errs, err := s.RecordAttempts(ctx(), "w", []store.AttemptRecord{
		{ID: "d2", Attempt: bad, Status: store.DeliveryPending, NextAt: retry},
		{ID: "nope", Attempt: ok, Status: store.DeliveryDelivered},
		{ID: "d3", Attempt: ok, Status: "lost"},
		{ID: "d1", Attempt: ok, Status: store.DeliveryDelivered},
		{ID: "d4", Attempt: ok, Status: store.DeliveryDelivered},
		{ID: "d1", Attempt: ok, Status: store.DeliveryDelivered},
		{ID: "d3", Attempt: bad, Status: store.DeliveryFailed},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 7 {
		t.Fatalf("RecordAttempts gave %d errors for 7 records", len(errs))
	}
	for i, want := range []error{nil, store.ErrNotFound, nil, nil, store.ErrConflict, store.ErrConflict, nil} {
		switch {
		case i == 2 && errs[i] == nil:
			t.Errorf("record 2 (an unknown status) was recorded")
		case i != 2 && want == nil && errs[i] != nil, want != nil && !errors.Is(errs[i], want):
			t.Errorf("record %d: %v, want %v", i, errs[i], want)
		}
	}
	if d := getDel(t, s, "a", "d1"); d.Status != store.DeliveryDelivered || d.Attempts != 1 || d.Owner != "" {
		t.Errorf("d1 after RecordAttempts %+v", d)
	}
	if d := getDel(t, s, "a", "d2"); d.Status != store.DeliveryPending || d.Attempts != 1 || !d.NextAt.Equal(retry) || d.LastError != "HTTP 500" ||
		d.Owner != "" || !d.FirstAttemptAt.Equal(at) {
		t.Errorf("d2 after RecordAttempts %+v", d)
	}
	if d := getDel(t, s, "a", "d3"); d.Status != store.DeliveryFailed || d.Attempts != 1 || d.LastError != "HTTP 500" {
		t.Errorf("d3 after RecordAttempts %+v", d)
	}
	if d := getDel(t, s, "a", "d4"); d.Status != store.DeliveryPending || d.Attempts != 0 {
		t.Errorf("d4 (never claimed) after RecordAttempts %+v", d)
	}
	as, err := s.DeliveryAttempts(ctx(), "d2", 0, 0)
	if err != nil || len(as) != 1 || as[0].N != 1 || as[0].Status != 500 || as[0].Answer != "oops" || as[0].Duration != 2*time.Millisecond {
		t.Errorf("attempts of d2 = %+v, %v", as, err)
	}
	if as, err := s.DeliveryAttempts(ctx(), "d1", 0, 0); err != nil || len(as) != 1 {
		t.Errorf("attempts of d1 (recorded once, refused once) = %+v, %v", as, err)
	}
	if n := pending(t, s); n != 2 {
		t.Errorf("PendingDeliveries = %d, want 2 (d2 to retry, d4)", n)
	}
}
