package memstore

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// webhooks keeps the subscriptions and the outbox under the store's mu.
// The pending deliveries of each (subscription, run) form a queue ordered
// by (Seq, ID); the ready heap holds only the head of each queue of an
// enabled subscription, ordered by the time it becomes claimable (NextAt,
// or the end of its lease while leased), so a claim pops the deliveries
// it takes and passes over none. The settled heap holds the settled
// deliveries by the time they settled (UpdatedAt), so retention
// (PruneDeliveries) pops the ones it deletes and passes over none; it
// leaves their ids in bySub as holes (gone counts them), removed in one
// pass once they are half of a subscription's ids, so that deleting costs
// O(1) per delivery, amortised, rather than a move of the ids after it.
type webhooks struct {
	subs     map[string]*store.Subscription
	dels     map[string]*delRec
	bySub    map[string][]string                // delivery ids of a subscription, ascending (with holes: ids not in dels)
	gone     map[string]int                     // holes in bySub, per subscription
	queues   map[string]map[string]*delQueue    // subscription -> run -> pending deliveries
	attempts map[string][]store.DeliveryAttempt // by delivery id
	ready    delHeap                            // which 0
	settled  delHeap                            // which 1
	pending  int64
}

// delRec is one stored delivery and its place in the ready heap, or in
// the settled heap.
type delRec struct {
	d     store.Delivery
	ready time.Time // NextAt, or LeaseUntil while leased
	at    [2]int    // index in the ready heap (0) and the settled heap (1), -1 when not in it
}

// delQueue is the pending deliveries of one subscription and run, by
// (Seq, ID): recs[0] is the head.
type delQueue struct{ recs []*delRec }

func newWebhooks() webhooks {
	return webhooks{subs: map[string]*store.Subscription{}, dels: map[string]*delRec{}, bySub: map[string][]string{}, gone: map[string]int{},
		queues: map[string]map[string]*delQueue{}, attempts: map[string][]store.DeliveryAttempt{},
		settled: delHeap{which: 1}}
}

// delHeap is a container/heap of delivery records: the ready heap, by
// (ready, ID), or the settled heap, by (UpdatedAt, ID), the oldest
// settled on top. Each record knows its index in each (at[which]).
type delHeap struct {
	which int // 0: ready, 1: settled
	recs  []*delRec
}

func (h *delHeap) key(r *delRec) time.Time {
	if h.which == 0 {
		return r.ready
	}
	return r.d.UpdatedAt
}

func (h *delHeap) Len() int { return len(h.recs) }
func (h *delHeap) Less(i, j int) bool {
	if c := h.key(h.recs[i]).Compare(h.key(h.recs[j])); c != 0 {
		return c < 0
	}
	return h.recs[i].d.ID < h.recs[j].d.ID
}
func (h *delHeap) Swap(i, j int) {
	h.recs[i], h.recs[j] = h.recs[j], h.recs[i]
	h.recs[i].at[h.which], h.recs[j].at[h.which] = i, j
}
func (h *delHeap) Push(x any) {
	r := x.(*delRec)
	r.at[h.which] = len(h.recs)
	h.recs = append(h.recs, r)
}
func (h *delHeap) Pop() any {
	old := h.recs
	r := old[len(old)-1]
	old[len(old)-1] = nil
	h.recs = old[:len(old)-1]
	r.at[h.which] = -1
	return r
}

// unsettle takes r out of the settled heap, if it is there.
func (w *webhooks) unsettle(r *delRec) {
	if r.at[1] >= 0 {
		heap.Remove(&w.settled, r.at[1])
	}
}

func queueOrder(a, b *delRec) int {
	if c := cmp.Compare(a.d.Seq, b.d.Seq); c != 0 {
		return c
	}
	return strings.Compare(a.d.ID, b.d.ID)
}

func (w *webhooks) enabled(sub string) bool {
	s, ok := w.subs[sub]
	return ok && !s.Disabled
}

// unready takes r out of the ready heap, if it is there.
func (w *webhooks) unready(r *delRec) {
	if r.at[0] >= 0 {
		heap.Remove(&w.ready, r.at[0])
	}
}

// enqueue puts a pending delivery into its queue, and into the ready heap
// if it becomes the head (the old head leaves the heap).
func (w *webhooks) enqueue(r *delRec) {
	runs := w.queues[r.d.SubscriptionID]
	if runs == nil {
		runs = map[string]*delQueue{}
		w.queues[r.d.SubscriptionID] = runs
	}
	q := runs[r.d.RunID]
	if q == nil {
		q = &delQueue{}
		runs[r.d.RunID] = q
	}
	i, _ := slices.BinarySearchFunc(q.recs, r, queueOrder)
	q.recs = slices.Insert(q.recs, i, r)
	w.pending++
	if i == 0 {
		if len(q.recs) > 1 {
			w.unready(q.recs[1])
		}
		if w.enabled(r.d.SubscriptionID) {
			heap.Push(&w.ready, r)
		}
	}
}

// dequeue takes a pending delivery out of its queue (it is settled); the
// next one, if it was the head, becomes claimable.
func (w *webhooks) dequeue(r *delRec) {
	runs := w.queues[r.d.SubscriptionID]
	q := runs[r.d.RunID]
	i := slices.Index(q.recs, r)
	if i == 0 {
		// The usual case, the head settled: drop it without moving the
		// rest of a long queue.
		q.recs[0] = nil
		q.recs = q.recs[1:]
	} else {
		q.recs = slices.Delete(q.recs, i, i+1)
	}
	w.pending--
	w.unready(r)
	if len(q.recs) == 0 {
		delete(runs, r.d.RunID)
		if len(runs) == 0 {
			delete(w.queues, r.d.SubscriptionID)
		}
		return
	}
	if i == 0 && w.enabled(r.d.SubscriptionID) {
		heap.Push(&w.ready, q.recs[0])
	}
}

// applyOutbox stores c's deliveries (after PrepareOutbox) whose
// subscription is stored, under mu. checkOutbox has run.
func (s *Store) applyOutbox(c *store.Commit) {
	w := &s.wh
	for _, d := range c.Outbox {
		if _, ok := w.subs[d.SubscriptionID]; !ok {
			continue
		}
		d.Body = slices.Clone(d.Body)
		r := &delRec{d: d, ready: d.NextAt, at: [2]int{-1, -1}}
		w.dels[d.ID] = r
		ids := w.bySub[d.SubscriptionID]
		if n := len(ids); n == 0 || ids[n-1] < d.ID {
			// The usual case: delivery ids start with the event's time,
			// so a new one sorts last.
			w.bySub[d.SubscriptionID] = append(ids, d.ID)
		} else if i, found := slices.BinarySearch(ids, d.ID); found {
			w.gone[d.SubscriptionID]-- // the id of a pruned delivery, stored again: its hole is filled
		} else {
			w.bySub[d.SubscriptionID] = slices.Insert(ids, i, d.ID)
		}
		w.enqueue(r)
	}
}

// checkOutbox refuses a commit whose delivery ids are taken, under mu,
// before the commit changes anything (the other stores' key).
func (s *Store) checkOutbox(c *store.Commit) error {
	for _, d := range c.Outbox {
		if _, ok := s.wh.dels[d.ID]; ok {
			return fmt.Errorf("memstore: delivery %s: %w", d.ID, store.ErrExists)
		}
	}
	return nil
}

func cloneSub(s store.Subscription) store.Subscription {
	s.Events, s.States = slices.Clone(s.Events), slices.Clone(s.States)
	if s.Secrets != nil {
		s.Secrets = slices.Clone(s.Secrets)
	}
	if len(s.Events) == 0 {
		s.Events = nil
	}
	if len(s.States) == 0 {
		s.States = nil
	}
	return s
}

// PutSubscription implements store.WebhookStore. Enabling or disabling
// a subscription puts its queues' heads into the ready heap or takes them
// out.
func (s *Store) PutSubscription(ctx context.Context, sub store.Subscription) error {
	if err := store.CheckSubscription(sub); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wh.put(sub)
	return nil
}

// put stores sub (the caller holds the store's lock): a subscription
// enabled or disabled by it makes its queues' heads claimable or not.
func (w *webhooks) put(sub store.Subscription) {
	was := w.enabled(sub.ID)
	c := cloneSub(sub)
	w.subs[sub.ID] = &c
	if now := !sub.Disabled; now != was {
		for _, q := range w.queues[sub.ID] {
			if now {
				heap.Push(&w.ready, q.recs[0])
			} else {
				w.unready(q.recs[0])
			}
		}
	}
}

// UpdateSubscription implements store.WebhookStore: under the store's
// lock, so updates apply one after the other.
func (s *Store) UpdateSubscription(ctx context.Context, id string, update func(*store.Subscription) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.wh.subs[id]
	if !ok {
		return fmt.Errorf("memstore: subscription %s: %w", id, store.ErrNotFound)
	}
	sub := cloneSub(*cur)
	if err := store.ApplyUpdate(id, &sub, update); err != nil {
		return err
	}
	s.wh.put(sub)
	return nil
}

// GetSubscription implements store.WebhookStore.
func (s *Store) GetSubscription(ctx context.Context, id string) (store.Subscription, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sub, ok := s.wh.subs[id]
	if !ok {
		return store.Subscription{}, fmt.Errorf("memstore: subscription %s: %w", id, store.ErrNotFound)
	}
	return cloneSub(*sub), nil
}

// ListSubscriptions implements store.WebhookStore.
func (s *Store) ListSubscriptions(ctx context.Context, after string, limit int) ([]store.Subscription, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []store.Subscription{}
	for id, sub := range s.wh.subs {
		if id > after {
			out = append(out, cloneSub(*sub))
		}
	}
	slices.SortFunc(out, func(a, b store.Subscription) int { return strings.Compare(a.ID, b.ID) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DeleteSubscription implements store.WebhookStore.
func (s *Store) DeleteSubscription(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.wh
	if _, ok := w.subs[id]; !ok {
		return fmt.Errorf("memstore: subscription %s: %w", id, store.ErrNotFound)
	}
	for _, q := range w.queues[id] {
		w.unready(q.recs[0])
		w.pending -= int64(len(q.recs))
	}
	delete(w.queues, id)
	for _, did := range w.bySub[id] {
		if r, ok := w.dels[did]; ok {
			w.unsettle(r)
		}
		delete(w.dels, did)
		delete(w.attempts, did)
	}
	delete(w.bySub, id)
	delete(w.gone, id)
	delete(w.subs, id)
	return nil
}

// ClaimDeliveries implements store.WebhookStore: it pops the ready heap.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Delivery, error) {
	if err := store.CheckDeliveryClaim(now, limit, owner, leaseUntil); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.wh
	out := []store.Delivery{}
	for len(out) < limit && w.ready.Len() > 0 {
		r := w.ready.recs[0]
		if r.ready.After(now) {
			break
		}
		r.d.Owner, r.d.LeaseUntil, r.ready = owner, leaseUntil, leaseUntil
		heap.Fix(&w.ready, 0)
		out = append(out, r.d)
	}
	store.SortDeliveries(out)
	return out, nil
}

// RecordAttempts implements store.WebhookStore: recordAttempt for each
// record, under one lock.
func (s *Store) RecordAttempts(ctx context.Context, owner string, rs []store.AttemptRecord) ([]error, error) {
	errs := make([]error, len(rs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range rs {
		if errs[i] = store.CheckAttempt(r.Status, r.NextAt); errs[i] == nil {
			errs[i] = s.recordAttempt(r.ID, owner, r.Attempt, r.Status, r.NextAt)
		}
	}
	return errs, nil
}

// recordAttempt records one attempt (see store.WebhookStore.RecordAttempts)
// once its arguments are checked, under mu.
func (s *Store) recordAttempt(id, owner string, a store.DeliveryAttempt, status string, nextAt time.Time) error {
	w := &s.wh
	r, ok := w.dels[id]
	if !ok {
		return fmt.Errorf("memstore: delivery %s: %w", id, store.ErrNotFound)
	}
	if r.d.Owner == "" || r.d.Owner != owner { // a settled delivery holds no lease
		return fmt.Errorf("memstore: delivery %s (%s) is not held by %s: %w", id, r.d.Status, owner, store.ErrConflict)
	}
	a.DeliveryID, a.N = id, r.d.Attempts+1
	w.attempts[id] = append(w.attempts[id], a)
	d := &r.d
	d.Attempts, d.LastError, d.UpdatedAt = a.N, a.Error, a.At
	if d.FirstAttemptAt.IsZero() {
		d.FirstAttemptAt = a.At
	}
	d.Owner, d.LeaseUntil = "", time.Time{}
	if status == store.DeliveryPending {
		d.NextAt, r.ready = nextAt, nextAt
		if r.at[0] >= 0 {
			heap.Fix(&w.ready, r.at[0])
		}
		return nil
	}
	d.Status = status
	w.dequeue(r)
	heap.Push(&w.settled, r)
	return nil
}

// NextDeliveryDue implements store.WebhookStore: the top of the ready heap.
func (s *Store) NextDeliveryDue(ctx context.Context) (time.Time, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.wh.ready.Len() == 0 {
		return time.Time{}, false, nil
	}
	return s.wh.ready.recs[0].ready, true, nil
}

// ListDeliveries implements store.WebhookStore.
func (s *Store) ListDeliveries(ctx context.Context, subscriptionID, after string, limit int) ([]store.Delivery, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := s.wh.bySub[subscriptionID]
	end := len(ids)
	if after != "" {
		end, _ = slices.BinarySearch(ids, after)
	}
	out := []store.Delivery{}
	for i := end - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		if r, ok := s.wh.dels[ids[i]]; ok { // not a hole left by retention
			out = append(out, r.d)
		}
	}
	return out, nil
}

// GetDelivery implements store.WebhookStore.
func (s *Store) GetDelivery(ctx context.Context, subscriptionID, id string) (store.Delivery, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.wh.dels[id]
	if !ok || r.d.SubscriptionID != subscriptionID {
		return store.Delivery{}, fmt.Errorf("memstore: delivery %s of subscription %s: %w", id, subscriptionID, store.ErrNotFound)
	}
	return r.d, nil
}

// DeliveryAttempts implements store.WebhookStore.
func (s *Store) DeliveryAttempts(ctx context.Context, id string, after, limit int) ([]store.DeliveryAttempt, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.wh.dels[id]; !ok {
		return nil, fmt.Errorf("memstore: delivery %s: %w", id, store.ErrNotFound)
	}
	as := s.wh.attempts[id]
	from, _ := slices.BinarySearchFunc(as, after+1, func(a store.DeliveryAttempt, n int) int { return cmp.Compare(a.N, n) })
	as = as[from:]
	if limit > 0 && len(as) > limit {
		as = as[:limit]
	}
	return append([]store.DeliveryAttempt{}, as...), nil
}

// Redeliver implements store.WebhookStore.
func (s *Store) Redeliver(ctx context.Context, subscriptionID, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.wh
	r, ok := w.dels[id]
	if !ok || r.d.SubscriptionID != subscriptionID {
		return fmt.Errorf("memstore: delivery %s of subscription %s: %w", id, subscriptionID, store.ErrNotFound)
	}
	r.d.NextAt, r.d.UpdatedAt = now, now
	if r.d.Status == store.DeliveryPending {
		if r.d.Owner == "" {
			r.ready = now
			if r.at[0] >= 0 {
				heap.Fix(&w.ready, r.at[0])
			}
		}
		return nil
	}
	w.unsettle(r)
	r.d.Status, r.d.FirstAttemptAt, r.d.RetryBase, r.ready = store.DeliveryPending, time.Time{}, r.d.Attempts, now
	w.enqueue(r)
	return nil
}

// PendingDeliveries implements store.WebhookStore.
func (s *Store) PendingDeliveries(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.wh.pending, nil
}

// PruneDeliveries implements store.WebhookStore: it pops the settled
// heap while its top settled before the cut-off.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := store.CheckPrune(limit); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.wh
	n := 0
	for n < limit && w.settled.Len() > 0 && w.settled.recs[0].d.UpdatedAt.Before(before) {
		r := heap.Pop(&w.settled).(*delRec)
		sub := r.d.SubscriptionID
		delete(w.dels, r.d.ID)
		delete(w.attempts, r.d.ID)
		w.gone[sub]++
		if ids := w.bySub[sub]; 2*w.gone[sub] >= len(ids) {
			w.bySub[sub] = slices.DeleteFunc(ids, func(id string) bool { _, ok := w.dels[id]; return !ok })
			w.gone[sub] = 0
		}
		n++
	}
	return n, nil
}
