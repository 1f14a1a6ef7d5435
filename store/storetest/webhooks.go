package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// RunsAndWebhooks is a WebhookStore with the RunStore over the same data:
// deliveries are stored by run commits, so the webhook suite needs both.
type RunsAndWebhooks interface {
	store.RunStore
	store.WebhookStore
}

// WebhookStore runs the suite of store.WebhookStore against stores made
// by newStore.
func WebhookStore(t *testing.T, newStore func(t *testing.T) RunsAndWebhooks) {
	suite(t, newStore, []test[RunsAndWebhooks]{
		{"SubscriptionsRoundTripAndPaging", testSubscriptions},
		{"OutboxStoredWithTheCommit", testOutboxStoredWithTheCommit},
		{"OutboxRefusedStoresNothing", testOutboxRefused},
		{"ClaimHeadOfQueueInOrder", testClaimHeadOfQueue},
		{"DeliveryLeaseExpiry", testDeliveryLeaseExpiry},
		{"RecordAttempt", testRecordAttempt},
		{"RecordAttempts", testRecordAttempts},
		{"ListDeliveriesOutOfOrder", testListDeliveriesOutOfOrder},
		{"DisabledSubscriptionNotClaimed", testDisabledNotClaimed},
		{"UpdateSubscription", testUpdateSubscription},
		{"UpdateSubscriptionConcurrent", testUpdateSubscriptionConcurrent},
		{"Redeliver", testRedeliver},
		{"DeleteSubscriptionCascades", testDeleteSubscriptionCascades},
		{"ListDeliveriesPaging", testListDeliveriesPaging},
		{"DeliveriesClaimedOnceInOrder", testDeliveriesClaimedOnce},
		{"EnqueueDeliveriesOutsideACommit", testEnqueueDeliveries},
		{"PruneDeliveries", testPruneDeliveries},
		{"PruneDeliveriesInBatches", testPruneDeliveriesInBatches},
	})
}

// Sub returns an enabled subscription with id, for PutSubscription.
func Sub(id string) store.Subscription {
	return store.Subscription{ID: id, URL: "https://example.com/hooks/" + id, Events: []string{"run.created", "run.state_changed"},
		Secrets: json.RawMessage(`{"secrets":["whsec_x"]}`), CreatedAt: t0, UpdatedAt: t0}
}

// Out returns a delivery of the message msg to subscription sub, for a
// commit's Outbox (the store fills in the run, the seq and the times).
func Out(id, sub, msg string) store.Delivery {
	return store.Delivery{ID: id, SubscriptionID: sub, MessageID: msg, Type: "run.state_changed",
		Body: json.RawMessage(`{"type":"run.state_changed", "data":{"m":"` + msg + `"}}`)}
}

func putSub(t *testing.T, s store.WebhookStore, sub store.Subscription) {
	t.Helper()
	if err := s.PutSubscription(ctx(), sub); err != nil {
		t.Fatal(err)
	}
}

// createWith creates run id with the deliveries out.
func createWith(t *testing.T, s store.RunStore, id string, out ...store.Delivery) store.Run {
	t.Helper()
	c := NewRun(id)
	c.Outbox = out
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatalf("CreateRun(%s): %v", id, err)
	}
	return c.Run
}

// commitWith commits the next change of r with the deliveries out.
func commitWith(t *testing.T, s store.RunStore, r store.Run, out ...store.Delivery) store.Run {
	t.Helper()
	c := Next(r, "go", "NEXT", `{}`)
	c.Outbox = out
	if err := s.CommitRun(ctx(), r.Version, c).Wait(); err != nil {
		t.Fatalf("CommitRun(%s): %v", r.ID, err)
	}
	return c.Run
}

func deliveryIDs(ds []store.Delivery) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func claimDel(t *testing.T, s store.WebhookStore, now time.Time, limit int, owner string) []store.Delivery {
	t.Helper()
	ds, err := s.ClaimDeliveries(ctx(), now, limit, owner, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func wantDeliveries(t *testing.T, what string, got []store.Delivery, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if ids := deliveryIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("%s = %q, want %q", what, ids, want)
	}
}

func getDel(t *testing.T, s store.WebhookStore, sub, id string) store.Delivery {
	t.Helper()
	d, err := s.GetDelivery(ctx(), sub, id)
	if err != nil {
		t.Fatalf("GetDelivery(%s, %s): %v", sub, id, err)
	}
	return d
}

func pending(t *testing.T, s store.WebhookStore) int64 {
	t.Helper()
	n, err := s.PendingDeliveries(ctx())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func record(t *testing.T, s store.WebhookStore, id, owner string, at time.Time, status string, next time.Time) {
	t.Helper()
	a := store.DeliveryAttempt{At: at, Status: 500, Class: "non_2xx", Duration: 1500 * time.Microsecond, Answer: "oops", Error: "HTTP 500"}
	if status == store.DeliveryDelivered {
		a.Status, a.Class, a.Answer, a.Error = 200, "delivered", "ok", ""
	}
	if err := RecordAttempt(ctx(), s, id, owner, a, status, next); err != nil {
		t.Fatalf("RecordAttempt(%s, %s): %v", id, status, err)
	}
}

// testSubscriptions: a subscription comes back as put (the secrets byte
// for byte), a put replaces it, and the list pages by id.
func testSubscriptions(t *testing.T, s RunsAndWebhooks) {
	for _, id := range []string{"s3", "s1", "s5", "s2", "s4"} {
		putSub(t, s, Sub(id))
	}
	want := Sub("s2")
	want.WorkflowID, want.States = "wf-test", []string{"DONE", "START"}
	want.Disabled, want.DisabledReason = true, "410 Gone"
	want.Secrets = json.RawMessage(`{"b": 1,  "a": [2]}`)
	want.UpdatedAt = t0.Add(time.Hour)
	putSub(t, s, want)
	got, err := s.GetSubscription(ctx(), "s2")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.URL != want.URL || !slices.Equal(got.Events, want.Events) || got.WorkflowID != want.WorkflowID ||
		!slices.Equal(got.States, want.States) || string(got.Secrets) != string(want.Secrets) || got.Disabled != want.Disabled ||
		got.DisabledReason != want.DisabledReason || !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("GetSubscription = %+v, want %+v", got, want)
	}
	if _, err := s.GetSubscription(ctx(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSubscription(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.PutSubscription(ctx(), store.Subscription{ID: "no-url"}); err == nil {
		t.Fatal("a subscription without a URL was stored")
	}
	var pages [][]string
	after := ""
	for {
		subs, err := s.ListSubscriptions(ctx(), after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(subs) == 0 {
			break
		}
		var ids []string
		for _, sub := range subs {
			ids = append(ids, sub.ID)
		}
		pages = append(pages, ids)
		after = ids[len(ids)-1]
	}
	if fmt.Sprint(pages) != "[[s1 s2] [s3 s4] [s5]]" {
		t.Fatalf("pages of subscriptions = %v", pages)
	}
	if all, _ := s.ListSubscriptions(ctx(), "", 0); len(all) != 5 {
		t.Fatalf("ListSubscriptions without a limit = %d subscriptions, want 5", len(all))
	}
}

// testOutboxStoredWithTheCommit: CreateRun and CommitRun store their
// deliveries pending, complete, the body byte for byte; a lost
// compare-and-set stores none; a delivery for a subscription not stored
// is dropped and the commit goes on.
func testOutboxStoredWithTheCommit(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	r := createWith(t, s, "run", Out("d1", "a", "m1"))
	d := getDel(t, s, "a", "d1")
	if d.RunID != "run" || d.Seq != 1 || d.Status != store.DeliveryPending || d.MessageID != "m1" || d.Type != "run.state_changed" ||
		string(d.Body) != string(Out("d1", "a", "m1").Body) || !d.NextAt.Equal(t0) || !d.CreatedAt.Equal(t0) || !d.UpdatedAt.Equal(t0) ||
		d.Attempts != 0 || !d.FirstAttemptAt.IsZero() || d.Owner != "" || !d.LeaseUntil.IsZero() || d.LastError != "" {
		t.Fatalf("stored delivery %+v", d)
	}
	later := Out("d2", "a", "m2")
	later.NextAt = t0.Add(time.Hour)
	r2 := commitWith(t, s, r, later, Out("d3", "gone", "m3"))
	if d := getDel(t, s, "a", "d2"); d.Seq != 2 || !d.NextAt.Equal(t0.Add(time.Hour)) || !d.CreatedAt.Equal(r2.UpdatedAt) {
		t.Fatalf("delivery of the second commit %+v, want seq 2, next at +1h, created at %v", d, r2.UpdatedAt)
	}
	if _, err := s.GetDelivery(ctx(), "gone", "d3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a delivery for a subscription not stored: %v, want it dropped", err)
	}
	stale := Next(r, "late", "ELSE", `{}`)
	stale.Outbox = []store.Delivery{Out("d4", "a", "m4")}
	if err := s.CommitRun(ctx(), 1, stale).Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale commit = %v, want ErrConflict", err)
	}
	ghost := Next(NewRun("ghost").Run, "go", "X", `{}`)
	ghost.Outbox = []store.Delivery{Out("d5", "a", "m5")}
	if err := s.CommitRun(ctx(), 1, ghost).Wait(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("commit of an unknown run = %v, want ErrNotFound", err)
	}
	dup := NewRun("run")
	dup.Outbox = []store.Delivery{Out("d6", "a", "m6")}
	if err := s.CreateRun(ctx(), dup); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateRun of a taken id = %v, want ErrExists", err)
	}
	for _, id := range []string{"d4", "d5", "d6"} {
		if _, err := s.GetDelivery(ctx(), "a", id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delivery %s of a commit that failed: %v, want none stored", id, err)
		}
	}
	wantDeliveries(t, "ListDeliveries", mustList(t, s, "a", "", 0), "d2", "d1")
	if n := pending(t, s); n != 2 {
		t.Fatalf("PendingDeliveries = %d, want 2", n)
	}
}

func mustList(t *testing.T, s store.WebhookStore, sub, after string, limit int) []store.Delivery {
	t.Helper()
	ds, err := s.ListDeliveries(ctx(), sub, after, limit)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// testOutboxRefused: an outbox that is not whole (no id, body, message
// id, twice the same id, one taken already, another run's seq, a status
// other than pending) refuses its commit, which stores nothing.
func testOutboxRefused(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	r := createWith(t, s, "run", Out("taken", "a", "m0"))
	noBody := Out("x1", "a", "m")
	noBody.Body = nil
	otherSeq := Out("x5", "a", "m")
	otherSeq.Seq = 7
	settled := Out("x6", "a", "m")
	settled.Status = store.DeliveryDelivered
	for name, out := range map[string][]store.Delivery{
		"no id":           {Out("", "a", "m")},
		"no body":         {noBody},
		"no message id":   {Out("x2", "a", "")},
		"the same id":     {Out("x3", "a", "m"), Out("x3", "a", "n")},
		"a taken id":      {Out("x4", "a", "m"), Out("taken", "a", "m")},
		"another seq":     {otherSeq},
		"already settled": {settled},
	} {
		c := Next(r, "go", "NEXT", `{}`)
		c.Outbox = out
		if err := s.CommitRun(ctx(), 1, c).Wait(); err == nil {
			t.Fatalf("a commit with %s in its outbox was stored", name)
		}
	}
	if got, _ := s.GetRun(ctx(), "run"); got.Version != 1 {
		t.Fatalf("a refused commit moved the run to version %d", got.Version)
	}
	wantDeliveries(t, "deliveries after refused commits", mustList(t, s, "a", "", 0), "taken")
}

// testClaimHeadOfQueue: a claim takes the due heads of the queues (per
// subscription and run) in NextAt order: a run's second delivery waits
// while its first is pending, another run's or another subscription's
// does not.
func testClaimHeadOfQueue(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	putSub(t, s, Sub("b"))
	r1 := createWith(t, s, "r1", Out("a-r1-1", "a", "1"))
	commitWith(t, s, r1, Out("a-r1-2", "a", "2"), Out("b-r1-2", "b", "3"))
	r2 := createWith(t, s, "r2")
	late := Out("a-r2-2", "a", "4")
	late.NextAt = t0.Add(time.Hour)
	commitWith(t, s, r2, late)

	now := t0.Add(time.Minute)
	got := claimDel(t, s, now, 10, "w1")
	wantDeliveries(t, "first claim", got, "a-r1-1", "b-r1-2")
	for _, d := range got {
		if d.Owner != "w1" || !d.LeaseUntil.Equal(now.Add(time.Minute)) {
			t.Fatalf("claimed %+v, want leased to w1 until %v", d, now.Add(time.Minute))
		}
	}
	wantDeliveries(t, "claim with the heads leased", claimDel(t, s, now, 10, "w2"))
	if at, ok, err := s.NextDeliveryDue(ctx()); err != nil || !ok || !at.Equal(now.Add(time.Minute)) {
		t.Fatalf("NextDeliveryDue = %v, %v, %v; want the end of the leases %v", at, ok, err, now.Add(time.Minute))
	}
	record(t, s, "a-r1-1", "w1", now, store.DeliveryDelivered, time.Time{})
	wantDeliveries(t, "claim once the head is delivered", claimDel(t, s, now, 10, "w2"), "a-r1-2")
	wantDeliveries(t, "claim before the other run's is due", claimDel(t, s, now, 10, "w2"))
	record(t, s, "a-r1-2", "w2", now, store.DeliveryDelivered, time.Time{})
	record(t, s, "b-r1-2", "w1", now, store.DeliveryDelivered, time.Time{})
	wantDeliveries(t, "claim when it is due", claimDel(t, s, t0.Add(time.Hour), 10, "w2"), "a-r2-2")

	if _, err := s.ClaimDeliveries(ctx(), now, 0, "w", now.Add(time.Minute)); err == nil {
		t.Fatal("a claim with limit 0 was accepted")
	}
	if _, err := s.ClaimDeliveries(ctx(), now, 5, "w", now); err == nil {
		t.Fatal("a claim whose lease ends at once was accepted")
	}
	if _, err := s.ClaimDeliveries(ctx(), now, 5, "", now.Add(time.Minute)); err == nil {
		t.Fatal("a claim without an owner was accepted")
	}
}

// testDeliveryLeaseExpiry: a leased delivery is not claimed by another
// until its lease ends; then it is, and the first holder can no longer
// record.
func testDeliveryLeaseExpiry(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	createWith(t, s, "run", Out("d", "a", "m"))
	if _, ok, _ := s.NextDeliveryDue(ctx()); !ok {
		t.Fatal("NextDeliveryDue sees nothing pending")
	}
	wantDeliveries(t, "claim", claimDel(t, s, t0, 10, "dead"), "d")
	wantDeliveries(t, "claim under the lease", claimDel(t, s, t0.Add(59*time.Second), 10, "alive"))
	got := claimDel(t, s, t0.Add(time.Minute), 10, "alive")
	wantDeliveries(t, "claim once the lease ended", got, "d")
	if got[0].Owner != "alive" {
		t.Fatalf("reclaimed delivery owned by %q", got[0].Owner)
	}
	a := store.DeliveryAttempt{At: t0.Add(time.Minute), Class: "delivered", Status: 200}
	if err := RecordAttempt(ctx(), s, "d", "dead", a, store.DeliveryDelivered, time.Time{}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("RecordAttempt by the old holder = %v, want ErrConflict", err)
	}
	if d := getDel(t, s, "a", "d"); d.Status != store.DeliveryPending || d.Owner != "alive" || d.Attempts != 0 {
		t.Fatalf("delivery after a refused record %+v", d)
	}
}

// testRecordAttempt: a retry records the attempt and makes the delivery
// claimable at its time; delivered and failed settle it (and let its
// queue go on); attempts come back in order; records of deliveries not
// held are refused.
func testRecordAttempt(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	r := createWith(t, s, "run", Out("d1", "a", "m1"))
	commitWith(t, s, r, Out("d2", "a", "m2"))
	if err := RecordAttempt(ctx(), s, "d1", "w", store.DeliveryAttempt{At: t0}, store.DeliveryDelivered, time.Time{}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("RecordAttempt of a delivery never claimed = %v, want ErrConflict", err)
	}
	if err := RecordAttempt(ctx(), s, "nope", "w", store.DeliveryAttempt{At: t0}, store.DeliveryDelivered, time.Time{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RecordAttempt of an unknown delivery = %v, want ErrNotFound", err)
	}
	at := t0.Add(time.Minute)
	wantDeliveries(t, "claim", claimDel(t, s, at, 10, "w"), "d1")
	if err := RecordAttempt(ctx(), s, "d1", "w", store.DeliveryAttempt{At: at}, "lost", time.Time{}); err == nil {
		t.Fatal("an unknown status was recorded")
	}
	if err := RecordAttempt(ctx(), s, "d1", "w", store.DeliveryAttempt{At: at}, store.DeliveryPending, time.Time{}); err == nil {
		t.Fatal("a retry without its time was recorded")
	}
	if err := RecordAttempt(ctx(), s, "d1", "other", store.DeliveryAttempt{At: at}, store.DeliveryDelivered, time.Time{}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("RecordAttempt by another owner = %v, want ErrConflict", err)
	}
	retry := at.Add(5 * time.Second)
	record(t, s, "d1", "w", at, store.DeliveryPending, retry)
	d := getDel(t, s, "a", "d1")
	if d.Status != store.DeliveryPending || d.Attempts != 1 || !d.FirstAttemptAt.Equal(at) || !d.NextAt.Equal(retry) || d.LastError != "HTTP 500" ||
		d.Owner != "" || !d.LeaseUntil.IsZero() || !d.UpdatedAt.Equal(at) {
		t.Fatalf("delivery after a retry %+v", d)
	}
	if err := RecordAttempt(ctx(), s, "d1", "w", store.DeliveryAttempt{At: at}, store.DeliveryDelivered, time.Time{}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second record on one claim = %v, want ErrConflict", err)
	}
	wantDeliveries(t, "claim before the retry's time (d2 waits behind d1)", claimDel(t, s, retry.Add(-time.Millisecond), 10, "w"))
	if at, ok, _ := s.NextDeliveryDue(ctx()); !ok || !at.Equal(retry) {
		t.Fatalf("NextDeliveryDue = %v, %v; want the retry's time %v", at, ok, retry)
	}
	wantDeliveries(t, "claim at the retry's time", claimDel(t, s, retry, 10, "w"), "d1")
	record(t, s, "d1", "w", retry, store.DeliveryFailed, time.Time{})
	d = getDel(t, s, "a", "d1")
	if d.Status != store.DeliveryFailed || d.Attempts != 2 || !d.FirstAttemptAt.Equal(at) || d.Owner != "" {
		t.Fatalf("delivery after failing %+v", d)
	}
	as, err := s.DeliveryAttempts(ctx(), "d1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || as[0].N != 1 || as[1].N != 2 || as[0].DeliveryID != "d1" || !as[0].At.Equal(at) || !as[1].At.Equal(retry) ||
		as[0].Status != 500 || as[0].Class != "non_2xx" || as[0].Duration != 1500*time.Microsecond || as[0].Answer != "oops" || as[0].Error != "HTTP 500" {
		t.Fatalf("attempts = %+v", as)
	}
	for _, p := range []struct{ after, limit, want int }{{0, 1, 1}, {1, 1, 2}, {1, 0, 2}, {0, 5, 1}} { // pages, by N
		as, err := s.DeliveryAttempts(ctx(), "d1", p.after, p.limit)
		if err != nil || len(as) == 0 || as[0].N != p.want || p.limit == 1 && len(as) != 1 || p.after == 1 && len(as) != 1 || p.limit == 5 && len(as) != 2 {
			t.Fatalf("DeliveryAttempts(after %d, limit %d) = %+v, %v; want from N %d", p.after, p.limit, as, err, p.want)
		}
	}
	if as, err := s.DeliveryAttempts(ctx(), "d1", 2, 10); err != nil || len(as) != 0 {
		t.Fatalf("attempts after the last = %+v, %v", as, err)
	}
	if _, err := s.DeliveryAttempts(ctx(), "nope", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeliveryAttempts(unknown) = %v, want ErrNotFound", err)
	}
	if as, err := s.DeliveryAttempts(ctx(), "d2", 0, 10); err != nil || len(as) != 0 {
		t.Fatalf("attempts of a delivery never tried = %+v, %v", as, err)
	}
	wantDeliveries(t, "claim once the head failed", claimDel(t, s, retry, 10, "w"), "d2")
	record(t, s, "d2", "w", retry, store.DeliveryDelivered, time.Time{})
	if d := getDel(t, s, "a", "d2"); d.Status != store.DeliveryDelivered || d.Attempts != 1 || d.LastError != "" {
		t.Fatalf("delivered %+v", d)
	}
	if n := pending(t, s); n != 0 {
		t.Fatalf("PendingDeliveries = %d, want 0", n)
	}
	if _, ok, err := s.NextDeliveryDue(ctx()); err != nil || ok {
		t.Fatalf("NextDeliveryDue with none pending = %v, %v", ok, err)
	}
}

// testDisabledNotClaimed: a disabled subscription's deliveries stay
// pending and unclaimed (not due for NextDeliveryDue either), also those
// stored after it was disabled and those behind a head settled since,
// until it is enabled again.
func testDisabledNotClaimed(t *testing.T, s RunsAndWebhooks) {
	off := Sub("off")
	putSub(t, s, off)
	putSub(t, s, Sub("on"))
	r := createWith(t, s, "run", Out("d-off", "off", "1"), Out("d-on", "on", "2"))
	commitWith(t, s, r, Out("d-off2", "off", "3"))
	wantDeliveries(t, "claim", claimDel(t, s, t0, 10, "w"), "d-off", "d-on")
	off.Disabled, off.DisabledReason = true, "410 Gone"
	putSub(t, s, off)
	record(t, s, "d-on", "w", t0, store.DeliveryDelivered, time.Time{})
	record(t, s, "d-off", "w", t0, store.DeliveryDelivered, time.Time{}) // the head in flight when it was disabled
	createWith(t, s, "run2", Out("d-off3", "off", "4"))                  // stored once disabled
	wantDeliveries(t, "claim of a disabled subscription's", claimDel(t, s, t0.Add(time.Hour), 10, "w"))
	if _, ok, err := s.NextDeliveryDue(ctx()); err != nil || ok {
		t.Fatalf("NextDeliveryDue with only a disabled subscription's pending = %v, %v", ok, err)
	}
	if n := pending(t, s); n != 2 {
		t.Fatalf("PendingDeliveries = %d, want 2 (the disabled subscription's)", n)
	}
	off.Disabled = false
	putSub(t, s, off)
	wantDeliveries(t, "claim once enabled", claimDel(t, s, t0.Add(time.Hour), 10, "w"), "d-off3", "d-off2")
}

// testRedeliver: a delivered or failed delivery is pending again, due
// now, with its message id and attempts, its retries counted afresh
// (RetryBase); a pending one is made due now, and one under a lease stays
// under it.
func testRedeliver(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	putSub(t, s, Sub("b"))
	later := Out("p", "b", "mp")
	later.NextAt = t0.Add(time.Hour)
	createWith(t, s, "run", Out("d", "a", "m"), later)
	claimDel(t, s, t0, 10, "w")
	record(t, s, "d", "w", t0, store.DeliveryDelivered, time.Time{})
	now := t0.Add(2 * time.Minute)
	if err := s.Redeliver(ctx(), "b", "d", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Redeliver under another subscription = %v, want ErrNotFound", err)
	}
	if err := s.Redeliver(ctx(), "a", "nope", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Redeliver(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.Redeliver(ctx(), "a", "d", now); err != nil {
		t.Fatal(err)
	}
	d := getDel(t, s, "a", "d")
	if d.Status != store.DeliveryPending || !d.NextAt.Equal(now) || d.MessageID != "m" || d.Attempts != 1 || d.RetryBase != 1 || !d.FirstAttemptAt.IsZero() || !d.UpdatedAt.Equal(now) {
		t.Fatalf("redelivered %+v, want pending, due now, 1 attempt, its retries counted from 1", d)
	}
	wantDeliveries(t, "claim before the redelivery's time", claimDel(t, s, now.Add(-time.Second), 10, "w"))
	if err := s.Redeliver(ctx(), "b", "p", now); err != nil {
		t.Fatal(err)
	}
	wantDeliveries(t, "claim after the redeliveries", claimDel(t, s, now, 10, "w"), "d", "p")
	if err := s.Redeliver(ctx(), "b", "p", now); err != nil { // leased: the lease stays
		t.Fatal(err)
	}
	wantDeliveries(t, "claim of a leased delivery redelivered", claimDel(t, s, now, 10, "w2"))
	if d := getDel(t, s, "b", "p"); d.Owner != "w" || !d.LeaseUntil.Equal(now.Add(time.Minute)) || d.RetryBase != 0 {
		t.Fatalf("a leased delivery redelivered %+v, want it still leased to w, its retries counted as before", d)
	}
	record(t, s, "d", "w", now, store.DeliveryDelivered, time.Time{})
	if as, _ := s.DeliveryAttempts(ctx(), "d", 0, 0); len(as) != 2 || as[1].N != 2 {
		t.Fatalf("attempts after a redelivery = %+v, want 1 and 2", as)
	}
}

// testDeleteSubscriptionCascades: deleting a subscription deletes its
// deliveries and their attempts, not another's; deleting a run keeps its
// deliveries.
func testDeleteSubscriptionCascades(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("gone"))
	putSub(t, s, Sub("kept"))
	createWith(t, s, "run", Out("g1", "gone", "1"), Out("k1", "kept", "2"))
	claimDel(t, s, t0, 10, "w")
	record(t, s, "g1", "w", t0, store.DeliveryPending, t0.Add(time.Minute))
	if err := s.DeleteRun(ctx(), "run", 1); err != nil {
		t.Fatal(err)
	}
	if d := getDel(t, s, "kept", "k1"); d.Status != store.DeliveryPending {
		t.Fatalf("a deleted run's delivery %+v, want it kept", d)
	}
	if err := s.DeleteSubscription(ctx(), "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSubscription(ctx(), "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting twice = %v, want ErrNotFound", err)
	}
	if _, err := s.GetSubscription(ctx(), "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSubscription after delete = %v", err)
	}
	if _, err := s.GetDelivery(ctx(), "gone", "g1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetDelivery of a deleted subscription's = %v", err)
	}
	if _, err := s.DeliveryAttempts(ctx(), "g1", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeliveryAttempts of a deleted subscription's = %v", err)
	}
	if n := pending(t, s); n != 1 {
		t.Fatalf("PendingDeliveries = %d, want 1", n)
	}
	putSub(t, s, Sub("gone")) // the id again: a new subscription, without the old deliveries
	wantDeliveries(t, "deliveries of a re-created subscription", mustList(t, s, "gone", "", 0))
	wantDeliveries(t, "claim", claimDel(t, s, t0.Add(time.Hour), 10, "w2"), "k1")
}

// testListDeliveriesPaging: a subscription's deliveries list newest
// (highest id) first, paged by the last id seen.
func testListDeliveriesPaging(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	putSub(t, s, Sub("b"))
	r := createWith(t, s, "run", Out("d1", "a", "1"), Out("x1", "b", "x"))
	for i := 2; i <= 5; i++ {
		r = commitWith(t, s, r, Out(fmt.Sprintf("d%d", i), "a", fmt.Sprint(i)))
	}
	var pages []string
	after := ""
	for {
		ds := mustList(t, s, "a", after, 2)
		if len(ds) == 0 {
			break
		}
		pages = append(pages, fmt.Sprint(deliveryIDs(ds)))
		after = ds[len(ds)-1].ID
	}
	if fmt.Sprint(pages) != "[[d5 d4] [d3 d2] [d1]]" {
		t.Fatalf("pages of deliveries = %v", pages)
	}
	wantDeliveries(t, "deliveries of an unknown subscription", mustList(t, s, "nope", "", 0))
	if _, err := s.GetDelivery(ctx(), "b", "d1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetDelivery under another subscription = %v, want ErrNotFound", err)
	}
}

// testDeliveriesClaimedOnceInOrder: four claimers of one store deliver 40
// runs × 3 messages × 2 subscriptions: each delivery is claimed once and
// delivered, each queue in its order.
func testDeliveriesClaimedOnce(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	putSub(t, s, Sub("b"))
	const runs = 40
	for i := range runs {
		id := fmt.Sprintf("r%02d", i)
		r := createWith(t, s, id, Out(id+"-a1", "a", id+"a1"), Out(id+"-b1", "b", id+"b1"))
		r = commitWith(t, s, r, Out(id+"-a2", "a", id+"a2"), Out(id+"-b2", "b", id+"b2"))
		commitWith(t, s, r, Out(id+"-a3", "a", id+"a3"), Out(id+"-b3", "b", id+"b3"))
	}
	if got := DeliverAll(t, []store.WebhookStore{s, s, s, s}, t0.Add(time.Minute)); got != runs*3*2 {
		t.Fatalf("delivered %d, want %d", got, runs*3*2)
	}
}

// DeliverAll runs one claimer per entry of claimers (a store may appear
// more than once), each claiming at now, 8 at a time, and recording every
// claimed delivery delivered, until none is pending; it returns how many
// were delivered. A delivery claimed while another claimer holds it, or
// before the one before it in its queue (subscription and run) was
// delivered, fails t. Each queue's seqs must be 1, 2, 3, ….
func DeliverAll(t *testing.T, claimers []store.WebhookStore, now time.Time) int {
	t.Helper()
	type queue struct{ sub, run string }
	var mu sync.Mutex
	held := map[string]string{} // delivery id -> claimer
	done := map[string]bool{}   // delivered ids
	last := map[queue]int64{}   // the seq delivered last in each queue
	var wg sync.WaitGroup
	for w, s := range claimers {
		wg.Go(func() {
			owner := fmt.Sprintf("c%d", w)
			for {
				ds, err := s.ClaimDeliveries(ctx(), now, 8, owner, now.Add(time.Hour))
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					n, err := s.PendingDeliveries(ctx())
					if err != nil {
						t.Error(err)
						return
					}
					if n == 0 {
						return
					}
					runtime.Gosched() // another claimer holds the heads
					continue
				}
				for _, d := range ds {
					q := queue{d.SubscriptionID, d.RunID}
					mu.Lock()
					if other, ok := held[d.ID]; ok {
						t.Errorf("delivery %s claimed by %s while %s holds it", d.ID, owner, other)
					}
					if done[d.ID] {
						t.Errorf("delivery %s claimed again after it was delivered", d.ID)
					}
					if d.Seq != last[q]+1 {
						t.Errorf("delivery %s (seq %d) claimed after seq %d of its queue", d.ID, d.Seq, last[q])
					}
					held[d.ID] = owner
					mu.Unlock()
				}
				for _, d := range ds {
					mu.Lock() // before the record: once it commits, the next of the queue may be claimed
					delete(held, d.ID)
					done[d.ID] = true
					last[queue{d.SubscriptionID, d.RunID}] = d.Seq
					mu.Unlock()
					if err := RecordAttempt(ctx(), s, d.ID, owner, store.DeliveryAttempt{At: now, Status: 200, Class: "delivered"}, store.DeliveryDelivered, time.Time{}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return len(done)
}

// testEnqueueDeliveries: deliveries stored outside a commit report the
// run at its current version, queue behind that version's messages and
// ahead of the next commit's; they are refused whole when the run moved
// on, is not stored, or an id is taken.
func testEnqueueDeliveries(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	r := createWith(t, s, "run", Out("a-1", "a", "1"))
	at := t0.Add(time.Second)
	if err := s.EnqueueDeliveries(ctx(), "run", 1, at, []store.Delivery{Out("a-1p", "a", "p1"), Out("x-1p", "nosub", "p2")}); err != nil {
		t.Fatalf("EnqueueDeliveries at the run's version: %v", err)
	}
	d := getDel(t, s, "a", "a-1p")
	if d.RunID != "run" || d.Seq != 1 || d.Status != store.DeliveryPending || !d.CreatedAt.Equal(at) || !d.NextAt.Equal(at) || d.MessageID != "p1" {
		t.Fatalf("enqueued delivery = %+v, want run at seq 1, pending from %v", d, at)
	}
	if _, err := s.GetDelivery(ctx(), "nosub", "x-1p"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the delivery for a subscription that is not stored: %v, want ErrNotFound (dropped)", err)
	}
	if n := pending(t, s); n != 2 {
		t.Fatalf("pending = %d, want 2", n)
	}
	r = commitWith(t, s, r, Out("a-2", "a", "2"))
	now := t0.Add(time.Minute)
	wantDeliveries(t, "first claim", claimDel(t, s, now, 10, "w"), "a-1")
	record(t, s, "a-1", "w", now, store.DeliveryDelivered, time.Time{})
	wantDeliveries(t, "claim after the commit's message", claimDel(t, s, now, 10, "w"), "a-1p")
	record(t, s, "a-1p", "w", now, store.DeliveryDelivered, time.Time{})
	wantDeliveries(t, "claim after the enqueued message", claimDel(t, s, now, 10, "w"), "a-2")

	if err := s.EnqueueDeliveries(ctx(), "run", 1, at, []store.Delivery{Out("stale", "a", "p3")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("EnqueueDeliveries at a past version: %v, want ErrConflict", err)
	}
	if err := s.EnqueueDeliveries(ctx(), "run", r.Version, at, []store.Delivery{Out("fresh", "a", "p4"), Out("a-1p", "a", "p5")}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("EnqueueDeliveries with a taken id: %v, want ErrExists", err)
	}
	if err := s.EnqueueDeliveries(ctx(), "nope", 1, at, []store.Delivery{Out("nope-p", "a", "p6")}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("EnqueueDeliveries for a run that is not stored: %v, want ErrNotFound", err)
	}
	bad := Out("bad", "a", "p7")
	bad.Body = nil
	if err := s.EnqueueDeliveries(ctx(), "run", r.Version, at, []store.Delivery{Out("ok", "a", "p8"), bad}); err == nil {
		t.Fatal("EnqueueDeliveries with a delivery without a body was accepted")
	}
	for _, id := range []string{"stale", "fresh", "nope-p", "ok", "bad"} {
		if _, err := s.GetDelivery(ctx(), "a", id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delivery %s of a refused EnqueueDeliveries: %v, want ErrNotFound (nothing stored)", id, err)
		}
	}
	if n := pending(t, s); n != 1 {
		t.Fatalf("pending = %d, want 1 (a-2)", n)
	}
}

// testPruneDeliveries: retention deletes the settled deliveries (delivered
// and failed) whose last attempt is before the cut-off, oldest first, up
// to the limit, with their attempts; pending ones stay however old (due,
// waiting for a retry, leased, redelivered), and so do those settled at
// or after the cut-off; the queues of the pending ones keep their order.
func testPruneDeliveries(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	putSub(t, s, Sub("b"))
	r1 := createWith(t, s, "r1", Out("old-ok", "a", "1"), Out("old-failed", "b", "2"))
	r1 = commitWith(t, s, r1, Out("q2", "a", "3"))
	commitWith(t, s, r1, Out("q3", "a", "4"))
	leased, never, retry := Out("leased", "a", "5"), Out("never", "b", "6"), Out("retry", "b", "7")
	leased.NextAt, never.NextAt = t0.Add(90*time.Minute), t0.Add(10*time.Hour)
	createWith(t, s, "r2", leased, retry)
	createWith(t, s, "r3", Out("at-cutoff", "a", "8"), never)
	createWith(t, s, "r4", Out("redelivered", "a", "9"))

	cutoff := t0.Add(2 * time.Hour)
	wantDeliveries(t, "first claim", claimDel(t, s, t0, 10, "w"), "at-cutoff", "old-failed", "old-ok", "redelivered", "retry")
	record(t, s, "old-failed", "w", t0.Add(2*time.Minute), store.DeliveryFailed, time.Time{})
	record(t, s, "old-ok", "w", t0.Add(time.Minute), store.DeliveryDelivered, time.Time{})
	record(t, s, "retry", "w", t0.Add(time.Minute), store.DeliveryPending, t0.Add(5*time.Hour))
	record(t, s, "redelivered", "w", t0.Add(time.Minute), store.DeliveryDelivered, time.Time{})
	record(t, s, "at-cutoff", "w", cutoff, store.DeliveryDelivered, time.Time{})
	if err := s.Redeliver(ctx(), "a", "redelivered", t0.Add(100*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// q2 (now the head of its queue) and leased are held under a lease
	// that outlasts the cut-off.
	wantDeliveries(t, "claim of q2 and leased", claimDel(t, s, t0.Add(90*time.Minute), 2, "w2"), "q2", "leased")
	before := pending(t, s)

	if _, err := s.PruneDeliveries(ctx(), cutoff, 0); err == nil {
		t.Fatal("PruneDeliveries with limit 0 was accepted")
	}
	if n, err := s.PruneDeliveries(ctx(), cutoff, 1); err != nil || n != 1 {
		t.Fatalf("PruneDeliveries(limit 1) = %d, %v; want 1", n, err)
	}
	if _, err := s.GetDelivery(ctx(), "a", "old-ok"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the oldest settled delivery after a prune of one: %v, want ErrNotFound", err)
	}
	getDel(t, s, "b", "old-failed") // beyond the limit
	if n, err := s.PruneDeliveries(ctx(), cutoff, 10); err != nil || n != 1 {
		t.Fatalf("PruneDeliveries(limit 10) = %d, %v; want 1 (old-failed)", n, err)
	}
	if n, err := s.PruneDeliveries(ctx(), cutoff, 10); err != nil || n != 0 {
		t.Fatalf("PruneDeliveries again = %d, %v; want 0", n, err)
	}
	for _, id := range []string{"old-ok", "old-failed"} {
		for _, sub := range []string{"a", "b"} {
			if _, err := s.GetDelivery(ctx(), sub, id); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("pruned delivery %s: %v, want ErrNotFound", id, err)
			}
		}
		if _, err := s.DeliveryAttempts(ctx(), id, 0, 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("attempts of pruned delivery %s: %v, want ErrNotFound", id, err)
		}
	}
	wantDeliveries(t, "deliveries of a", mustList(t, s, "a", "", 0), "redelivered", "q3", "q2", "leased", "at-cutoff")
	wantDeliveries(t, "deliveries of b", mustList(t, s, "b", "", 0), "retry", "never")
	if d := getDel(t, s, "a", "at-cutoff"); d.Status != store.DeliveryDelivered || d.Attempts != 1 {
		t.Fatalf("the delivery settled at the cut-off %+v, want it kept", d)
	}
	if as, err := s.DeliveryAttempts(ctx(), "retry", 0, 0); err != nil || len(as) != 1 {
		t.Fatalf("attempts of a kept delivery = %+v, %v", as, err)
	}
	if d := getDel(t, s, "a", "leased"); d.Owner != "w2" || d.Status != store.DeliveryPending {
		t.Fatalf("a leased delivery after the prune %+v", d)
	}
	if n := pending(t, s); n != before {
		t.Fatalf("pending after the prune = %d, want %d", n, before)
	}

	// The queues go on in order: q3 waits behind q2, the retry and the
	// redelivery are claimable when due.
	record(t, s, "leased", "w2", t0.Add(90*time.Minute), store.DeliveryDelivered, time.Time{})
	now := t0.Add(100 * time.Minute) // q2's lease has ended
	wantDeliveries(t, "claim with q2 pending", claimDel(t, s, now, 10, "w3"), "q2", "redelivered")
	record(t, s, "q2", "w3", now, store.DeliveryDelivered, time.Time{})
	record(t, s, "redelivered", "w3", now, store.DeliveryDelivered, time.Time{})
	wantDeliveries(t, "claim once q2 is delivered", claimDel(t, s, t0.Add(5*time.Hour), 10, "w3"), "q3", "retry")

	// A pruned delivery's id stored again is a new delivery, without the
	// old one's attempts.
	createWith(t, s, "r5", Out("old-ok", "a", "10"))
	if as, err := s.DeliveryAttempts(ctx(), "old-ok", 0, 0); err != nil || len(as) != 0 {
		t.Fatalf("attempts of a pruned id stored again = %+v, %v; want none", as, err)
	}
	wantDeliveries(t, "deliveries of a with the id again", mustList(t, s, "a", "", 0), "redelivered", "q3", "q2", "old-ok", "leased", "at-cutoff")

	// The settled deliveries of a deleted subscription went with it:
	// there is nothing left of them to prune.
	putSub(t, s, Sub("c"))
	createWith(t, s, "r6", Out("c1", "c", "11"))
	wantDeliveries(t, "claim of c1 (and of old-ok, pending again)", claimDel(t, s, t0.Add(5*time.Hour), 10, "w4"), "c1", "old-ok")
	record(t, s, "c1", "w4", t0.Add(time.Minute), store.DeliveryDelivered, time.Time{})
	if err := s.DeleteSubscription(ctx(), "c"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneDeliveries(ctx(), t0.Add(30*time.Minute), 10); err != nil || n != 0 {
		t.Fatalf("PruneDeliveries after the subscription's deletion = %d, %v; want 0", n, err)
	}
}

// testPruneDeliveriesInBatches: batches delete the settled deliveries in
// the order they settled (not their ids'), and the lists and pages of
// what is left stay whole between batches.
func testPruneDeliveriesInBatches(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	const n = 20
	var out []store.Delivery
	for i := range n {
		out = append(out, Out(fmt.Sprintf("d%02d", i), "a", fmt.Sprint(i)))
	}
	createWith(t, s, "run", out...)
	// Each claim takes the head of the run's queue; d(i) settles at
	// minute n-i: the newest ids settle first.
	for i := range n {
		id := fmt.Sprintf("d%02d", i)
		wantDeliveries(t, "claim", claimDel(t, s, t0, 1, "w"), id)
		record(t, s, id, "w", t0.Add(time.Duration(n-i)*time.Minute), store.DeliveryDelivered, time.Time{})
	}
	left := n
	for _, batch := range []int{7, 7, 6} {
		got, err := s.PruneDeliveries(ctx(), t0.Add(time.Hour), 7)
		if err != nil || got != batch {
			t.Fatalf("PruneDeliveries = %d, %v; want %d", got, err, batch)
		}
		left -= batch
		var want []string
		for i := left - 1; i >= 0; i-- {
			want = append(want, fmt.Sprintf("d%02d", i))
		}
		wantDeliveries(t, "deliveries left", mustList(t, s, "a", "", 0), want...)
		if left > 3 {
			wantDeliveries(t, "a page after a cursor", mustList(t, s, "a", want[1], 2), want[2:4]...)
		}
	}
}

// RecordAttempt records one attempt with w.RecordAttempts: the record's
// refusal, or the write's error (for tests that record one at a time).
func RecordAttempt(ctx context.Context, w store.WebhookStore, id, owner string, a store.DeliveryAttempt, status string, nextAt time.Time) error {
	errs, err := w.RecordAttempts(ctx, owner, []store.AttemptRecord{{ID: id, Attempt: a, Status: status, NextAt: nextAt}})
	if err != nil {
		return err
	}
	return errs[0]
}

// testUpdateSubscription: an update is applied to the stored value and
// stored whole (disabling it stops its claims, as PutSubscription does);
// an update that fails stores nothing and its error is returned; the ID
// cannot be changed; a subscription that is not stored (never, or
// deleted) is ErrNotFound and is not created.
func testUpdateSubscription(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	createWith(t, s, "run", Out("d", "a", "m"))
	later := t0.Add(time.Minute)
	if err := s.UpdateSubscription(ctx(), "a", func(sub *store.Subscription) error {
		if sub.URL != Sub("a").URL || sub.Disabled {
			t.Errorf("update given %+v, want the stored subscription", sub)
		}
		sub.Disabled, sub.DisabledReason, sub.UpdatedAt = true, "410 Gone", later
		sub.Secrets = json.RawMessage(`{"secrets":["whsec_y"]}`)
		sub.ID = "renamed"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSubscription(ctx(), "a")
	if err != nil || !got.Disabled || got.DisabledReason != "410 Gone" || !got.UpdatedAt.Equal(later) || string(got.Secrets) != `{"secrets":["whsec_y"]}` || !got.CreatedAt.Equal(t0) {
		t.Fatalf("after the update: %+v, %v", got, err)
	}
	if _, err := s.GetSubscription(ctx(), "renamed"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the update stored a subscription under another id: %v", err)
	}
	wantDeliveries(t, "claim of a subscription disabled by an update", claimDel(t, s, t0, 10, "w"))

	boom := errors.New("refused")
	if err := s.UpdateSubscription(ctx(), "a", func(sub *store.Subscription) error {
		sub.Disabled, sub.URL = false, "https://example.com/other"
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("a failing update returned %v, want its error", err)
	}
	if got, _ := s.GetSubscription(ctx(), "a"); !got.Disabled || got.URL != Sub("a").URL {
		t.Fatalf("a failing update stored %+v", got)
	}
	if err := s.UpdateSubscription(ctx(), "a", func(sub *store.Subscription) error { sub.URL = ""; return nil }); err == nil {
		t.Fatal("an update to a subscription without a URL was stored")
	}

	for _, id := range []string{"nope", "a"} {
		if id == "a" {
			if err := s.DeleteSubscription(ctx(), "a"); err != nil {
				t.Fatal(err)
			}
		}
		called := false
		err := s.UpdateSubscription(ctx(), id, func(sub *store.Subscription) error { called = true; return nil })
		if !errors.Is(err, store.ErrNotFound) || called {
			t.Fatalf("UpdateSubscription(%s) of a subscription not stored = %v (update called %v), want ErrNotFound", id, err, called)
		}
		if _, err := s.GetSubscription(ctx(), id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("UpdateSubscription(%s) created it: %v", id, err)
		}
	}
}

// testUpdateSubscriptionConcurrent: updates of one subscription made at
// once each apply to the value the one before stored: none is lost.
func testUpdateSubscriptionConcurrent(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.UpdateSubscription(ctx(), "a", func(sub *store.Subscription) error {
				sub.States = append(sub.States, fmt.Sprint("S", i))
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := s.GetSubscription(ctx(), "a")
	if err != nil || len(got.States) != n {
		t.Fatalf("after %d concurrent updates each adding a state: %d states (%v), %v", n, len(got.States), got.States, err)
	}
}
