package webhook_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/webhook"
	"github.com/asmp-dev/asmp/workflow"
)

// prunedDeliveries is an engine.DeliveryObserver that adds up what it is
// told.
type prunedDeliveries struct{ n atomic.Int64 }

func (p *prunedDeliveries) Committed(workflowID, kind, action string) {}
func (p *prunedDeliveries) Pruned(workflowID, runID string)           {}
func (p *prunedDeliveries) DeliveriesPruned(n int)                    { p.n.Add(int64(n)) }

// KeepDeliveries deletes, by the engine's clock, the settled deliveries
// (delivered, failed) whose last attempt is older than the retention,
// with their attempts, and keeps a pending one however old; the answer
// for a pruned delivery is a 404 naming retention; the observer counts
// the deletions.
func TestWebhookRetentionKeepsPendingDeliveries(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		ctx := context.Background()
		st := b.New(t).Open(t)
		fc := clock.NewFake(hookT0)
		rc := newHookReceiver(t)
		rc.answer = func(n int, _ string) int {
			if n == 2 || n == 3 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}
		obs := &prunedDeliveries{}
		eng, err := engine.New(st, []*workflow.Definition{hookFlow(t)}, &engine.Options{Clock: fc, Webhooks: hookSender(fc), Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		rc.mu.Lock()
		rc.now = fc.Now
		rc.mu.Unlock()
		h := &hookRig{eng: eng, clock: fc, rc: rc}
		sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
		// started starts a run and returns its delivery; deliver sends
		// what is due with a retry schedule.
		started := func() string {
			t.Helper()
			if _, err := eng.StartRun(ctx, "", nil, engine.StartOptions{}); err != nil {
				t.Fatal(err)
			}
			page, err := eng.WebhookDeliveries(ctx, sub.ID, "", 1)
			if err != nil || len(page.Deliveries) != 1 {
				t.Fatalf("deliveries: %+v, %v", page, err)
			}
			return page.Deliveries[0].ID
		}
		deliver := func(retry webhook.Schedule) {
			t.Helper()
			if _, err := eng.DeliverDue(ctx, &engine.DeliveryOptions{Owner: "test", Rand: func() float64 { return 0 }, Retry: retry}); err != nil {
				t.Fatal(err)
			}
		}
		month := webhook.Schedule{FirstDelay: 30 * 24 * time.Hour, MaxDelay: 30 * 24 * time.Hour, GiveUp: 60 * 24 * time.Hour}
		status := func(id string) string {
			t.Helper()
			d, err := eng.WebhookDelivery(ctx, sub.ID, id, 0, 0)
			if protocol.ErrorCode(err) == protocol.ENotFound {
				return "gone"
			}
			if err != nil {
				t.Fatal(err)
			}
			return d.Status
		}

		delivered := started() // delivered at t0
		deliver(month)
		fc.Advance(time.Hour)
		retried := started() // answered 503 at t0+1h, retried in 30 days: pending
		deliver(month)
		fc.Advance(time.Hour)
		failed := started() // answered 503 at t0+2h and given up at once: failed
		deliver(webhook.Schedule{GiveUp: time.Nanosecond})
		fc.Set(hookT0.Add(8 * 24 * time.Hour))
		recent := started() // delivered at t0+8d
		deliver(month)
		for id, want := range map[string]string{delivered: "delivered", retried: "pending", failed: "failed", recent: "delivered"} {
			if got := status(id); got != want {
				t.Fatalf("delivery %s is %s before retention, want %s", id, got, want)
			}
		}

		const keep, every = 7 * 24 * time.Hour, 24 * time.Hour
		kctx, cancel := context.WithCancel(ctx)
		defer cancel()
		rounds := make(chan int, 10)
		done := make(chan struct{})
		go func() {
			defer close(done)
			eng.KeepDeliveries(kctx, keep, every, func(n int, err error) {
				if err != nil {
					t.Errorf("retention: %v", err)
				}
				rounds <- n
			})
		}()
		if n := <-rounds; n != 2 {
			t.Fatalf("the first round deleted %d deliveries, want 2 (the delivered and the failed one settled before t0+1d)", n)
		}
		for id, want := range map[string]string{delivered: "gone", retried: "pending", failed: "gone", recent: "delivered"} {
			if got := status(id); got != want {
				t.Fatalf("delivery %s is %s after the first round, want %s", id, got, want)
			}
		}
		_, err = eng.WebhookDelivery(ctx, sub.ID, delivered, 0, 0)
		if h := protocol.ErrorHint(err); !strings.Contains(h, "never existed") || !strings.Contains(h, "retention") || !strings.Contains(h, "168h") {
			t.Fatalf("the hint for a pruned delivery %q names neither retention nor its 168h", h)
		}
		if _, err := eng.Redeliver(ctx, sub.ID, failed); protocol.ErrorCode(err) != protocol.ENotFound {
			t.Fatalf("redelivering a pruned delivery: %v, want not found", err)
		}
		if d, err := eng.WebhookDelivery(ctx, sub.ID, retried, 0, 0); err != nil || len(d.History) != 1 {
			t.Fatalf("the pending delivery after retention: %+v, %v; want its attempt kept", d, err)
		}

		// Day by day (each timer of the loop fires at its due time): the
		// recent delivery stays while its last attempt is 7 days old or
		// less, and goes on the first round after.
		for day := 9; day <= 15; day++ {
			if err := fc.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			fc.Advance(every)
			if err := fc.BlockUntil(ctx, 1); err != nil { // the round is over
				t.Fatal(err)
			}
			if got := status(recent); got != "delivered" {
				t.Fatalf("day %d: the delivery settled on day 8 is %s, want delivered", day, got)
			}
		}
		fc.Advance(every)
		if n := <-rounds; n != 1 {
			t.Fatalf("day 16: the round deleted %d deliveries, want 1", n)
		}
		if got, want := status(recent), "gone"; got != want {
			t.Fatalf("day 16: the delivery settled on day 8 is %s, want %s", got, want)
		}
		if got := status(retried); got != "pending" {
			t.Fatalf("day 16: the pending delivery is %s", got)
		}
		if n := obs.n.Load(); n != 3 {
			t.Fatalf("the observer heard of %d deliveries pruned, want 3", n)
		}
		cancel()
		<-done
		_, err = eng.WebhookDelivery(ctx, sub.ID, delivered, 0, 0)
		if h := protocol.ErrorHint(err); !strings.Contains(h, "retention") || strings.Contains(h, "168h") {
			t.Fatalf("the hint once retention stopped %q: want retention named, without a duration", h)
		}
		if len(rc.received()) != 4 {
			t.Fatalf("the receiver got %d requests, want 4", len(rc.received()))
		}
	})
}

// A delivery asked of a subscription that does not exist is answered with
// the subscription's not-found, whose hint leads somewhere (GET /webhooks),
// not with the delivery's, whose hint names the subscription's deliveries.
func TestDeliveryOfAnUnknownSubscription(t *testing.T) {
	st := memstore.New()
	h := newHookRig(t, st, clock.NewFake(hookT0), newHookReceiver(t))
	sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
	ctx := context.Background()
	for _, tc := range []struct{ sub, want string }{
		{"wh_nope", `No webhook subscription "wh_nope": GET /webhooks lists them.`},
		{sub.ID, `No delivery "dlv_nope" of webhook subscription "` + sub.ID + `"`},
	} {
		_, err := h.eng.WebhookDelivery(ctx, tc.sub, "dlv_nope", 0, 0)
		if protocol.ErrorCode(err) != protocol.ENotFound || !strings.Contains(protocol.ErrorHint(err), tc.want) {
			t.Errorf("delivery of subscription %s: %v, want not found with %q", tc.sub, err, tc.want)
		}
		_, err = h.eng.Redeliver(ctx, tc.sub, "dlv_nope")
		if protocol.ErrorCode(err) != protocol.ENotFound || !strings.Contains(protocol.ErrorHint(err), tc.want) {
			t.Errorf("redelivery in subscription %s: %v, want not found with %q", tc.sub, err, tc.want)
		}
	}
}
