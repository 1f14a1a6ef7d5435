package webhook_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// failingRecords is a store whose RecordAttempts fails while fail is set.
type failingRecords struct {
	store.Store
	fail  atomic.Bool
	calls atomic.Int64
}

func (f *failingRecords) RecordAttempts(ctx context.Context, owner string, rs []store.AttemptRecord) ([]error, error) {
	f.calls.Add(1)
	if f.fail.Load() {
		return nil, errors.New("the disk is full")
	}
	return f.Store.RecordAttempts(ctx, owner, rs)
}

// A message whose attempt cannot be recorded stays pending and is sent
// again once its lease ends; the loop goes on.
func TestWebhookAttemptNotRecordedIsSentAgain(t *testing.T) {
	st := &failingRecords{Store: backends.All()[0].New(t).Open(t)}
	fc := clock.NewFake(hookT0)
	rc := newHookReceiver(t)
	h := newHookRig(t, st, fc, rc)
	sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.state_changed"}})
	run, _ := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
	h.move(t, run.ID, "submit")
	st.fail.Store(true)
	if n := h.deliver(t); n != 1 || len(rc.received()) != 1 || st.calls.Load() != 1 {
		t.Fatalf("claimed %d, received %d, %d records", n, len(rc.received()), st.calls.Load())
	}
	st.fail.Store(false)
	if n := h.deliver(t); n != 0 {
		t.Fatalf("claimed %d while the lease of the unrecorded attempt holds", n)
	}
	fc.Advance(engine.DefaultLease)
	if n := h.deliver(t); n != 1 {
		t.Fatalf("claimed %d once the lease ended, want the message again", n)
	}
	got := rc.received()
	if len(got) != 2 || got[0].ID != got[1].ID {
		t.Fatalf("received %+v, want the message twice under one id", got)
	}
	page, err := h.eng.WebhookDeliveries(context.Background(), sub.ID, "", 10)
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].Status != "delivered" || page.Deliveries[0].Attempts != 1 {
		t.Fatalf("deliveries %+v, %v; want one delivered, one attempt recorded", page, err)
	}
}
