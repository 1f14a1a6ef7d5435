package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/webhook"
)

// DeliveryOptions configure the webhook delivery loop (StartDeliveries).
type DeliveryOptions struct {
	// Owner names this process in delivery leases (default: a random id).
	Owner string
	// Lease is how long a claimed delivery stays this process's (0 =
	// DefaultLease; it must outlast the sender's timeout): a process that
	// dies while sending leaves the message to the others once it ends.
	Lease time.Duration
	// Batch is how many due deliveries one claim takes (0 = 256).
	Batch int
	// Concurrency bounds the requests to receivers in flight at once
	// (0 = 64), and PerSubscription those to one subscription (0 = 8), so
	// a slow receiver holds up only its own share. Recording an answer
	// holds no slot.
	Concurrency     int
	PerSubscription int
	// Poll bounds the wait for deliveries stored by other processes and
	// for their subscription changes (0 = 1s).
	Poll time.Duration
	// Retry is when a failed message is tried again (the zero Schedule:
	// 5 s … 1 h with jitter, given up after 24 h).
	Retry webhook.Schedule
	// Rand is the jitter's random source (nil: math/rand/v2).
	Rand func() float64
}

func deliveryDefaults(opts *DeliveryOptions) DeliveryOptions {
	var o DeliveryOptions
	if opts != nil {
		o = *opts
	}
	if o.Owner == "" {
		o.Owner = "webhooks-" + uuid.NewString()[:8]
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.PerSubscription <= 0 {
		o.PerSubscription = 8
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	return o
}

// DeliveryLoop sends due webhook messages until Stop.
type DeliveryLoop struct {
	e      *Engine
	opts   DeliveryOptions
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}
}

// StartDeliveries starts the loop that sends the outbox's due messages
// (whichever process stored them), off the commit path: a slow or dead
// receiver never slows a transition. Stop it before closing the store.
func (e *Engine) StartDeliveries(opts *DeliveryOptions) *DeliveryLoop {
	o := deliveryDefaults(opts)
	ctx, cancel := context.WithCancel(context.Background())
	l := &DeliveryLoop{e: e, opts: o, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	e.deliveryLoop.Store(l)
	go l.run()
	return l
}

// Stop ends the loop once the messages in flight are answered.
func (l *DeliveryLoop) Stop() {
	l.e.deliveryLoop.CompareAndSwap(l, nil)
	l.cancel()
	<-l.done
}

func (l *DeliveryLoop) run() {
	defer close(l.done)
	e := l.e
	lastLoad := e.clock.Now()
	for l.ctx.Err() == nil {
		n, err := e.deliverDue(l.ctx, l.opts)
		if err != nil && l.ctx.Err() == nil {
			e.log.Error("claiming webhook deliveries failed", "err", err)
		}
		if now := e.clock.Now(); now.Sub(lastLoad) >= l.opts.Poll {
			if _, err := e.loadSubscriptions(l.ctx); err != nil && l.ctx.Err() == nil {
				e.log.Error("reloading webhook subscriptions failed", "err", err)
			}
			lastLoad = now
		}
		if n > 0 {
			// Claim again at once: the messages answered made the next
			// message of each of their runs claimable (a run's messages
			// go one at a time, in order), and those are due already.
			// Waiting here would hold a busy run to one message per
			// wait.
			continue
		}
		wait := l.opts.Poll
		if at, ok, err := e.store.NextDeliveryDue(l.ctx); err == nil && ok {
			wait = min(wait, at.Sub(e.clock.Now()))
		}
		if wait <= 0 {
			wait = min(l.opts.Poll, 50*time.Millisecond)
		}
		t := e.clock.NewTimer(wait)
		select {
		case <-l.ctx.Done():
		case <-l.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// DeliverDue claims the deliveries due now (by the engine's clock), sends
// them and records each attempt, and returns how many it claimed once all
// are answered. The delivery loop calls it; a test with a fake clock may
// call it directly. nil o means DeliveryOptions' defaults.
func (e *Engine) DeliverDue(ctx context.Context, o *DeliveryOptions) (int, error) {
	return e.deliverDue(ctx, deliveryDefaults(o))
}

func (e *Engine) deliverDue(ctx context.Context, o DeliveryOptions) (int, error) {
	now := e.clock.Now()
	ds, err := e.store.ClaimDeliveries(ctx, now, o.Batch, o.Owner, now.Add(o.Lease))
	if err != nil {
		return 0, internal("could not claim webhook deliveries", err)
	}
	if len(ds) == 0 {
		return 0, nil
	}
	all := make(chan struct{}, o.Concurrency)
	per := map[string]chan struct{}{}
	subs := map[string]*target{}
	view := e.subs.Load()
	// The answers are recorded in batches (recordDeliveries): every
	// answer waiting goes into one RecordAttempts write.
	answered := make(chan answer, len(ds))
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		e.recordDeliveries(context.WithoutCancel(ctx), o, answered)
	}()
	var wg sync.WaitGroup
	for i := range ds {
		d := ds[i]
		t, ok := subs[d.SubscriptionID]
		if !ok {
			got, err := e.store.GetSubscription(ctx, d.SubscriptionID)
			if err != nil {
				e.log.Warn("reading a webhook subscription failed; its delivery waits for its lease", "subscription", d.SubscriptionID, "err", err)
				continue
			}
			t = &target{s: &got}
			t.keys, t.err = view.keysOf(t.s)
			subs[d.SubscriptionID] = t
			per[d.SubscriptionID] = make(chan struct{}, o.PerSubscription)
		}
		sem := per[d.SubscriptionID]
		sem <- struct{}{}
		all <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := e.attemptDelivery(context.WithoutCancel(ctx), t, d)
			// The bounds are on requests to receivers: the slots are free
			// once the answer is in, so that recording it (a store write,
			// durable only at the next group commit) does not hold up the
			// next request.
			<-all
			<-sem
			answered <- answer{t.s, d, a}
		}()
	}
	wg.Wait()
	close(answered)
	<-recorded
	return len(ds), nil
}

// target is a subscription deliveries are sent to, with its signing keys
// (or why it has none).
type target struct {
	s    *store.Subscription
	keys *webhook.Keys
	err  error
}

// answer is one attempt made, to record.
type answer struct {
	s *store.Subscription
	d store.Delivery
	a webhook.Attempt
}

// attemptDelivery makes one attempt of d to t.
func (e *Engine) attemptDelivery(ctx context.Context, t *target, d store.Delivery) webhook.Attempt {
	if t.err != nil {
		return webhook.Attempt{At: e.clock.Now(), Class: webhook.Invalid, Err: "the subscription's stored secrets do not decode"}
	}
	return e.webhooks.Deliver(ctx, webhook.Target{URL: t.s.URL, Secrets: t.keys.Secrets(), Keys: t.keys}, webhook.Outgoing{ID: d.MessageID, Body: d.Body})
}

// maxRecords bounds the attempts one RecordAttempts call records, and
// recordWrites the calls in flight at once.
const (
	maxRecords   = 256
	recordWrites = 4
)

// recordDeliveries records the answers until the channel closes, and
// returns once all are recorded: each RecordAttempts call takes every
// answer waiting (up to maxRecords), and up to recordWrites calls are in
// flight at once, so that answers that come in while one waits for its
// commit go into the next commit rather than wait for that one.
func (e *Engine) recordDeliveries(ctx context.Context, o DeliveryOptions, answered <-chan answer) {
	slots := make(chan struct{}, recordWrites)
	var wg sync.WaitGroup
	for first := range answered {
		batch := []answer{first}
	more:
		for len(batch) < maxRecords {
			select {
			case a, ok := <-answered:
				if !ok {
					break more
				}
				batch = append(batch, a)
			default:
				break more
			}
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.recordBatch(ctx, o, batch)
			<-slots
		}()
	}
	wg.Wait()
}

// recordBatch records the answers of batch in one RecordAttempts call,
// and disables the subscriptions whose receiver answered 410 Gone.
func (e *Engine) recordBatch(ctx context.Context, o DeliveryOptions, batch []answer) {
	recs := make([]store.AttemptRecord, len(batch))
	for i, b := range batch {
		recs[i] = e.attemptRecord(o, b.d, b.a)
	}
	errs, err := e.store.RecordAttempts(ctx, o.Owner, recs)
	for i, b := range batch {
		failed := err // the write as a whole, else this record's
		if failed == nil {
			failed = errs[i]
		}
		switch {
		case failed == nil:
			if b.a.Class == webhook.Gone {
				e.disableWebhook(ctx, b.s.ID, "The receiver answered 410 Gone at "+b.a.At.UTC().Format(time.RFC3339)+"; create a new subscription to receive messages again.")
			}
		case errors.Is(failed, store.ErrConflict), errors.Is(failed, store.ErrNotFound):
			// Another claimer holds it since its lease ended, or it was
			// deleted with its subscription: nothing to record.
		default:
			e.log.Warn("recording a webhook attempt failed; the message is sent again when its lease ends", "delivery", b.d.ID, "err", failed)
		}
	}
}

// attemptRecord is the record of attempt a of d: delivered, tried again
// later, or failed for good (given up, or the receiver is gone, which
// disables the subscription once it is recorded).
func (e *Engine) attemptRecord(o DeliveryOptions, d store.Delivery, a webhook.Attempt) store.AttemptRecord {
	rec := store.DeliveryAttempt{DeliveryID: d.ID, N: d.Attempts + 1, At: a.At.UTC(), Status: a.Status, Class: string(a.Class),
		Duration: a.Duration, Answer: string(a.Body), Error: a.Err}
	status, next := store.DeliveryDelivered, time.Time{}
	switch {
	case a.Class == webhook.Delivered:
	case a.Retry():
		first := d.FirstAttemptAt
		if first.IsZero() {
			first = a.At
		}
		if at, ok := o.Retry.Next(d.Attempts+1, first, a.At, a.RetryAfter, o.Rand); ok {
			status, next = store.DeliveryPending, at
		} else {
			status = store.DeliveryFailed
		}
	default:
		status = store.DeliveryFailed
	}
	return store.AttemptRecord{ID: d.ID, Attempt: rec, Status: status, NextAt: next}
}

// disableWebhook marks a subscription disabled: nothing more is claimed
// for it.
func (e *Engine) disableWebhook(ctx context.Context, id, reason string) {
	s, err := e.store.GetSubscription(ctx, id)
	if err != nil {
		e.log.Warn("disabling a webhook subscription failed", "subscription", id, "err", err)
		return
	}
	if s.Disabled {
		return
	}
	s.Disabled, s.DisabledReason, s.UpdatedAt = true, reason, e.now().UTC()
	if err := e.store.PutSubscription(ctx, s); err != nil {
		e.log.Warn("disabling a webhook subscription failed", "subscription", id, "err", err)
		return
	}
	e.log.Info("webhook subscription disabled", "subscription", id, "reason", reason)
	if _, err := e.loadSubscriptions(ctx); err != nil {
		e.log.Warn("reloading webhook subscriptions failed", "err", err)
	}
}
