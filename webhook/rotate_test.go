package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/webhook"
	"github.com/asmp-dev/asmp/workflow"
)

// A rotation with a grace of 0 revokes the old secret at once: the next
// message carries one signature, which the old secret does not verify.
func TestWebhooksRotateWithoutGraceRevokes(t *testing.T) {
	st := backends.All()[0].New(t).Open(t)
	fc := clock.NewFake(hookT0)
	h := newHookRig(t, st, fc, newHookReceiver(t))
	sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
	grace, err := workflow.ParseDuration("0")
	if err != nil {
		t.Fatal(err)
	}
	rot, err := h.eng.RotateWebhookSecret(context.Background(), sub.ID, grace)
	if err != nil {
		t.Fatal(err)
	}
	h.rc.mu.Lock()
	h.rc.secret = sub.Secret // the revoked one
	h.rc.mu.Unlock()
	h.rc.t = quietT{t} // the receiver's verification is expected to fail
	if _, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	m := h.rc.received()[0]
	if sigs := strings.Fields(m.Header.Get("webhook-signature")); len(sigs) != 1 {
		t.Fatalf("signatures after a rotation without grace: %q, want the new secret's only", m.Header.Get("webhook-signature"))
	}
	if m.Status == 200 {
		t.Fatal("the revoked secret still verifies")
	}
	h.rc.mu.Lock()
	h.rc.secret = rot.Secret
	h.rc.mu.Unlock()
	h.rc.t = t
	if _, err := h.eng.Redeliver(context.Background(), sub.ID, h.lastDelivery(t, sub.ID)); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if m := h.rc.received()[1]; m.Status != 200 {
		t.Fatalf("the new secret does not verify: status %d", m.Status)
	}
}

// quietT is a testing.TB whose Errorf records nothing: for a receiver
// whose verification is meant to fail.
type quietT struct{ testing.TB }

func (quietT) Errorf(string, ...any) {}

func (h *hookRig) lastDelivery(t testing.TB, sub string) string {
	t.Helper()
	page, err := h.eng.WebhookDeliveries(context.Background(), sub, "", 1)
	if err != nil || len(page.Deliveries) == 0 {
		t.Fatalf("deliveries: %+v, %v", page, err)
	}
	return page.Deliveries[0].ID
}

// Rotations with a grace period add a signing secret each, up to
// webhook.MaxLiveSecrets; one more is refused (409, with a hint), so a
// message never carries more signatures than that; a rotation with grace
// 0 still works and leaves one.
func TestWebhooksRotationsAreBounded(t *testing.T) {
	st := backends.All()[0].New(t).Open(t)
	fc := clock.NewFake(hookT0)
	h := newHookRig(t, st, fc, newHookReceiver(t))
	sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
	for range webhook.MaxLiveSecrets - 1 {
		if _, err := h.eng.RotateWebhookSecret(context.Background(), sub.ID, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.eng.RotateWebhookSecret(context.Background(), sub.ID, time.Hour)
	if protocol.ErrorCode(err) != protocol.EConflict || !strings.Contains(protocol.ErrorHint(err), "rotate with grace 0") {
		t.Fatalf("rotation with %d secrets live: %v, want a conflict saying how to go on", webhook.MaxLiveSecrets, err)
	}
	rot, err := h.eng.RotateWebhookSecret(context.Background(), sub.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.rc.mu.Lock()
	h.rc.secret = rot.Secret
	h.rc.mu.Unlock()
	if _, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if m := h.rc.received()[0]; len(strings.Fields(m.Header.Get("webhook-signature"))) != 1 || m.Status != 200 {
		t.Fatalf("after a rotation without grace: %q, status %d", m.Header.Get("webhook-signature"), m.Status)
	}
	for range webhook.MaxLiveSecrets - 1 { // at the bound again
		if _, err := h.eng.RotateWebhookSecret(context.Background(), sub.ID, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	fc.Advance(time.Hour) // their graces ended: a rotation with one works again
	if _, err := h.eng.RotateWebhookSecret(context.Background(), sub.ID, time.Hour); err != nil {
		t.Fatalf("rotation once the graces ended: %v", err)
	}
}
