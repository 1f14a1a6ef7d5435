package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/webhook"
	"github.com/asmp-dev/asmp/workflow"
)

// hookReceiver is a webhook hookReceiver on loopback: it verifies every request
// with the SDK's verifier, answers what answer says (200 by default) and
// keeps what it was sent.
type hookReceiver struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	secret   string
	answer   func(n int, id string) int // the status for the n-th request (from 1)
	got      []hookMsg
	inFlight map[string]int // message id -> requests being answered
	overlap  bool           // a message was in flight twice at once
	now      func() time.Time
}

type hookMsg struct {
	ID     string
	Status int
	Msg    protocol.WebhookMessage
	Header http.Header
}

func newHookReceiver(t testing.TB) *hookReceiver {
	rc := &hookReceiver{t: t, inFlight: map[string]int{}, now: time.Now}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	secret, now := rc.secret, rc.now()
	rc.inFlight[id]++
	if rc.inFlight[id] > 1 {
		rc.overlap = true
	}
	n := len(rc.got) + 1
	status := http.StatusOK
	if rc.answer != nil {
		status = rc.answer(n, id)
	}
	rc.mu.Unlock()
	if err := client.VerifyWebhookAt(secret, r.Header, body, time.Minute, now); err != nil {
		rc.t.Errorf("message %s does not verify: %v", id, err)
		status = http.StatusBadRequest
	}
	var m protocol.WebhookMessage
	if err := json.Unmarshal(body, &m); err != nil {
		rc.t.Errorf("message %s: %v", id, err)
	}
	time.Sleep(time.Millisecond) // widen the window in which a second sender would overlap
	rc.mu.Lock()
	rc.inFlight[id]--
	rc.got = append(rc.got, hookMsg{ID: id, Status: status, Msg: m, Header: r.Header.Clone()})
	rc.mu.Unlock()
	w.WriteHeader(status)
}

func (rc *hookReceiver) received() []hookMsg {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookMsg(nil), rc.got...)
}

// hookFlow: START -submit-> REVIEW -approve-> DONE (completed), REVIEW -tick-> REVIEW.
func hookFlow(t testing.TB) *workflow.Definition {
	t.Helper()
	b := workflow.New("hook-v1", "START")
	b.State("START")
	b.State("REVIEW")
	b.State("DONE")
	b.Transition("START", "submit", "REVIEW")
	b.Transition("REVIEW", "tick", "REVIEW")
	b.Transition("REVIEW", "approve", "DONE")
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type hookRig struct {
	eng   *engine.Engine
	clock *clock.Fake
	rc    *hookReceiver
}

var hookT0 = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

func hookSender(fc *clock.Fake) *webhook.Sender {
	allow, err := webhook.ParseAllowList("127.0.0.1/32")
	if err != nil {
		panic(err)
	}
	return webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Allow: allow}, Now: fc.Now, Timeout: 5 * time.Second})
}

func newHookRig(t testing.TB, st store.Store, fc *clock.Fake, rc *hookReceiver) *hookRig {
	t.Helper()
	eng, err := engine.New(st, []*workflow.Definition{hookFlow(t)}, &engine.Options{Clock: fc, Webhooks: hookSender(fc)})
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.now = fc.Now
	rc.mu.Unlock()
	return &hookRig{eng: eng, clock: fc, rc: rc}
}

func (h *hookRig) subscribe(t testing.TB, req protocol.WebhookRequest) protocol.WebhookSubscription {
	t.Helper()
	if req.URL == "" {
		req.URL = h.rc.srv.URL + "/hook"
	}
	sub, err := h.eng.CreateWebhook(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	h.rc.mu.Lock()
	h.rc.secret = sub.Secret
	h.rc.mu.Unlock()
	return sub
}

func (h *hookRig) deliver(t testing.TB) int {
	t.Helper()
	n, err := h.eng.DeliverDue(context.Background(), &engine.DeliveryOptions{Owner: "test", Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// retriedAfter checks that the one message waiting for its retry is sent
// after wait by fc, not a millisecond sooner, and that the receiver then
// has received messages in all.
func (h *hookRig) retriedAfter(t testing.TB, fc *clock.Fake, wait time.Duration, received int) {
	t.Helper()
	fc.Advance(wait - time.Millisecond)
	if n := h.deliver(t); n != 0 {
		t.Fatalf("claimed %d before the %s backoff ended", n, wait)
	}
	fc.Advance(time.Millisecond)
	if n := h.deliver(t); n != 1 || len(h.rc.received()) != received {
		t.Fatalf("retry %s after the failed attempt: claimed %d, received %d, want 1 and %d in all", wait, n, len(h.rc.received()), received)
	}
}

func (h *hookRig) move(t testing.TB, id string, actions ...string) {
	t.Helper()
	for _, a := range actions {
		if _, err := h.eng.Transition(context.Background(), id, a, nil, engine.TransitionOptions{Actor: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
}

func hookTypes(ms []hookMsg) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Msg.Type+"@"+m.Msg.Data.State)
	}
	return strings.Join(out, " ")
}

// A run's changes reach the hookReceiver signed, in order, with the message
// body the spec names; the outbox is written with each commit.
func TestWebhooksDeliverSignedMessagesInOrder(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		h := newHookRig(t, st, clock.NewFake(hookT0), newHookReceiver(t))
		sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created", "run.state_changed", "run.completed"}})
		if !strings.HasPrefix(sub.Secret, "whsec_") {
			t.Fatalf("secret %q", sub.Secret)
		}
		run, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{Actor: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		h.move(t, run.ID, "submit", "tick", "approve")
		if n, _ := st.PendingDeliveries(context.Background()); n != 5 {
			t.Fatalf("pending deliveries = %d, want 5 (created, 3 state changes, completed)", n)
		}
		for h.deliver(t) > 0 {
		}
		got := h.rc.received()
		if want := "run.created@START run.state_changed@REVIEW run.state_changed@REVIEW run.state_changed@DONE run.completed@DONE"; hookTypes(got) != want {
			t.Fatalf("received %s\nwant     %s", hookTypes(got), want)
		}
		last := got[3].Msg
		if last.Data.RunID != run.ID || last.Data.WorkflowID != "hook-v1" || last.Data.WorkflowVersion != run.WorkflowVersion || last.Data.From != "REVIEW" ||
			last.Data.Action != "approve" || last.Data.Actor != "alice" || last.Data.Status != "completed" || last.Data.FrameHref != "/runs/"+run.ID || !last.Timestamp.Equal(hookT0) {
			t.Fatalf("message data %+v", last)
		}
		if got[0].Msg.Data.Action != "" || got[0].Msg.Data.From != "" {
			t.Fatalf("run.created names an action: %+v", got[0].Msg.Data)
		}
		ids := map[string]bool{}
		for _, m := range got {
			if ids[m.ID] {
				t.Fatalf("message id %s sent twice", m.ID)
			}
			ids[m.ID] = true
		}
		if h.deliver(t) != 0 || len(h.rc.received()) != 5 {
			t.Fatal("delivered messages were sent again")
		}
		page, err := h.eng.WebhookDeliveries(context.Background(), sub.ID, "", 10)
		if err != nil || len(page.Deliveries) != 5 {
			t.Fatalf("deliveries: %+v, %v", page, err)
		}
		for _, d := range page.Deliveries {
			if d.Status != "delivered" || d.Attempts != 1 {
				t.Fatalf("delivery %+v", d)
			}
		}
	})
}

// Subscriptions filter by event type, workflow and state; a server without
// a subscription stores no deliveries.
func TestWebhooksFilter(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		h := newHookRig(t, st, clock.NewFake(hookT0), newHookReceiver(t))
		run, _ := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
		h.move(t, run.ID, "submit")
		if n, _ := st.PendingDeliveries(context.Background()); n != 0 {
			t.Fatalf("pending deliveries without a subscription = %d", n)
		}
		h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.state_changed"}, WorkflowID: "hook-v1", States: []string{"DONE"}})
		h.move(t, run.ID, "tick", "approve")
		for h.deliver(t) > 0 {
		}
		if got := hookTypes(h.rc.received()); got != "run.state_changed@DONE" {
			t.Fatalf("received %q, want only the entry into DONE", got)
		}
		for _, bad := range []protocol.WebhookRequest{
			{URL: h.rc.srv.URL, Events: []string{"run.exploded"}},
			{URL: h.rc.srv.URL},
			{URL: h.rc.srv.URL, Events: []string{"run.completed"}, WorkflowID: "nope-v1"},
			{URL: h.rc.srv.URL, Events: []string{"run.completed"}, States: []string{"NOWHERE"}},
			{Events: []string{"run.completed"}},
		} {
			if _, err := h.eng.CreateWebhook(context.Background(), bad); protocol.ErrorCode(err) != protocol.EInvalid || protocol.ErrorHint(err) == "" {
				t.Errorf("CreateWebhook(%+v) = %v, want EInvalid with a hint", bad, err)
			}
		}
	})
}

// A hookReceiver that answers 500 three times gets the message on the 4th
// attempt, after the backoff (5 s, 10 s, 20 s with no jitter); each attempt
// is recorded. Later messages of the run wait behind it (order per run).
func TestWebhooksRetryWithBackoff(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		fc := clock.NewFake(hookT0)
		rc := newHookReceiver(t)
		rc.answer = func(n int, _ string) int {
			if n <= 3 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}
		h := newHookRig(t, st, fc, rc)
		sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.state_changed"}})
		run, _ := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
		h.move(t, run.ID, "submit", "tick")
		for i, wait := range []time.Duration{0, 5 * time.Second, 10 * time.Second, 20 * time.Second} {
			if wait > 0 {
				fc.Advance(wait - time.Millisecond)
				if n := h.deliver(t); n != 0 {
					t.Fatalf("attempt %d: %d deliveries claimed before the backoff of %s ended", i+1, n, wait)
				}
				fc.Advance(time.Millisecond)
			}
			if n := h.deliver(t); n != 1 {
				t.Fatalf("attempt %d: claimed %d, want the head of the run's queue only", i+1, n)
			}
		}
		got := h.rc.received()
		if len(got) != 4 || got[3].Status != 200 || got[0].ID != got[3].ID {
			t.Fatalf("received %+v", got)
		}
		page, _ := h.eng.WebhookDeliveries(context.Background(), sub.ID, "", 10)
		var first protocol.WebhookDelivery
		for _, d := range page.Deliveries {
			if d.MessageID == got[0].ID {
				first = d
			}
		}
		d, err := h.eng.WebhookDelivery(context.Background(), sub.ID, first.ID, 0, 0)
		if err != nil || d.Status != "delivered" || d.Attempts != 4 || len(d.History) != 4 || d.History[0].Status != 500 || d.History[0].Class != "non_2xx" || d.History[3].Class != "delivered" {
			t.Fatalf("delivery after 4 attempts: %+v, %v", d, err)
		}
		if n := h.deliver(t); n != 1 || len(h.rc.received()) != 5 {
			t.Fatalf("the run's second message was not sent once the first got through (%d)", n)
		}
	})
}

// The backoff runs from when the failed attempt ended, not from when it
// started: a receiver that takes 8 s to answer 500 (or one that times
// out) is not asked again at once because the 5 s of the first retry went
// by while it was answering.
func TestWebhooksBackoffCountsFromTheAnswer(t *testing.T) {
	st := backends.All()[0].New(t).Open(t)
	fc := clock.NewFake(hookT0)
	rc := newHookReceiver(t)
	rc.answer = func(n int, _ string) int {
		if n == 1 {
			fc.Advance(8 * time.Second) // a slow answer, by the engine's clock
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	h := newHookRig(t, st, fc, rc)
	h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
	if _, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := h.deliver(t); n != 1 {
		t.Fatalf("first attempt: claimed %d", n)
	}
	if n := h.deliver(t); n != 0 {
		t.Fatalf("claimed %d right after an answer that took 8 s: the 5 s backoff counted from the attempt's start", n)
	}
	h.retriedAfter(t, fc, 5*time.Second, 2)
}

// A redelivered message that fails is retried after the first backoff (5
// s), as a new one would be: its earlier attempts do not carry its
// retries on to the fourth backoff (20 s), on every store.
func TestWebhooksRedeliveredRetriesFromTheFirstBackoff(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		fc := clock.NewFake(hookT0)
		rc := newHookReceiver(t)
		rc.answer = func(n int, _ string) int {
			if n == 3 || n == 5 {
				return http.StatusOK
			}
			return http.StatusInternalServerError
		}
		h := newHookRig(t, st, fc, rc)
		sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
		if _, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, wait := range []time.Duration{0, 5 * time.Second, 10 * time.Second} { // 500, 500, 200
			fc.Advance(wait)
			if n := h.deliver(t); n != 1 {
				t.Fatalf("claimed %d after %s", n, wait)
			}
		}
		page, err := h.eng.WebhookDeliveries(context.Background(), sub.ID, "", 10)
		if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].Status != "delivered" {
			t.Fatalf("deliveries %+v, %v", page, err)
		}
		if _, err := h.eng.Redeliver(context.Background(), sub.ID, page.Deliveries[0].ID); err != nil {
			t.Fatal(err)
		}
		if n := h.deliver(t); n != 1 { // the 4th attempt: 500
			t.Fatalf("redelivery: claimed %d", n)
		}
		h.retriedAfter(t, fc, 5*time.Second, 5) // not 20 s: the backoff starts again
	})
}

// A message whose retries run past the give-up time is failed and kept;
// redelivering sends it again under the same id.
func TestWebhooksGiveUpAndRedeliver(t *testing.T) {
	st := backends.All()[0].New(t).Open(t)
	fc := clock.NewFake(hookT0)
	rc := newHookReceiver(t)
	failing := true
	rc.answer = func(int, string) int {
		if failing {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	}
	h := newHookRig(t, st, fc, rc)
	sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
	if _, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := &engine.DeliveryOptions{Owner: "test", Rand: func() float64 { return 0 }, Retry: webhook.Schedule{GiveUp: time.Minute}}
	for range 20 {
		if _, err := h.eng.DeliverDue(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		fc.Advance(5 * time.Second)
	}
	page, _ := h.eng.WebhookDeliveries(context.Background(), sub.ID, "", 10)
	if len(page.Deliveries) != 1 || page.Deliveries[0].Status != "failed" || page.Deliveries[0].Attempts != 4 {
		t.Fatalf("after giving up: %+v (want failed after 4 attempts: 0, 5, 15, 35 s; 75 s is past the minute)", page.Deliveries)
	}
	failing = false
	d, err := h.eng.Redeliver(context.Background(), sub.ID, page.Deliveries[0].ID)
	if err != nil || d.Status != "pending" {
		t.Fatalf("redeliver: %+v, %v", d, err)
	}
	if n, _ := h.eng.DeliverDue(context.Background(), opts); n != 1 {
		t.Fatal("the redelivered message was not claimed")
	}
	got := rc.received()
	if len(got) != 5 || got[4].ID != got[0].ID || got[4].Status != http.StatusNoContent {
		t.Fatalf("redelivery: %+v", got)
	}
	if _, err := h.eng.Redeliver(context.Background(), sub.ID, "dlv_nope"); protocol.ErrorCode(err) != protocol.ENotFound {
		t.Fatalf("redeliver of an unknown delivery: %v", err)
	}
}

// A hookReceiver that answers 410 Gone disables its subscription: nothing
// more is stored or sent for it.
func TestWebhooksGoneDisables(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		rc := newHookReceiver(t)
		rc.answer = func(int, string) int { return http.StatusGone }
		h := newHookRig(t, st, clock.NewFake(hookT0), rc)
		sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
		h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
		h.deliver(t)
		got, err := h.eng.Webhook(context.Background(), sub.ID)
		if err != nil || got.Status != "disabled" || !strings.Contains(got.DisabledReason, "410") {
			t.Fatalf("after 410: %+v, %v", got, err)
		}
		h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
		if n, _ := st.PendingDeliveries(context.Background()); n != 0 {
			t.Fatalf("a disabled subscription got %d new deliveries", n)
		}
		if h.deliver(t) != 0 || len(rc.received()) != 1 {
			t.Fatal("a disabled subscription was sent to")
		}
	})
}

// Targets on loopback are refused without the allow list: when the
// subscription is made, and when a message is sent (a server restarted
// without --webhook-allow).
func TestWebhooksRefuseLoopbackWithoutAllow(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		fc := clock.NewFake(hookT0)
		rc := newHookReceiver(t)
		closed, err := engine.New(st, []*workflow.Definition{hookFlow(t)}, &engine.Options{Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{rc.srv.URL, strings.Replace(rc.srv.URL, "127.0.0.1", "localhost", 1), "https://127.0.0.1/x", "https://169.254.169.254/latest", "https://[::1]/"} {
			if _, err := closed.CreateWebhook(context.Background(), protocol.WebhookRequest{URL: u, Events: []string{"run.created"}}); protocol.ErrorCode(err) != protocol.EInvalid || !strings.Contains(protocol.ErrorHint(err), "webhook-allow") {
				t.Errorf("subscribing %s without the allow list: %v", u, err)
			}
		}
		open := newHookRig(t, st, fc, rc)
		sub := open.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
		closed2, err := engine.New(st, []*workflow.Definition{hookFlow(t)}, &engine.Options{Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := closed2.StartRun(context.Background(), "", nil, engine.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		if n, _ := closed2.DeliverDue(context.Background(), &engine.DeliveryOptions{Owner: "closed"}); n != 1 {
			t.Fatalf("claimed %d", n)
		}
		if len(rc.received()) != 0 {
			t.Fatal("a loopback target was reached without the allow list")
		}
		page, _ := closed2.WebhookDeliveries(context.Background(), sub.ID, "", 10)
		d, _ := closed2.WebhookDelivery(context.Background(), sub.ID, page.Deliveries[0].ID, 0, 0)
		if d.Status != "pending" || len(d.History) != 1 || d.History[0].Class != "refused" {
			t.Fatalf("send without the allow list: %+v", d)
		}
	})
}

// Messages stored in commits survive a restart before they are sent: a
// new engine on the same store delivers each once.
func TestWebhooksSurviveRestart(t *testing.T) {
	for _, b := range backends.All() {
		if !b.Durable {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			place := b.New(t)
			st := place.Open(t)
			fc := clock.NewFake(hookT0)
			rc := newHookReceiver(t)
			h := newHookRig(t, st, fc, rc)
			h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created", "run.state_changed"}})
			var ids []string
			for range 5 {
				run, _ := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
				h.move(t, run.ID, "submit")
				ids = append(ids, run.ID)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			h2 := newHookRig(t, place.Open(t), fc, rc)
			for h2.deliver(t) > 0 {
			}
			got := rc.received()
			if len(got) != 10 {
				t.Fatalf("after restart, received %d messages, want 10", len(got))
			}
			per := map[string]int{}
			for _, m := range got {
				per[m.Msg.Data.RunID]++
			}
			for _, id := range ids {
				if per[id] != 2 {
					t.Fatalf("run %s: %d messages, want created and state_changed", id, per[id])
				}
			}
		})
	}
}

// Secret rotation: while the old secret is in its grace period each
// message carries two signatures, and a hookReceiver holding either verifies.
func TestWebhooksRotateSecret(t *testing.T) {
	st := backends.All()[0].New(t).Open(t)
	fc := clock.NewFake(hookT0)
	rc := newHookReceiver(t)
	h := newHookRig(t, st, fc, rc)
	sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
	old := sub.Secret
	rot, err := h.eng.RotateWebhookSecret(context.Background(), sub.ID, time.Hour)
	if err != nil || rot.Secret == "" || rot.Secret == old {
		t.Fatalf("rotate: %+v, %v", rot, err)
	}
	if got, _ := h.eng.Webhook(context.Background(), sub.ID); got.Secret != "" {
		t.Fatal("GET shows the secret")
	}
	rc.secret = old
	h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
	h.deliver(t)
	m := rc.received()[0]
	if sigs := strings.Fields(m.Header.Get("webhook-signature")); len(sigs) != 2 {
		t.Fatalf("signatures during the grace period: %q", m.Header.Get("webhook-signature"))
	}
	if m.Status != 200 {
		t.Fatal("the old secret does not verify during the grace period")
	}
	fc.Advance(2 * time.Hour)
	rc.secret = rot.Secret
	h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
	h.deliver(t)
	m = rc.received()[1]
	if sigs := strings.Fields(m.Header.Get("webhook-signature")); len(sigs) != 1 || m.Status != 200 {
		t.Fatalf("after the grace period: %q, status %d", m.Header.Get("webhook-signature"), m.Status)
	}
}

// Two replicas on one Postgres database deliver 200 messages: each is
// delivered once, and never sent by both at the same time.
func TestWebhooksTwoReplicasSendOnce(t *testing.T) {
	place := backends.All()[2].New(t)
	fc := clock.NewFake(hookT0)
	rc := newHookReceiver(t)
	a := newHookRig(t, place.Open(t), fc, rc)
	a.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
	bb := newHookRig(t, place.Open(t), fc, rc) // reads the subscription at start
	for range 200 {
		if _, err := bb.eng.StartRun(context.Background(), "", nil, engine.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i, r := range []*hookRig{a, bb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := r.eng.DeliverDue(context.Background(), &engine.DeliveryOptions{Owner: fmt.Sprint("replica-", i), Batch: 20})
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	got := rc.received()
	seen := map[string]int{}
	for _, m := range got {
		seen[m.ID]++
	}
	if len(got) != 200 || len(seen) != 200 || rc.overlap {
		t.Fatalf("received %d messages, %d distinct, overlap %v; want 200 once each", len(got), len(seen), rc.overlap)
	}
}

// The delivery loop sends a busy run's queued messages one after another
// without waiting between them: each answered message makes the run's
// next one claimable, and the loop claims again at once. (The clock never
// moves here: a loop that waited between claims would never finish.)
func TestWebhookLoopDrainsABusyRunWithoutWaiting(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		h := newHookRig(t, st, clock.NewFake(hookT0), newHookReceiver(t))
		h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created", "run.state_changed"}})
		run, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{Actor: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		h.move(t, run.ID, "submit", "tick", "tick", "tick", "tick", "tick")
		loop := h.eng.StartDeliveries(&engine.DeliveryOptions{Owner: "test", Poll: time.Hour})
		defer loop.Stop()
		for deadline := time.Now().Add(10 * time.Second); len(h.rc.received()) < 7; {
			if time.Now().After(deadline) {
				t.Fatalf("%d of 7 messages sent with the clock standing still: %s", len(h.rc.received()), hookTypes(h.rc.received()))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if want := "run.created@START run.state_changed@REVIEW" + strings.Repeat(" run.state_changed@REVIEW", 5); hookTypes(h.rc.received()) != want {
			t.Fatalf("received %s\nwant     %s", hookTypes(h.rc.received()), want)
		}
	})
}

// heldRecords is a store whose records of attempts (RecordAttempts, the
// one the engine calls) wait until gate is closed.
type heldRecords struct {
	store.Store
	gate chan struct{}
}

func (s heldRecords) RecordAttempts(ctx context.Context, owner string, rs []store.AttemptRecord) ([]error, error) {
	<-s.gate
	return s.Store.RecordAttempts(ctx, owner, rs)
}

// PerSubscription bounds the requests to a receiver, not the records of
// their answers: while the first answer's record waits (for a group
// commit, say), the next message is already sent.
func TestWebhookSlotsFreeOnceAnswered(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := heldRecords{Store: b.New(t).Open(t), gate: make(chan struct{})}
		h := newHookRig(t, st, clock.NewFake(hookT0), newHookReceiver(t))
		h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
		for range 2 {
			if _, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{Actor: "alice"}); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() {
			_, err := h.eng.DeliverDue(context.Background(), &engine.DeliveryOptions{Owner: "test", PerSubscription: 1})
			done <- err
		}()
		for deadline := time.Now().Add(10 * time.Second); len(h.rc.received()) < 2; {
			if time.Now().After(deadline) {
				close(st.gate)
				t.Fatalf("%d of 2 messages sent while the first record waits", len(h.rc.received()))
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(st.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n, err := st.PendingDeliveries(context.Background()); err != nil || n != 0 {
			t.Fatalf("pending deliveries = %d, %v; want 0", n, err)
		}
	})
}

// A subscription's deliveries list newest first, page after page.
func TestWebhookDeliveriesListNewestFirst(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		fc := clock.NewFake(hookT0)
		h := newHookRig(t, st, fc, newHookReceiver(t))
		sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
		var runs []string
		for range 5 {
			run, err := h.eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run.ID)
			fc.Advance(time.Second)
		}
		var got []string
		for cursor := ""; ; {
			page, err := h.eng.WebhookDeliveries(context.Background(), sub.ID, cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Deliveries {
				got = append(got, d.RunID)
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
		want := []string{runs[4], runs[3], runs[2], runs[1], runs[0]}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("deliveries by run %v, want newest first %v", got, want)
		}
	})
}

// A server keeps at most engine.MaxWebhooks subscriptions (each is matched
// against every commit): one more is refused with a hint, until one is
// deleted. A rotation's grace period is bounded.
func TestWebhookBounds(t *testing.T) {
	st := backends.All()[0].New(t).Open(t)
	h := newHookRig(t, st, clock.NewFake(hookT0), newHookReceiver(t))
	var first protocol.WebhookSubscription
	for i := range engine.MaxWebhooks {
		s := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
		if i == 0 {
			first = s
		}
	}
	_, err := h.eng.CreateWebhook(context.Background(), protocol.WebhookRequest{URL: h.rc.srv.URL, Events: []string{"run.created"}})
	if protocol.ErrorCode(err) != protocol.ETooLarge || !strings.Contains(protocol.ErrorHint(err), "DELETE /webhooks/{id}") {
		t.Fatalf("subscription %d: %v, want too_large with a hint", engine.MaxWebhooks+1, err)
	}
	if err := h.eng.DeleteWebhook(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.CreateWebhook(context.Background(), protocol.WebhookRequest{URL: h.rc.srv.URL, Events: []string{"run.created"}}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	for _, g := range []time.Duration{-time.Second, 31 * 24 * time.Hour} {
		if _, err := h.eng.RotateWebhookSecret(context.Background(), first.ID, g); protocol.ErrorCode(err) != protocol.EInvalid {
			t.Errorf("rotate with grace %s: %v, want invalid", g, err)
		}
	}
}

// Rotations of one subscription made at once, on every store, each add
// their secret to what the one before stored: every secret handed out
// signs, at most webhook.MaxLiveSecrets are live (the rest are 409), and
// a rotation racing a DELETE never brings the subscription back.
func TestWebhooksConcurrentChangesAreAtomic(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		fc := clock.NewFake(hookT0)
		h := newHookRig(t, st, fc, newHookReceiver(t))
		ctx := context.Background()
		sub := h.subscribe(t, protocol.WebhookRequest{Events: []string{"run.created"}})
		const n = 12
		secrets := make(chan string, n)
		var all sync.WaitGroup
		var refused, other sync.Map
		for i := range n {
			all.Add(1)
			go func() {
				defer all.Done()
				rot, err := h.eng.RotateWebhookSecret(ctx, sub.ID, time.Hour)
				switch {
				case err == nil:
					secrets <- rot.Secret
				case protocol.ErrorCode(err) == protocol.EConflict:
					refused.Store(i, true)
				default:
					other.Store(i, err)
				}
			}()
		}
		all.Wait()
		close(secrets)
		other.Range(func(_, err any) bool { t.Errorf("a rotation failed: %v", err); return true })
		stored, err := st.GetSubscription(ctx, sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		live, err := webhook.DecodeSecrets(stored.Secrets)
		if err != nil {
			t.Fatal(err)
		}
		kept := map[string]bool{}
		for _, s := range live {
			kept[s.Encode()] = true
		}
		handed := 0
		for s := range secrets {
			handed++
			if !kept[s] {
				t.Errorf("a rotation's secret %.12s… is not among the stored ones: it would never sign", s)
			}
		}
		if handed != webhook.MaxLiveSecrets-1 || len(live) != webhook.MaxLiveSecrets || !kept[sub.Secret] {
			t.Fatalf("%d rotations succeeded and %d secrets are stored (the first kept: %v); want %d and %d", handed, len(live), kept[sub.Secret], webhook.MaxLiveSecrets-1, webhook.MaxLiveSecrets)
		}

		for trial := range 10 {
			w := h.subscribe(t, protocol.WebhookRequest{URL: fmt.Sprintf("%s/race%d", h.rc.srv.URL, trial), Events: []string{"run.created"}})
			var wg sync.WaitGroup
			var delErr error
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = h.eng.RotateWebhookSecret(ctx, w.ID, 0) }()
			go func() { defer wg.Done(); delErr = h.eng.DeleteWebhook(ctx, w.ID) }()
			wg.Wait()
			if delErr != nil {
				t.Fatalf("delete: %v", delErr)
			}
			if _, err := st.GetSubscription(ctx, w.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("trial %d: the subscription is stored after its DELETE succeeded (a rotation at the same time wrote it back): %v", trial, err)
			}
		}
	})
}
