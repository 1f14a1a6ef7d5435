package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Webhooks (SPEC section 18): subscriptions, and a transactional outbox of
// deliveries.
//
// A delivery is one message for one subscription: the exact bytes to sign
// and send (Body) and the stable id a receiver deduplicates on
// (MessageID). Deliveries enter the store only in the commit of the run
// change they report (Commit.Outbox), so a change is never committed
// without its messages, nor a message stored for a change that was not
// (a lost compare-and-set stores neither). The delivery side then claims
// due deliveries under leases (WebhookStore.ClaimDeliveries), sends them
// and records each attempt (RecordAttempts), which settles the delivery
// (delivered, failed) or schedules its retry.

// Delivery statuses.
const (
	// DeliveryPending: not yet delivered; claimable from NextAt (a first
	// try, or a retry).
	DeliveryPending = "pending"
	// DeliveryDelivered: a receiver took it (a 2xx answer).
	DeliveryDelivered = "delivered"
	// DeliveryFailed: given up (retries exhausted, or a message that
	// cannot be sent); kept for a manual redelivery.
	DeliveryFailed = "failed"
)

// Subscription is one webhook subscription: where to send, which run
// changes to send, and the live secrets to sign with.
type Subscription struct {
	ID  string
	URL string
	// Events are the event types sent (run.created, run.state_changed,
	// …), in the order given.
	Events []string
	// WorkflowID, when set, limits the subscription to runs of that
	// workflow.
	WorkflowID string
	// States, when set, limits it to changes into those states.
	States []string
	// Secrets are the live secrets, encoded by package webhook; the store
	// keeps the bytes as they are (opaque) and never reads them.
	Secrets json.RawMessage
	// Disabled subscriptions get no deliveries claimed (a 410 answer
	// disables one); DisabledReason says why.
	Disabled       bool
	DisabledReason string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Delivery is one message of the outbox: a run event reported to one
// subscription, and the state of its delivery.
type Delivery struct {
	// ID is the outbox row's id, unique in the store. ListDeliveries
	// orders by it: ids that sort by creation (UUIDv7, as the engine
	// makes them) list newest first.
	ID             string
	SubscriptionID string
	// MessageID is the message's webhook-id: the same on every attempt
	// and on a redelivery.
	MessageID string
	RunID     string
	// Seq is the run event the message reports (the commit's version).
	Seq  int64
	Type string // run.created, run.state_changed, …
	// Body is the exact bytes to sign and send; the store keeps them
	// byte for byte.
	Body   json.RawMessage
	Status string // DeliveryPending, DeliveryDelivered, DeliveryFailed
	// Attempts counts the recorded attempts (the last one's N).
	Attempts int
	// NextAt is when a pending delivery may be tried (its retry's time).
	NextAt time.Time
	// FirstAttemptAt is when the first attempt since it was stored (or
	// redelivered) was made: what the retry schedule gives up from. Zero
	// before it.
	FirstAttemptAt time.Time
	// RetryBase is Attempts when it was last redelivered (0 before): the
	// retry schedule numbers the attempts since then from 1, so a
	// redelivered message is retried after the first backoff again, not
	// after the one its earlier attempts reached.
	RetryBase int
	// Owner and LeaseUntil are set while a claimer holds the delivery
	// (ClaimDeliveries); empty and zero otherwise.
	Owner      string
	LeaseUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// LastError is the last attempt's error ("" after a success).
	LastError string
}

// DeliveryAttempt is the record of one attempt to deliver.
type DeliveryAttempt struct {
	DeliveryID string
	// N numbers the delivery's attempts 1, 2, 3, … (redeliveries go on
	// counting); RecordAttempts sets it.
	N  int
	At time.Time
	// Status is the HTTP status of the answer, 0 when there was none.
	Status int
	// Class is the attempt's outcome (webhook.Class: delivered, gone,
	// non_2xx, timeout, …).
	Class    string
	Duration time.Duration
	// Answer is the first 1 KiB of the answer's body (the caller bounds
	// it; the store keeps what it is given).
	Answer string
	Error  string
}

// PrepareOutbox checks c's outbox and completes its deliveries: each has
// an ID (distinct within the commit), a SubscriptionID, a MessageID, a
// Type and a Body, and reports c's event (RunID and Seq, when set, are
// c.Run's). It sets RunID and Seq from c.Run, Status to pending (a
// delivery is stored pending: any other status is refused), CreatedAt to
// the event's time when zero, NextAt to CreatedAt when zero, UpdatedAt to
// CreatedAt, and clears the lease, the attempts and the error. Backends
// call it first in CreateRun and CommitRun.
func PrepareOutbox(c *Commit) error {
	if len(c.Outbox) == 0 {
		return nil
	}
	out, err := PrepareEnqueue(c.Run.ID, c.Run.Version, c.Event.Time, c.Outbox)
	if err != nil {
		return err
	}
	c.Outbox = out
	return nil
}

// PrepareEnqueue checks and completes, as PrepareOutbox does, deliveries
// that report event seq of run runID, which happened at at, and returns
// the completed copies. Backends call it first in EnqueueDeliveries.
func PrepareEnqueue(runID string, seq int64, at time.Time, ds []Delivery) ([]Delivery, error) {
	out := make([]Delivery, len(ds))
	seen := make(map[string]bool, len(ds))
	for i, d := range ds {
		switch {
		case d.ID == "":
			return nil, fmt.Errorf("store: a delivery of run %s has no id", runID)
		case seen[d.ID]:
			return nil, fmt.Errorf("store: run %s stores delivery %s twice", runID, d.ID)
		case d.SubscriptionID == "" || d.MessageID == "" || d.Type == "":
			return nil, fmt.Errorf("store: delivery %s of run %s lacks its subscription, message id or type", d.ID, runID)
		case len(d.Body) == 0:
			return nil, fmt.Errorf("store: delivery %s of run %s has no body", d.ID, runID)
		case d.RunID != "" && d.RunID != runID, d.Seq != 0 && d.Seq != seq:
			return nil, fmt.Errorf("store: delivery %s reports run %s at %d, not the event's (%s, %d)", d.ID, d.RunID, d.Seq, runID, seq)
		case d.Status != "" && d.Status != DeliveryPending:
			return nil, fmt.Errorf("store: delivery %s is stored %q; a new delivery is pending", d.ID, d.Status)
		}
		seen[d.ID] = true
		d.RunID, d.Seq, d.Status = runID, seq, DeliveryPending
		if d.CreatedAt.IsZero() {
			d.CreatedAt = at
		}
		if d.NextAt.IsZero() {
			d.NextAt = d.CreatedAt
		}
		d.UpdatedAt = d.CreatedAt
		d.Attempts, d.FirstAttemptAt, d.Owner, d.LeaseUntil, d.LastError = 0, time.Time{}, "", time.Time{}, ""
		out[i] = d
	}
	return out, nil
}

// AttemptRecord is one attempt for RecordAttempts: the delivery, the
// attempt and how it settles the delivery.
type AttemptRecord struct {
	// ID is the delivery's.
	ID      string
	Attempt DeliveryAttempt
	// Status and NextAt settle the delivery (see RecordAttempts).
	Status string
	NextAt time.Time
}

// CheckAttempt checks an attempt record's settling: a known status, and a
// retry's time for pending.
func CheckAttempt(status string, nextAt time.Time) error {
	switch status {
	case DeliveryDelivered, DeliveryFailed:
		return nil
	case DeliveryPending:
		if nextAt.IsZero() {
			return fmt.Errorf("store: a retried delivery needs its next time")
		}
		return nil
	}
	return fmt.Errorf("store: delivery status %q, want %s, %s or %s", status, DeliveryPending, DeliveryDelivered, DeliveryFailed)
}

// CheckDeliveryClaim checks ClaimDeliveries' arguments.
func CheckDeliveryClaim(now time.Time, limit int, owner string, leaseUntil time.Time) error {
	switch {
	case limit <= 0:
		return fmt.Errorf("store: claim deliveries: limit %d, want > 0", limit)
	case owner == "":
		return fmt.Errorf("store: claim deliveries: no owner")
	case !leaseUntil.After(now):
		return fmt.Errorf("store: claim deliveries: the lease ends (%s) at or before now (%s)", leaseUntil.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	return nil
}

// CheckPrune checks PruneDeliveries' arguments: a limit > 0.
func CheckPrune(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("store: prune deliveries: limit %d, want > 0", limit)
	}
	return nil
}

// ApplyUpdate runs an UpdateSubscription's update on sub, the stored
// value of subscription id, and checks the result as PutSubscription
// would; the ID stays id whatever update did. Backends call it.
func ApplyUpdate(id string, sub *Subscription, update func(*Subscription) error) error {
	if err := update(sub); err != nil {
		return err
	}
	sub.ID = id
	return CheckSubscription(*sub)
}

// CheckSubscription checks what PutSubscription stores: an ID and a URL.
func CheckSubscription(sub Subscription) error {
	if sub.ID == "" || sub.URL == "" {
		return fmt.Errorf("store: a subscription needs an id and a url (got %q, %q)", sub.ID, sub.URL)
	}
	return nil
}

// SortDeliveries orders deliveries as ClaimDeliveries returns them: by
// NextAt, ties by ID.
func SortDeliveries(ds []Delivery) {
	slices.SortFunc(ds, func(a, b Delivery) int {
		if c := a.NextAt.Compare(b.NextAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// WebhookStore keeps webhook subscriptions and the outbox of their
// deliveries. Deliveries enter through the RunStore over the same data
// (Commit.Outbox, in the commit's transaction), so a WebhookStore is
// always the webhook side of a RunStore. All methods are safe for
// concurrent use, by many processes for shared backends, and durable when
// they return nil.
//
// # Order
//
// The deliveries of one subscription and one run form a queue, ordered by
// Seq (ties by ID): only its head, the first pending delivery, is ever
// claimable. So a receiver gets a run's messages in the order of the
// run's changes, each one only after the one before it was delivered or
// given up (failed); a retried head holds back the rest of its queue, not
// other runs' or other subscriptions'. A redelivered delivery takes its
// place in its queue by its Seq again.
//
// # Cost
//
// Claims walk the pending deliveries in the order of the time they become
// claimable (an index on it in SQLite and Postgres) and check each one's
// queue through an index on (subscription, run, seq): a claim costs the
// deliveries it takes plus the due ones it passes over (held back behind
// their queue's head, or of a disabled subscription), never the pending
// deliveries that are not due yet. memstore keeps only queue heads in its
// heap, so it passes over none.
//
// # Retention
//
// PruneDeliveries deletes settled deliveries (delivered or failed) whose
// settling, their last attempt (UpdatedAt), is older than a cut-off,
// oldest first, with their attempts: an index on the settling time of the
// settled deliveries in SQLite and Postgres, a heap in memstore, so a
// prune costs the deliveries it deletes, not those stored. Pending
// deliveries (due, waiting for a retry, or leased: a lease is only ever
// held on a pending delivery, and RecordAttempts ends it) are never
// deleted, so no queue loses the delivery that holds it back.
//
// # Runs and subscriptions
//
// DeleteRun keeps a run's deliveries: each carries its message whole
// (Body), so one still pending is delivered, and the delivered ones stay
// as the subscription's record (until PruneDeliveries deletes them).
// DeleteSubscription removes a
// subscription's deliveries and their attempts. A commit's delivery for a
// subscription that is not stored (deleted after the engine read it) is
// not stored: it is dropped, and the commit goes on.
type WebhookStore interface {
	// PutSubscription stores sub, creating it or replacing the one with
	// its ID (every field as given, CreatedAt too). Disabling a
	// subscription keeps its deliveries, unclaimed; enabling it again
	// makes them claimable.
	PutSubscription(ctx context.Context, sub Subscription) error

	// UpdateSubscription changes the stored subscription id atomically:
	// update is given its current value to change in place (its ID
	// stays), and the result is stored as PutSubscription would. When
	// update returns an error nothing is stored and that error is
	// returned (errors.Is and errors.As see it). ErrNotFound when no
	// subscription has the id: a deleted subscription is never stored
	// again. Concurrent updates of one subscription, from any process,
	// apply one after the other, each to the value the one before
	// stored, so none is lost. update may be called more than once (a
	// backend may retry a transaction); the last call's changes are the
	// ones stored. update must not call the store (it may run under the
	// store's lock or in its writer).
	UpdateSubscription(ctx context.Context, id string, update func(*Subscription) error) error

	// GetSubscription returns the subscription, or ErrNotFound.
	GetSubscription(ctx context.Context, id string) (Subscription, error)

	// ListSubscriptions returns up to limit (<= 0: all) subscriptions
	// with an ID greater than after, ordered by ID.
	ListSubscriptions(ctx context.Context, after string, limit int) ([]Subscription, error)

	// DeleteSubscription removes the subscription with its deliveries and
	// their attempts, atomically; ErrNotFound when it is not stored.
	DeleteSubscription(ctx context.Context, id string) error

	// ClaimDeliveries leases to owner, until leaseUntil (which must be
	// after now), up to limit (> 0) claimable deliveries and returns them
	// ordered by NextAt (ties by ID). A delivery is claimable when it is
	// pending, due (NextAt <= now), no lease holds it (never claimed,
	// or its lease ended: LeaseUntil <= now, whoever held it), its
	// subscription is not disabled, and it is the head of its queue (no
	// pending delivery of the same subscription and run has a lower
	// (Seq, ID)). Two callers never hold the same delivery for
	// overlapping leases (Postgres: FOR UPDATE SKIP LOCKED, so replicas
	// claim disjoint sets without waiting for each other).
	ClaimDeliveries(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]Delivery, error)

	// RecordAttempts appends to each delivery rs[i].ID the attempt
	// rs[i].Attempt (numbered Attempts+1: N and DeliveryID are set by the
	// store) and settles it: status DeliveryPending schedules a retry at
	// NextAt, DeliveryDelivered and DeliveryFailed end it (NextAt is then
	// ignored). It sets Attempts, LastError (Attempt.Error),
	// FirstAttemptAt (Attempt.At, when zero) and UpdatedAt (Attempt.At),
	// and ends the lease. All the records are held by owner and written in
	// one write (one transaction), each stored or refused on its own, in
	// order: errs[i] is ErrConflict when owner does not hold rs[i]'s lease
	// (never claimed, settled, or claimed by another since its lease
	// ended; a holder whose lease ended unnoticed may still record),
	// ErrNotFound for an unknown delivery, or CheckAttempt's refusal.
	// When the write as a whole fails, err says why, errs is nil and
	// nothing is recorded. The delivery loop records the answers of a
	// claim this way.
	RecordAttempts(ctx context.Context, owner string, rs []AttemptRecord) (errs []error, err error)

	// NextDeliveryDue returns the earliest time at which ClaimDeliveries
	// may return a delivery: the NextAt of a queue's head no lease holds,
	// the end of the lease of one that a lease holds (deliveries of
	// disabled subscriptions do not count). ok is false when there is
	// none.
	NextDeliveryDue(ctx context.Context) (at time.Time, ok bool, err error)

	// ListDeliveries returns up to limit (<= 0: all) deliveries of the
	// subscription, newest first: by ID descending, those with an ID
	// below after ("" for the first page). Empty for an unknown
	// subscription.
	ListDeliveries(ctx context.Context, subscriptionID, after string, limit int) ([]Delivery, error)

	// GetDelivery returns the subscription's delivery id, or ErrNotFound
	// (also for a delivery of another subscription).
	GetDelivery(ctx context.Context, subscriptionID, id string) (Delivery, error)

	// DeliveryAttempts returns up to limit (<= 0: all) of the delivery's
	// attempts numbered after after (N > after), in order (N);
	// ErrNotFound for an unknown delivery.
	DeliveryAttempts(ctx context.Context, id string, after, limit int) ([]DeliveryAttempt, error)

	// Redeliver makes the subscription's delivery id pending again with
	// NextAt now, keeping its MessageID, its Body and its attempts; a
	// settled one (delivered, failed) starts a new retry window
	// (FirstAttemptAt zero). A pending one is only made due now (a lease
	// on it stays). ErrNotFound when the subscription has no such
	// delivery.
	Redeliver(ctx context.Context, subscriptionID, id string, now time.Time) error

	// PendingDeliveries counts the pending deliveries, of every
	// subscription (disabled ones' included): the outbox's depth.
	PendingDeliveries(ctx context.Context) (int64, error)

	// EnqueueDeliveries stores deliveries outside a run's commit: messages
	// about run runID while it stays at version seq (a running task's
	// progress), completed by PrepareEnqueue with the event time at. They
	// are stored, atomically, only if the run is still at version seq:
	// ErrConflict when it moved on (the messages would report a past
	// state, behind the ones its later commits stored), ErrNotFound when
	// the run is not stored, ErrExists when a delivery id is taken. As in
	// a commit, a delivery for a subscription that is not stored is
	// dropped. They take their place in their queues by (Seq, ID).
	EnqueueDeliveries(ctx context.Context, runID string, seq int64, at time.Time, ds []Delivery) error

	// PruneDeliveries deletes up to limit (> 0) settled deliveries
	// (status delivered or failed) settled before before (their
	// UpdatedAt, the time of their last attempt, earlier than before),
	// oldest settled first (ties by ID), each with all its attempts in
	// one atomic step, and returns how many it deleted. A pending
	// delivery is never deleted, whatever its age: neither one due or
	// waiting for a retry nor one under a lease (only pending deliveries
	// are leased). A failed delivery goes like a delivered one: once
	// pruned it can no longer be redelivered. A delivery redelivered
	// meanwhile (pending again) stays. The remaining pending deliveries
	// keep their order and claimability: a settled delivery holds back no
	// queue. A call deletes fewer than limit when no more are settled
	// before the cut-off (Postgres also passes over the rows another
	// transaction is changing at that moment); the caller repeats it for
	// the rest, so that no call holds the store's writer for long.
	PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
}
