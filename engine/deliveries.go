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
	e := l.e
	s := e.newSending(l.ctx, l.opts, false)
	defer func() {
		s.close()
		close(l.done)
	}()
	lastLoad := e.clock.Now()
	for l.ctx.Err() == nil {
		n, err := s.claim(e.clock.Now())
		if err != nil && l.ctx.Err() == nil {
			e.log.Error("claiming webhook deliveries failed", "err", err)
		}
		if now := e.clock.Now(); now.Sub(lastLoad) >= l.opts.Poll {
			if _, err := e.loadSubscriptions(l.ctx); err != nil && l.ctx.Err() == nil {
				e.log.Error("reloading webhook subscriptions failed", "err", err)
			}
			lastLoad = now
		}
		s.releaseAnswered()
		s.trim()
		if n > 0 && s.room() > 0 {
			// Claim again at once: more may be due, and each claim takes
			// at most the room left.
			continue
		}
		wait := l.opts.Poll
		if at, ok, err := e.store.NextDeliveryDue(l.ctx); err == nil && ok {
			wait = min(wait, at.Sub(e.clock.Now()))
		}
		if wait <= 0 {
			wait = min(l.opts.Poll, 50*time.Millisecond)
		}
		// Wait for the next due time, a commit that stored a delivery,
		// an answer recorded (its run's next message is claimable now),
		// or a request answered (a slot is free).
		t := e.clock.NewTimer(wait)
		select {
		case <-l.ctx.Done():
		case <-l.wake:
		case <-t.C():
		case f := <-s.freed:
			s.release(f)
		}
		t.Stop()
	}
}

// DeliverDue claims the deliveries due now (by the engine's clock), sends
// them and records each attempt, and returns how many it claimed once all
// are answered and recorded. The delivery loop does the same without
// waiting; a test with a fake clock may call DeliverDue directly. nil o
// means DeliveryOptions' defaults.
func (e *Engine) DeliverDue(ctx context.Context, o *DeliveryOptions) (int, error) {
	s := e.newSending(ctx, deliveryDefaults(o), true)
	n, err := s.claim(e.clock.Now())
	for s.inflight > 0 {
		s.release(<-s.freed)
	}
	s.close()
	return n, err
}

// sending is the delivery side's state: the requests to receivers in
// flight (at most Concurrency, and PerSubscription per subscription), the
// deliveries claimed and waiting for a slot of their subscription, and
// the recorder of the answers. The loop (or DeliverDue) owns it: only
// that goroutine calls its methods; the requests report back on freed.
//
// A claim takes at most the room left (Concurrency less the requests in
// flight and the deliveries waiting) and starts the deliveries whose
// subscription has a free slot; the others wait for one. A subscription
// is slow while it has requests in flight and none answered for
// slowAnswer (wall time): a slow one keeps at most PerSubscription
// deliveries waiting (a slot frees within one request's timeout, well
// inside the lease) and leaves the rest to their leases, claimed again
// when those end. So a slow or dead receiver holds up its own deliveries,
// and takes at most its share of the room; other subscriptions' go on
// being claimed and sent.
type sending struct {
	e   *Engine
	o   DeliveryOptions
	ctx context.Context
	// all: DeliverDue's mode: claim a whole Batch and keep every claimed
	// delivery waiting for its slot (the call waits for them all).
	all      bool
	answered chan answer
	recorded chan struct{}
	freed    chan freedSlot // each request answered
	inflight int
	per      map[string]int               // requests in flight per subscription
	waiting  map[string][]waitingDelivery // claimed, waiting for a slot, in claim order
	nwaiting int
	// progress is, per subscription with requests in flight, when the
	// last of them was answered (or the first started).
	progress map[string]time.Time
	// mine holds the ids in flight or waiting: a claim that returns one
	// again (its lease ended while it waited) is not sent twice.
	mine map[string]bool
	wg   sync.WaitGroup
}

// slowAnswer is how long a subscription with requests in flight may go
// without an answer before it counts as slow.
const slowAnswer = time.Second

// slow reports whether sub is slow (see sending).
func (s *sending) slow(sub string) bool {
	return s.per[sub] > 0 && time.Since(s.progress[sub]) >= slowAnswer
}

// freedSlot is a request answered: its subscription and delivery.
type freedSlot struct{ sub, id string }

type waitingDelivery struct {
	t *target
	d store.Delivery
}

func (e *Engine) newSending(ctx context.Context, o DeliveryOptions, all bool) *sending {
	s := &sending{e: e, o: o, ctx: ctx, all: all, answered: make(chan answer, o.Concurrency), recorded: make(chan struct{}),
		freed: make(chan freedSlot, o.Concurrency), per: map[string]int{}, waiting: map[string][]waitingDelivery{},
		progress: map[string]time.Time{}, mine: map[string]bool{}}
	// The answers are recorded in batches (recordDeliveries): every
	// answer waiting goes into one RecordAttempts write; each write
	// wakes the loop, as the next message of each run recorded is now
	// claimable.
	go func() {
		defer close(s.recorded)
		e.recordDeliveries(context.WithoutCancel(ctx), o, s.answered)
	}()
	return s
}

// room is how many deliveries a claim may take now.
func (s *sending) room() int {
	if s.all {
		return s.o.Batch
	}
	return min(s.o.Batch, s.o.Concurrency-s.inflight-s.nwaiting)
}

// claim claims due deliveries (at most room) and starts or keeps them;
// it returns how many it claimed.
func (s *sending) claim(now time.Time) (int, error) {
	e, o := s.e, s.o
	room := s.room()
	if room <= 0 {
		return 0, nil
	}
	ds, err := e.store.ClaimDeliveries(s.ctx, now, room, o.Owner, now.Add(o.Lease))
	if err != nil {
		return 0, internal("could not claim webhook deliveries", err)
	}
	if len(ds) == 0 {
		return 0, nil
	}
	targets := map[string]*target{}
	view := e.subs.Load()
	for _, d := range ds {
		t, ok := targets[d.SubscriptionID]
		if !ok {
			got, err := e.store.GetSubscription(s.ctx, d.SubscriptionID)
			if err != nil {
				e.log.Warn("reading a webhook subscription failed; its delivery waits for its lease", "subscription", d.SubscriptionID, "err", err)
				targets[d.SubscriptionID] = nil
				continue
			}
			t = &target{s: &got}
			t.keys, t.err = view.keysOf(t.s)
			targets[d.SubscriptionID] = t
		}
		switch sub := d.SubscriptionID; {
		case t == nil, s.mine[d.ID]:
		case s.canStart(sub):
			s.start(t, d)
		case s.all || !s.slow(sub) || len(s.waiting[sub]) < o.PerSubscription:
			s.waiting[sub] = append(s.waiting[sub], waitingDelivery{t, d})
			s.nwaiting++
			s.mine[d.ID] = true
		default:
			// A slow subscription with a full share in flight and
			// waiting: left to its lease, claimed again when that ends.
		}
	}
	return len(ds), nil
}

// trim leaves to their leases the deliveries of slow subscriptions
// beyond PerSubscription waiting, so that a receiver that stopped
// answering gives back the room it took while it seemed fast.
func (s *sending) trim() {
	if s.all {
		return
	}
	for sub, w := range s.waiting {
		if len(w) > s.o.PerSubscription && s.slow(sub) {
			for _, x := range w[s.o.PerSubscription:] {
				delete(s.mine, x.d.ID)
			}
			s.nwaiting -= len(w) - s.o.PerSubscription
			s.waiting[sub] = w[:s.o.PerSubscription]
		}
	}
}

// start sends d to t in a goroutine, which reports on freed once the
// receiver answered (the slot is free then: recording the answer, a
// store write, does not hold up the next request) and hands the answer to
// the recorder.
func (s *sending) start(t *target, d store.Delivery) {
	if s.per[d.SubscriptionID] == 0 {
		s.progress[d.SubscriptionID] = time.Now()
	}
	s.inflight++
	s.per[d.SubscriptionID]++
	s.mine[d.ID] = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		a := s.e.attemptDelivery(context.WithoutCancel(s.ctx), t, d)
		ended := s.e.clock.Now()
		s.freed <- freedSlot{d.SubscriptionID, d.ID}
		s.answered <- answer{t.s, d, a, ended}
	}()
}

// canStart reports whether a request to sub may start now.
func (s *sending) canStart(sub string) bool {
	return s.per[sub] < s.o.PerSubscription && s.inflight < s.o.Concurrency
}

// release frees the slot of a request to sub that was answered: a
// delivery waiting takes it (of sub first, its own share).
func (s *sending) release(f freedSlot) {
	sub := f.sub
	s.inflight--
	s.per[sub]--
	s.progress[sub] = time.Now()
	delete(s.mine, f.id)
	s.startWaiting(sub)
	for other := range s.waiting {
		if s.inflight >= s.o.Concurrency {
			break
		}
		s.startWaiting(other)
	}
	if s.per[sub] == 0 && len(s.waiting[sub]) == 0 {
		delete(s.per, sub)
		delete(s.waiting, sub)
		delete(s.progress, sub)
	}
}

// startWaiting starts the deliveries of sub waiting, in claim order,
// while it has free slots.
func (s *sending) startWaiting(sub string) {
	w := s.waiting[sub]
	for len(w) > 0 && s.canStart(sub) {
		delete(s.mine, w[0].d.ID)
		s.start(w[0].t, w[0].d)
		w = w[1:]
		s.nwaiting--
	}
	if len(w) == 0 {
		delete(s.waiting, sub)
	} else {
		s.waiting[sub] = w
	}
}

// releaseAnswered releases every request answered so far.
func (s *sending) releaseAnswered() {
	for {
		select {
		case f := <-s.freed:
			s.release(f)
		default:
			return
		}
	}
}

// close waits for the requests in flight and the records of their
// answers. Deliveries still waiting are left to their leases.
func (s *sending) close() {
	s.wg.Wait()
	close(s.answered)
	<-s.recorded
}

// target is a subscription deliveries are sent to, with its signing keys
// (or why it has none).
type target struct {
	s    *store.Subscription
	keys *webhook.Keys
	err  error
}

// answer is one attempt made, to record; ended is when its answer came
// (or it failed), by the engine's clock: a retry waits from then.
type answer struct {
	s     *store.Subscription
	d     store.Delivery
	a     webhook.Attempt
	ended time.Time
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
			// The next message of each run recorded is claimable now.
			e.wakeDeliveries()
		}()
	}
	wg.Wait()
}

// recordBatch records the answers of batch in one RecordAttempts call,
// and disables the subscriptions whose receiver answered 410 Gone.
func (e *Engine) recordBatch(ctx context.Context, o DeliveryOptions, batch []answer) {
	recs := make([]store.AttemptRecord, len(batch))
	for i, b := range batch {
		recs[i] = e.attemptRecord(o, b.d, b.a, b.ended)
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
				e.disableWebhook(ctx, b.s.ID, "The receiver answered 410 Gone at "+b.a.At.UTC().Format(time.RFC3339)+"; redeliver one of its deliveries (POST /webhooks/{id}/deliveries/{delivery_id}/redeliver) to enable it again, or delete it.")
			}
		case errors.Is(failed, store.ErrConflict), errors.Is(failed, store.ErrNotFound):
			// Another claimer holds it since its lease ended, or it was
			// deleted with its subscription: nothing to record.
		default:
			e.log.Warn("recording a webhook attempt failed; the message is sent again when its lease ends", "delivery", b.d.ID, "err", failed)
		}
	}
}

// attemptRecord is the record of attempt a of d, which ended at ended:
// delivered, tried again later (the backoff counted from ended, so that
// a receiver slow to fail still gets the wait), or failed for good (given
// up, or the receiver is gone, which disables the subscription once it is
// recorded).
func (e *Engine) attemptRecord(o DeliveryOptions, d store.Delivery, a webhook.Attempt, ended time.Time) store.AttemptRecord {
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
		last := a.At
		if ended.After(last) {
			last = ended
		}
		if at, ok := o.Retry.Next(d.Attempts+1-d.RetryBase, first, last, a.RetryAfter, o.Rand); ok {
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
	// One atomic update: a rotation or a redelivery's enabling at the
	// same moment cannot undo it, nor it a deletion.
	already := errors.New("already disabled")
	err := e.store.UpdateSubscription(ctx, id, func(s *store.Subscription) error {
		if s.Disabled {
			return already
		}
		s.Disabled, s.DisabledReason, s.UpdatedAt = true, reason, e.now().UTC()
		return nil
	})
	if errors.Is(err, already) || errors.Is(err, store.ErrNotFound) {
		return
	}
	if err != nil {
		e.log.Warn("disabling a webhook subscription failed", "subscription", id, "err", err)
		return
	}
	e.log.Info("webhook subscription disabled", "subscription", id, "reason", reason)
	if _, err := e.loadSubscriptions(ctx); err != nil {
		e.log.Warn("reloading webhook subscriptions failed", "err", err)
	}
}
