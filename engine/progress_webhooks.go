package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/webhook"
)

// task.progress webhooks: a running task's reports reach the run's
// stream each time, and the subscriptions that want task.progress at
// most once per ProgressWebhookInterval per task attempt, plus its last
// report when the task ends. Those messages
// are stored with store.WebhookStore.EnqueueDeliveries, outside any
// commit (a report commits nothing), for the run at the version the task
// runs under: a report made after the run moved on stores nothing. They
// take their place in the run's queue after the message of the change
// that started the task and before the one of the change that ends it.

// ProgressWebhookInterval is the least time between two task.progress
// messages of one task attempt: the first report is sent, then the first
// one made at least this long after the last one sent, and, when the task
// ends, its last report if that one was held back. Streams get every
// report.
const ProgressWebhookInterval = time.Second

// progressGate admits one task attempt's reports to webhooks.
type progressGate struct {
	mu   sync.Mutex
	n    int       // reports admitted
	last time.Time // when the last one was admitted (engine clock)
	at   time.Time // its message's time
	// held is the last report held back since (nil: none).
	held *[2]string
}

// admit reports whether a report made at now is sent as a webhook
// message (final: the task's last report, sent whatever the interval);
// if it is, it returns its number (1, 2, …) and its time: now, or just
// after floor and the previous message's time when the clock has not
// passed them, so that the messages' delivery ids sort after the message
// of the change that started the task (at floor) and after each other.
// A report not admitted is held, for flush.
func (g *progressGate) admit(now, floor time.Time, progress, hint string, final bool) (int, time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !final && g.n > 0 && now.Sub(g.last) < ProgressWebhookInterval {
		g.held = &[2]string{progress, hint}
		return 0, time.Time{}, false
	}
	g.held = nil
	g.n++
	g.last = now
	at := now
	if g.at.After(floor) {
		floor = g.at
	}
	if !at.After(floor) {
		at = floor.Add(time.Nanosecond)
	}
	g.at = at
	return g.n, at, true
}

// takeHeld returns the report held back, if any, and forgets it.
func (g *progressGate) takeHeld() (*[2]string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.held
	g.held = nil
	return h, h != nil
}

// progressReporter returns the function a task attempt of run r (task t)
// reports progress with (to the run's stream, and, through one gate per
// attempt, to the subscriptions that want it), and the function to call
// once the task returned, before its outcome is committed: it sends the
// last report if the gate held it back, so a receiver sees where the task
// ended ("100%") before the change that follows.
func (e *Engine) progressReporter(r *Run, t store.Task) (report func(progress, hint string), flush func()) {
	gate := &progressGate{}
	send := func(progress, hint string, final bool) {
		if !e.wantsProgress(r) {
			return
		}
		now := e.now().UTC()
		n, at, ok := gate.admit(now, r.UpdatedAt, progress, hint, final)
		if !ok {
			return
		}
		e.progressOutbox(context.Background(), r, t, n, at, now, progress, hint)
	}
	report = func(progress, hint string) {
		e.PublishProgress(r.ID, t.Version, progress, hint)
		send(progress, hint, false)
	}
	flush = func() {
		if h, ok := gate.takeHeld(); ok {
			send(h[0], h[1], true)
		}
	}
	return report, flush
}

// wantsProgress reports whether an active subscription wants task.progress
// messages of r.
func (e *Engine) wantsProgress(r *Run) bool {
	subs := e.subs.Load()
	if subs == nil {
		return false
	}
	for i := range subs.active {
		if wants(&subs.active[i], protocol.WebhookTaskProgress, r.WorkflowID, r.State) {
			return true
		}
	}
	return false
}

// progressOutbox stores the n-th task.progress message of task t of run
// r, made at at (its time, which orders it) and due now, for each
// subscription that wants it. It is best effort:
// a report that cannot be stored is logged, and the task goes on.
func (e *Engine) progressOutbox(ctx context.Context, r *Run, t store.Task, n int, at, now time.Time, progress, hint string) {
	subs := e.subs.Load()
	if subs == nil {
		return
	}
	var body []byte
	var out []store.Delivery
	msg := progressMessageID(r.ID, t.Version, n)
	for i := range subs.active {
		s := &subs.active[i]
		if !wants(s, protocol.WebhookTaskProgress, r.WorkflowID, r.State) {
			continue
		}
		if body == nil {
			m := webhook.Message{Type: protocol.WebhookTaskProgress, Timestamp: at, Data: webhook.Data{
				RunID: r.ID, WorkflowID: r.WorkflowID, WorkflowVersion: r.WorkflowVersion, State: r.State,
				Status: protocol.StatusProcessing, FrameHref: "/runs/" + r.ID, Progress: progress, Hint: hint}}
			var err error
			if body, err = webhook.EncodeMessage(m); err != nil {
				e.log.Error("encoding a task.progress message failed", "run", r.ID, "err", err)
				return
			}
		}
		out = append(out, store.Delivery{ID: progressDeliveryID(s.ID, r.ID, t.Version, n, at), SubscriptionID: s.ID, MessageID: msg,
			RunID: r.ID, Seq: t.Version, Type: protocol.WebhookTaskProgress, Body: body, NextAt: now, CreatedAt: at})
	}
	if len(out) == 0 {
		return
	}
	err := e.store.EnqueueDeliveries(ctx, r.ID, t.Version, at, out)
	switch {
	case err == nil:
		e.wakeDeliveries()
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		// The run moved on (or is gone): the report is of a past state.
	default:
		e.log.Warn("storing a task.progress message failed; it is not sent", "run", r.ID, "err", err)
	}
}

// progressMessageID is the stable id of the n-th task.progress message
// of the task attempt that runs while run is at version seq.
func progressMessageID(runID string, seq int64, n int) string {
	return messageID(runID, seq, protocol.WebhookTaskProgress+"\x00"+strconv.Itoa(n))
}

// progressDeliveryID is deliveryID's counterpart for the n-th
// task.progress message (at at) of the attempt running at seq: it starts
// with the message's time, so it sorts after the message of the change
// that started the task, in the order of the reports.
func progressDeliveryID(sub, run string, seq int64, n int, at time.Time) string {
	h := sha256.Sum256([]byte(sub + "\x00" + run + "\x00" + strconv.FormatInt(seq, 10) + "\x00p" + strconv.Itoa(n)))
	return fmt.Sprintf("dlv_%016x%sp", uint64(at.UnixNano()), hex.EncodeToString(h[:12]))
}
