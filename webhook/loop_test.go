package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
)

// subscribeDead subscribes a receiver that answers nothing until release
// is closed (or the request is given up) to every run change.
func (h *hookRig) subscribeDead(t *testing.T) (release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	if _, err := h.eng.CreateWebhook(context.Background(), protocol.WebhookRequest{URL: hang.URL + "/dead", Events: []string{"run.created", "run.state_changed"}}); err != nil {
		t.Fatal(err)
	}
	return release
}

// startRuns starts n runs as alice, each moved by actions.
func (h *hookRig) startRuns(t *testing.T, n int, actions ...string) {
	t.Helper()
	for range n {
		run, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{Actor: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		h.move(t, run.ID, actions...)
	}
}

// A receiver that never answers holds up only its own subscription's
// messages: the loop goes on claiming and sending every other
// subscription's, each run's in order, while the dead receiver's requests
// hang (it waited for the whole claim to be answered before).
func TestWebhookLoopSlowReceiverHoldsUpOnlyItsOwn(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		h := newHookRig(t, st, clock.NewFake(hookT0), newHookReceiver(t))
		h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created", "run.state_changed"}})
		release := h.subscribeDead(t)
		const runs = 20
		h.startRuns(t, runs, "submit", "tick")
		loop := h.eng.StartDeliveries(&engine.DeliveryOptions{Owner: "test", Poll: time.Hour})
		for deadline := time.Now().Add(10 * time.Second); len(h.rc.received()) < 3*runs; {
			if time.Now().After(deadline) {
				close(release)
				loop.Stop()
				t.Fatalf("%d of %d messages reached the live receiver while the other hung", len(h.rc.received()), 3*runs)
			}
			time.Sleep(5 * time.Millisecond)
		}
		byRun := map[string]string{}
		for _, m := range h.rc.received() {
			byRun[m.Msg.Data.RunID] += " " + m.Msg.Type + "@" + m.Msg.Data.State
		}
		for id, got := range byRun {
			if want := " run.created@START run.state_changed@REVIEW run.state_changed@REVIEW"; got != want {
				t.Errorf("run %s: received%s, want%s", id, got, want)
			}
		}
		close(release)
		loop.Stop()
	})
}

// A receiver that answered nothing yet took the room of the deliveries
// claimed while it did not look slow (they wait for its slots); once it
// counts as slow, all but its share of those are given back (trim), so
// the room they held goes to the other subscriptions again, which would
// otherwise wait for the dead receiver's requests to end.
func TestWebhookLoopGivesBackTheRoomASlowReceiverHeld(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		h := newHookRig(t, st, clock.NewFake(hookT0), newHookReceiver(t))
		release := h.subscribeDead(t)
		h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created", "run.state_changed"}})
		const runs = 20
		h.startRuns(t, runs, "submit", "tick")
		// Room for 8: the dead receiver's 2 in flight and its waiting
		// ones soon take all of it.
		loop := h.eng.StartDeliveries(&engine.DeliveryOptions{Owner: "test", Poll: 50 * time.Millisecond, Concurrency: 8, PerSubscription: 2})
		defer func() { close(release); loop.Stop() }()
		// The loop polls by the engine's clock, which moves here as the
		// wall clock does; a subscription is slow after a second without
		// an answer (wall time). The deadline is before the sender's
		// timeout (5 s) ends the dead receiver's requests, which would
		// free its slots without the room given back.
		for deadline := time.Now().Add(4 * time.Second); len(h.rc.received()) < 3*runs; {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d messages reached the live receiver: the dead one kept the room", len(h.rc.received()), 3*runs)
			}
			time.Sleep(20 * time.Millisecond)
			h.clock.Advance(20 * time.Millisecond)
		}
	})
}

// A delivery claimed again while it is still this loop's (in flight, or
// waiting for its subscription's slot, when its lease ended meanwhile) is
// not sent a second time: each message reaches the receiver once.
func TestWebhookLoopSendsAReclaimedDeliveryOnce(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		fc := clock.NewFake(hookT0)
		h := newHookRig(t, st, fc, newHookReceiver(t))
		gate := make(chan struct{})
		var mu sync.Mutex
		seen := map[string]int{}
		held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[r.Header.Get("webhook-id")]++
			mu.Unlock()
			select {
			case <-gate:
			case <-r.Context().Done():
			}
		}))
		defer held.Close()
		sub, err := h.eng.CreateWebhook(context.Background(), protocol.WebhookRequest{URL: held.URL + "/held", Events: []string{"run.created"}})
		if err != nil {
			t.Fatal(err)
		}
		const runs = 3
		h.startRuns(t, runs)
		// One slot: the first message is in flight (held), the others wait.
		const lease = 2 * time.Second
		loop := h.eng.StartDeliveries(&engine.DeliveryOptions{Owner: "test", Poll: 100 * time.Millisecond, Lease: lease, PerSubscription: 1})
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				close(gate)
				loop.Stop()
			}
		}
		defer stop()
		leases := func() (n int, until time.Time) {
			page, err := h.eng.WebhookDeliveries(context.Background(), sub.ID, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Deliveries {
				got, err := st.GetDelivery(context.Background(), sub.ID, d.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Owner == "test" {
					n++
					if until.IsZero() || got.LeaseUntil.Before(until) {
						until = got.LeaseUntil
					}
				}
			}
			return n, until
		}
		waitFor := func(what string, ok func() bool) {
			for deadline := time.Now().Add(10 * time.Second); !ok(); {
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %s", what)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		waitFor("the three messages claimed", func() bool { n, _ := leases(); return n == runs })
		// Their leases end while they are still this loop's: the next
		// claim returns all three again.
		_, first := leases()
		fc.Advance(lease + time.Second)
		waitFor("the three messages claimed again", func() bool {
			fc.Advance(10 * time.Millisecond) // the loop may have set its timer after the jump
			n, until := leases()
			return n == runs && until.After(first)
		})
		// Open the gate and let the loop send what it holds: once all
		// three are recorded delivered, a second sending of one would
		// have started (a slot is taken at the answer, before its record).
		close(gate)
		waitFor("the three messages delivered", func() bool {
			page, err := h.eng.WebhookDeliveries(context.Background(), sub.ID, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, d := range page.Deliveries {
				if d.Status == "delivered" {
					n++
				}
			}
			return n == runs
		})
		loop.Stop() // waits for the requests in flight
		stopped = true
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != runs {
			t.Fatalf("%d messages reached the receiver, want %d: %v", len(seen), runs, seen)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("message %s sent %d times, want once", id, n)
			}
		}
	})
}
