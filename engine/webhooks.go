package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/webhook"
	"github.com/asmp-dev/asmp/workflow"
)

// Webhooks: subscriptions are stored (store.WebhookStore) and kept in
// memory, so that every commit can add, in its own transaction, one
// outbox delivery per subscription that wants the change it records
// (outbox). A delivery loop (StartDeliveries) sends them; see
// docs/WEBHOOKS.md.

// subscriptions is the engine's view of the stored subscriptions: the
// active ones, which commits match against.
type subscriptions struct {
	active []store.Subscription
	// keys are the decoded secrets of the active subscriptions, ready to
	// sign (by id; one whose secrets do not decode is missing), and
	// secrets the stored bytes they were decoded from: a delivery signs
	// with keys[id] while its subscription's stored secrets are still
	// those bytes (a rotation through this replica or another changes
	// them).
	keys    map[string]*webhook.Keys
	secrets map[string][]byte
}

// keysOf returns the signing keys of s: the view's when its secrets are
// the ones decoded there, else decoded now.
func (v *subscriptions) keysOf(s *store.Subscription) (*webhook.Keys, error) {
	if v != nil {
		if k, ok := v.keys[s.ID]; ok && bytes.Equal(v.secrets[s.ID], s.Secrets) {
			return k, nil
		}
	}
	secrets, err := webhook.DecodeSecrets(s.Secrets)
	if err != nil {
		return nil, err
	}
	return webhook.NewKeys(secrets), nil
}

// MaxWebhooks bounds the subscriptions a server keeps: each one is
// matched against every commit.
const MaxWebhooks = 256

// MaxWebhookURL bounds a subscription's url, in bytes.
const MaxWebhookURL = 2048

// DefaultSecretGrace is how long a rotated secret keeps signing when the
// rotation names no grace period.
const DefaultSecretGrace = 24 * time.Hour

// loadSubscriptions reads every stored subscription into the engine's
// view and returns how many are stored (disabled ones included). The
// delivery loop calls it on every poll, so that subscriptions made or
// removed through another replica take effect here within the poll
// interval.
func (e *Engine) loadSubscriptions(ctx context.Context) (int, error) {
	var active []store.Subscription
	n, after := 0, ""
	for {
		page, err := e.store.ListSubscriptions(ctx, after, 100)
		if err != nil {
			return 0, fmt.Errorf("engine: read webhook subscriptions: %w", err)
		}
		n += len(page)
		for _, s := range page {
			if !s.Disabled {
				active = append(active, s)
			}
		}
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].ID
	}
	v := &subscriptions{active: active, keys: make(map[string]*webhook.Keys, len(active)), secrets: make(map[string][]byte, len(active))}
	old := e.subs.Load()
	for _, s := range active {
		if k, err := old.keysOf(&s); err == nil {
			v.keys[s.ID], v.secrets[s.ID] = k, s.Secrets
		}
	}
	e.subs.Store(v)
	return n, nil
}

// messageID is the stable id of the message of type typ about event seq
// of run: the webhook-id header, the same on every attempt and for every
// subscription, which receivers deduplicate on.
func messageID(runID string, seq int64, typ string) string {
	var buf [128]byte
	in := append(append(buf[:0], runID...), 0)
	in = append(strconv.AppendInt(in, seq, 10), 0)
	h := sha256.Sum256(append(in, typ...))
	var out [4 + 32]byte
	copy(out[:], "msg_")
	hex.Encode(out[4:], h[:16])
	return string(out[:])
}

// deliveryID is the id of the k-th message about event seq of run,
// which happened at at, to subscription sub. It starts with the event's
// time (16 hex digits of Unix nanoseconds), so ids sort by time: a
// subscription's deliveries list newest first by id, and a store appends
// each new one at the end. The messages of one event share the rest of
// the prefix and sort by k after it, so the store (which orders a run's
// deliveries by seq, then id) sends them in the order the event made
// them: run.state_changed before run.completed.
func deliveryID(sub, run string, seq int64, at time.Time, k int) string {
	var buf [160]byte
	in := append(append(append(append(buf[:0], sub...), 0), run...), 0)
	h := sha256.Sum256(strconv.AppendInt(in, seq, 10))
	var out [64]byte
	b := append(out[:0], "dlv_"...)
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(at.UnixNano()))
	b = hex.AppendEncode(b, t[:])
	b = hex.AppendEncode(b, h[:12])
	return string(strconv.AppendInt(b, int64(k), 10))
}

// webhookTypes returns the message types a commit's event stands for:
// run.created for a new run, run.state_changed for every transition
// (self-loops too: the run took an action), and run.completed or
// run.failed when the run reaches that status (prevStatus is the status
// before; "" for a new run).
func webhookTypes(ev *store.Event, prevStatus, status string) []string {
	var out []string
	switch ev.Kind {
	case store.EventCreated:
		out = append(out, protocol.WebhookRunCreated)
	case store.EventTransition:
		out = append(out, protocol.WebhookRunStateChanged)
	}
	if status != prevStatus {
		switch status {
		case protocol.StatusCompleted:
			out = append(out, protocol.WebhookRunCompleted)
		case protocol.StatusFailed:
			out = append(out, protocol.WebhookRunFailed)
		}
	}
	return out
}

// wants reports whether s wants a message of type typ about a run of
// workflow wf now in state.
func wants(s *store.Subscription, typ, wf, state string) bool {
	if s.WorkflowID != "" && s.WorkflowID != wf {
		return false
	}
	if len(s.States) > 0 && !slices.Contains(s.States, state) {
		return false
	}
	return slices.Contains(s.Events, typ)
}

// outbox adds to c one delivery per active subscription that wants the
// change c records; def is the run's definition and prevStatus its status
// before c ("" when c creates it). A commit no subscription wants is left
// alone, so a server without subscriptions pays one atomic load.
func (e *Engine) outbox(def *workflow.Definition, prevStatus string, c *store.Commit) {
	subs := e.subs.Load()
	if subs == nil || len(subs.active) == 0 {
		return
	}
	ev := &c.Event
	status := StatusAfter(def, ev)
	for k, typ := range webhookTypes(ev, prevStatus, status) {
		var body []byte
		msg := messageID(c.Run.ID, ev.Seq, typ)
		for i := range subs.active {
			s := &subs.active[i]
			if !wants(s, typ, c.Run.WorkflowID, c.Run.State) {
				continue
			}
			if body == nil {
				m := webhook.Message{Type: typ, Timestamp: ev.Time.UTC(), Data: webhook.Data{
					RunID: c.Run.ID, WorkflowID: c.Run.WorkflowID, WorkflowVersion: c.Run.WorkflowVersion,
					State: c.Run.State, Status: status, FrameHref: "/runs/" + c.Run.ID}}
				if ev.Kind != store.EventCreated {
					m.Data.From, m.Data.Action, m.Data.Actor = ev.From, ev.Action, ev.Actor
				}
				var err error
				if body, err = webhook.EncodeMessage(m); err != nil {
					e.log.Error("encoding a webhook message failed", "run", c.Run.ID, "err", err)
					return
				}
			}
			c.Outbox = append(c.Outbox, store.Delivery{
				ID: deliveryID(s.ID, c.Run.ID, ev.Seq, ev.Time, k), SubscriptionID: s.ID, MessageID: msg, RunID: c.Run.ID, Seq: ev.Seq,
				Type: typ, Body: body, Status: store.DeliveryPending, NextAt: ev.Time, CreatedAt: ev.Time, UpdatedAt: ev.Time})
		}
	}
}

// outboxStored tells the delivery loop that a commit stored deliveries.
func (e *Engine) outboxStored(c *store.Commit) {
	if len(c.Outbox) > 0 {
		e.wakeDeliveries()
	}
}

// wakeDeliveries makes the delivery loop, if one runs, look now.
func (e *Engine) wakeDeliveries() {
	if l := e.deliveryLoop.Load(); l != nil {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// CreateWebhook stores a new subscription after checking it: known event
// types, a served workflow, states of it (or of some served workflow), and
// a URL the sender's policy admits (resolved now; checked again at every
// connection). The answer holds the secret, shown this once.
func (e *Engine) CreateWebhook(ctx context.Context, req protocol.WebhookRequest) (protocol.WebhookSubscription, error) {
	if err := e.checkWebhook(ctx, &req); err != nil {
		return protocol.WebhookSubscription{}, err
	}
	if n, err := e.loadSubscriptions(ctx); err != nil {
		return protocol.WebhookSubscription{}, internal("could not read the subscriptions", err)
	} else if n >= MaxWebhooks {
		return protocol.WebhookSubscription{}, protocol.Errorf(protocol.ETooLarge, "This server keeps at most %d webhook subscriptions; delete one (DELETE /webhooks/{id}) first.", MaxWebhooks)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return protocol.WebhookSubscription{}, internal("could not make a secret", err)
	}
	enc, err := webhook.EncodeSecrets([]webhook.Secret{secret})
	if err != nil {
		return protocol.WebhookSubscription{}, internal("could not encode the secret", err)
	}
	now := e.now().UTC()
	s := store.Subscription{ID: "wh_" + strings.ReplaceAll(e.newID(), "-", ""), URL: req.URL, Events: req.Events, WorkflowID: req.WorkflowID,
		States: req.States, Secrets: enc, CreatedAt: now, UpdatedAt: now}
	if err := e.store.PutSubscription(ctx, s); err != nil {
		return protocol.WebhookSubscription{}, internal("could not store the subscription", err)
	}
	if _, err := e.loadSubscriptions(ctx); err != nil {
		return protocol.WebhookSubscription{}, internal("could not reload the subscriptions", err)
	}
	out := webhookView(&s)
	out.Secret = secret.Encode()
	return out, nil
}

func (e *Engine) checkWebhook(ctx context.Context, req *protocol.WebhookRequest) error {
	if req.URL == "" {
		return protocol.Errorf(protocol.EInvalid, `A subscription needs a "url": the https:// address to POST messages to.`)
	}
	if len(req.URL) > MaxWebhookURL {
		return protocol.Errorf(protocol.EInvalid, "The url is %d bytes; a webhook url is at most %d.", len(req.URL), MaxWebhookURL).With("field", "url")
	}
	if len(req.Events) == 0 {
		return protocol.Errorf(protocol.EInvalid, `A subscription needs "events": one or more of %s.`, strings.Join(protocol.WebhookEventTypes, ", "))
	}
	seen := map[string]bool{}
	for _, t := range req.Events {
		if !protocol.IsWebhookEventType(t) {
			return protocol.Errorf(protocol.EInvalid, "Unknown event type %q: use %s.", protocol.Truncate(t, 64), strings.Join(protocol.WebhookEventTypes, ", "))
		}
		seen[t] = true
	}
	req.Events = slices.Sorted(func(yield func(string) bool) {
		for t := range seen {
			if !yield(t) {
				return
			}
		}
	})
	defs := e.order
	if req.WorkflowID != "" {
		d, ok := e.Workflow(req.WorkflowID)
		if !ok {
			return protocol.Errorf(protocol.EInvalid, "Unknown workflow_id %q: this server serves %s.", protocol.Truncate(req.WorkflowID, 64), strings.Join(e.WorkflowIDs(), ", "))
		}
		defs = []*workflow.Definition{d}
	}
	req.States = slices.Compact(slices.Sorted(slices.Values(req.States)))
	for _, st := range req.States {
		found := false
		for _, d := range defs {
			if _, ok := d.State(st); ok {
				found = true
				break
			}
		}
		if !found {
			return protocol.Errorf(protocol.EInvalid, "Unknown state %q in \"states\": no served workflow%s has it.", protocol.Truncate(st, 64), map[bool]string{true: " " + req.WorkflowID, false: ""}[req.WorkflowID != ""])
		}
	}
	if err := e.webhooks.CheckURL(ctx, req.URL); err != nil {
		if errors.Is(err, webhook.ErrRefused) {
			return protocol.Errorf(protocol.EInvalid, "The url is refused as a webhook target: %v. Targets are https:// addresses on the public internet; an operator admits others with asmp serve --webhook-allow.", err)
		}
		return protocol.Errorf(protocol.EInvalid, "The url cannot be checked: %v.", err)
	}
	return nil
}

// webhookView is the API's form of s, without its secret.
func webhookView(s *store.Subscription) protocol.WebhookSubscription {
	v := protocol.WebhookSubscription{ID: s.ID, URL: s.URL, Events: s.Events, WorkflowID: s.WorkflowID, States: s.States,
		Status: "active", CreatedAt: s.CreatedAt.UTC(), Href: "/webhooks/" + s.ID, DeliveriesHref: "/webhooks/" + s.ID + "/deliveries"}
	if v.Events == nil {
		v.Events = []string{}
	}
	if s.Disabled {
		v.Status, v.DisabledReason = "disabled", s.DisabledReason
	}
	return v
}

// Webhook returns the subscription id, without its secret.
func (e *Engine) Webhook(ctx context.Context, id string) (protocol.WebhookSubscription, error) {
	s, err := e.subscription(ctx, id)
	if err != nil {
		return protocol.WebhookSubscription{}, err
	}
	return webhookView(&s), nil
}

func (e *Engine) subscription(ctx context.Context, id string) (store.Subscription, error) {
	s, err := e.store.GetSubscription(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Subscription{}, e.noSubscription(id)
	}
	if err != nil {
		return store.Subscription{}, internal("could not read the subscription", err)
	}
	return s, nil
}

// noSubscription is the ENotFound of subscription id.
func (e *Engine) noSubscription(id string) error {
	return protocol.Errorf(protocol.ENotFound, "No webhook subscription %q: GET /webhooks lists them.", id)
}

// Webhooks returns a page of subscriptions, by id, after the cursor.
func (e *Engine) Webhooks(ctx context.Context, after string, limit int) (*protocol.WebhookList, error) {
	page, err := e.store.ListSubscriptions(ctx, after, limit+1)
	if err != nil {
		return nil, internal("could not read the subscriptions", err)
	}
	out := &protocol.WebhookList{Webhooks: []protocol.WebhookSubscription{}}
	if len(page) > limit {
		page = page[:limit]
		next := page[len(page)-1].ID
		out.NextCursor = &next
	}
	for i := range page {
		out.Webhooks = append(out.Webhooks, webhookView(&page[i]))
	}
	return out, nil
}

// DeleteWebhook removes a subscription and its deliveries: nothing more
// is sent to it.
func (e *Engine) DeleteWebhook(ctx context.Context, id string) error {
	err := e.store.DeleteSubscription(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return protocol.Errorf(protocol.ENotFound, "No webhook subscription %q: GET /webhooks lists them.", id)
	}
	if err != nil {
		return internal("could not delete the subscription", err)
	}
	if _, err := e.loadSubscriptions(ctx); err != nil {
		return internal("could not reload the subscriptions", err)
	}
	return nil
}

// RotateWebhookSecret gives a subscription a new secret and keeps its old
// ones signing for grace, so the receiver can switch in that time;
// messages carry a signature under each. A grace of 0 revokes the old
// secrets now: the next message is signed with the new one only (for a
// leaked secret). The API's default, when the request names no grace,
// is DefaultSecretGrace. The answer holds the new secret, shown this
// once.
func (e *Engine) RotateWebhookSecret(ctx context.Context, id string, grace time.Duration) (protocol.WebhookSubscription, error) {
	if grace < 0 || grace > 30*24*time.Hour {
		return protocol.WebhookSubscription{}, protocol.Errorf(protocol.EInvalid, "The grace period must be between 0 (revoke the old secret now) and 720h (30d), not %s.", grace)
	}
	// One atomic update of the stored value: concurrent rotations (here
	// or on another replica) each add their secret to what the one
	// before stored, and none brings back a subscription deleted
	// meanwhile.
	var s store.Subscription
	var fresh webhook.Secret
	err := e.store.UpdateSubscription(ctx, id, func(cur *store.Subscription) error {
		old, err := webhook.DecodeSecrets(cur.Secrets)
		if err != nil {
			return internal("the stored secrets do not decode", err)
		}
		now := e.now().UTC()
		var secrets []webhook.Secret
		secrets, fresh, err = webhook.Rotate(old, now, grace)
		var full *webhook.TooManySecretsError
		if errors.As(err, &full) {
			return protocol.Errorf(protocol.EConflict,
				"Webhook subscription %q already has %d secrets signing its messages (the current one and %d in their grace periods, the first ending at %s): rotate with grace 0 to revoke the old ones now, or wait until then.",
				id, full.Live, full.Live-1, full.FirstExpiry.UTC().Format(time.RFC3339))
		}
		if err != nil {
			return internal("could not make a secret", err)
		}
		if cur.Secrets, err = webhook.EncodeSecrets(secrets); err != nil {
			return internal("could not encode the secrets", err)
		}
		cur.UpdatedAt = now
		s = *cur
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return protocol.WebhookSubscription{}, e.noSubscription(id)
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return protocol.WebhookSubscription{}, pe
	}
	if err != nil {
		return protocol.WebhookSubscription{}, internal("could not store the subscription", err)
	}
	out := webhookView(&s)
	out.Secret = fresh.Encode()
	return out, nil
}

// deliveryView is the API's form of d; with history, its message and
// attempts too.
func deliveryView(d *store.Delivery, history []store.DeliveryAttempt) protocol.WebhookDelivery {
	v := protocol.WebhookDelivery{ID: d.ID, MessageID: d.MessageID, Type: d.Type, RunID: d.RunID, Status: d.Status, Attempts: d.Attempts,
		LastError: d.LastError, CreatedAt: d.CreatedAt.UTC(), Href: "/webhooks/" + d.SubscriptionID + "/deliveries/" + d.ID}
	if d.Status == store.DeliveryPending {
		at := d.NextAt.UTC()
		v.NextAttemptAt = &at
	}
	if history != nil {
		v.Message = d.Body
		v.History = make([]protocol.WebhookAttempt, len(history))
		for i, a := range history {
			v.History[i] = protocol.WebhookAttempt{N: a.N, At: a.At.UTC(), Class: a.Class, Status: a.Status,
				DurationMS: float64(a.Duration.Microseconds()) / 1000, Answer: a.Answer, Error: a.Error}
		}
	}
	return v
}

// WebhookDeliveries returns a page of a subscription's deliveries.
func (e *Engine) WebhookDeliveries(ctx context.Context, id, after string, limit int) (*protocol.WebhookDeliveryList, error) {
	if _, err := e.subscription(ctx, id); err != nil {
		return nil, err
	}
	page, err := e.store.ListDeliveries(ctx, id, after, limit+1)
	if err != nil {
		return nil, internal("could not read the deliveries", err)
	}
	out := &protocol.WebhookDeliveryList{Deliveries: []protocol.WebhookDelivery{}}
	if len(page) > limit {
		page = page[:limit]
		next := page[len(page)-1].ID
		out.NextCursor = &next
	}
	for i := range page {
		out.Deliveries = append(out.Deliveries, deliveryView(&page[i], nil))
	}
	return out, nil
}

// DefaultAttemptPage is how many of a delivery's attempts WebhookDelivery
// returns when no limit is given.
const DefaultAttemptPage = 50

// WebhookDelivery returns one delivery with its message and a page of its
// attempts: up to limit (<= 0: DefaultAttemptPage) numbered after after,
// oldest first, and when more follow, HistoryNextCursor set to the last
// one's number (the server wraps it as an opaque cursor).
func (e *Engine) WebhookDelivery(ctx context.Context, id, did string, after, limit int) (protocol.WebhookDelivery, error) {
	if limit <= 0 {
		limit = DefaultAttemptPage
	}
	d, err := e.store.GetDelivery(ctx, id, did)
	if errors.Is(err, store.ErrNotFound) {
		return protocol.WebhookDelivery{}, e.noDelivery(ctx, id, did)
	}
	if err != nil {
		return protocol.WebhookDelivery{}, internal("could not read the delivery", err)
	}
	hist, err := e.store.DeliveryAttempts(ctx, did, after, limit+1)
	if errors.Is(err, store.ErrNotFound) { // pruned since it was read
		return protocol.WebhookDelivery{}, e.noDelivery(ctx, id, did)
	}
	if err != nil {
		return protocol.WebhookDelivery{}, internal("could not read the attempts", err)
	}
	if hist == nil {
		hist = []store.DeliveryAttempt{}
	}
	more := len(hist) > limit
	if more {
		hist = hist[:limit]
	}
	v := deliveryView(&d, hist)
	if more {
		next := strconv.Itoa(hist[len(hist)-1].N)
		v.HistoryNextCursor = &next
	}
	return v, nil
}

// Redeliver sends a delivery again, now, with its message id unchanged
// (receivers that took it before deduplicate it). Redelivering to a
// subscription that was disabled (its receiver answered 410 Gone) enables
// it again: the operator says the receiver is back.
func (e *Engine) Redeliver(ctx context.Context, id, did string) (protocol.WebhookDelivery, error) {
	s, err := e.subscription(ctx, id)
	if err != nil {
		return protocol.WebhookDelivery{}, err
	}
	err = e.store.Redeliver(ctx, id, did, e.now().UTC())
	if err == nil && s.Disabled {
		err = e.store.UpdateSubscription(ctx, id, func(cur *store.Subscription) error {
			cur.Disabled, cur.DisabledReason, cur.UpdatedAt = false, "", e.now().UTC()
			return nil
		})
		if err == nil {
			_, err = e.loadSubscriptions(ctx)
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return protocol.WebhookDelivery{}, e.noDelivery(ctx, id, did)
	}
	if err != nil {
		return protocol.WebhookDelivery{}, internal("could not schedule the delivery", err)
	}
	e.wakeDeliveries()
	return e.WebhookDelivery(ctx, id, did, 0, 0)
}

// noDelivery is the error for a delivery did of subscription id that is
// not stored: the subscription's own not-found when it is not stored
// either; else it never was, or retention deleted it once settled (here,
// with the retention this engine keeps, or by another replica).
func (e *Engine) noDelivery(ctx context.Context, id, did string) error {
	if _, err := e.subscription(ctx, id); err != nil {
		return err // no such subscription (or it could not be read): say that, not that its delivery is gone
	}
	why := "webhook retention deleted it (settled deliveries are deleted once older than asmp serve --webhook-retention)"
	if keep := time.Duration(e.deliveryKeep.Load()); keep > 0 {
		why = "webhook retention deleted it (this server deletes deliveries settled more than " + workflow.FormatDuration(keep) + " ago: asmp serve --webhook-retention)"
	}
	return protocol.Errorf(protocol.ENotFound, "No delivery %q of webhook subscription %q: it never existed, or %s. GET /webhooks/%s/deliveries lists the deliveries kept.", did, id, why, id)
}
