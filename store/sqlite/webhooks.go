package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// applyOutbox stores c's deliveries (after store.PrepareOutbox) in the
// writer's transaction, each only if its subscription is stored.
func applyOutbox(tx wtx, c *store.Commit) error {
	for _, d := range c.Outbox {
		if _, err := tx.Exec(`INSERT INTO webhook_deliveries (id, subscription_id, message_id, run_id, seq, type, body, status,
				attempts, next_at, ready_at, first_attempt_at, owner, lease_until, created_at, updated_at, last_error)
			SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', 0, ?8, ?8, 0, '', 0, ?9, ?9, ''
			WHERE EXISTS (SELECT 1 FROM webhook_subscriptions WHERE id = ?2)`,
			d.ID, d.SubscriptionID, d.MessageID, d.RunID, d.Seq, d.Type, []byte(d.Body), nanos(d.NextAt), nanos(d.CreatedAt)); err != nil {
			return fmt.Errorf("sqlite: store delivery %s: %w", d.ID, err)
		}
	}
	return nil
}

const subscriptionCols = `id, url, events, workflow_id, states, secrets, disabled, disabled_reason, created_at, updated_at`

// scanSubscription reads one row of subscriptionCols.
func scanSubscription(sc scanner) (store.Subscription, error) {
	var s store.Subscription
	var events, states string
	var secrets []byte
	var created, updated int64
	if err := sc.Scan(&s.ID, &s.URL, &events, &s.WorkflowID, &states, &secrets, &s.Disabled, &s.DisabledReason, &created, &updated); err != nil {
		return store.Subscription{}, err
	}
	var err error
	if s.Events, err = parseMilestones(events); err != nil {
		return store.Subscription{}, err
	}
	if s.States, err = parseMilestones(states); err != nil {
		return store.Subscription{}, err
	}
	if secrets != nil {
		s.Secrets = json.RawMessage(secrets)
	}
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return s, nil
}

const deliveryCols = `id, subscription_id, message_id, run_id, seq, type, body, status, attempts, next_at, first_attempt_at,
	owner, lease_until, created_at, updated_at, last_error, retry_base`

// scanDelivery reads one row of deliveryCols.
func scanDelivery(sc scanner) (store.Delivery, error) {
	var d store.Delivery
	var body []byte
	var next, first, lease, created, updated int64
	if err := sc.Scan(&d.ID, &d.SubscriptionID, &d.MessageID, &d.RunID, &d.Seq, &d.Type, &body, &d.Status, &d.Attempts, &next, &first,
		&d.Owner, &lease, &created, &updated, &d.LastError, &d.RetryBase); err != nil {
		return store.Delivery{}, err
	}
	d.Body = json.RawMessage(body)
	d.NextAt, d.FirstAttemptAt, d.LeaseUntil = fromNanos(next), fromNanos(first), fromNanos(lease)
	d.CreatedAt, d.UpdatedAt = fromNanos(created), fromNanos(updated)
	return d, nil
}

// PutSubscription implements store.WebhookStore.
func (s *Store) PutSubscription(ctx context.Context, sub store.Subscription) error {
	if err := store.CheckSubscription(sub); err != nil {
		return err
	}
	return s.write(ctx, func(tx wtx) error { return putSubscription(tx, sub) })
}

// putSubscription creates sub or replaces the row with its ID.
func putSubscription(tx wtx, sub store.Subscription) error {
	var secrets []byte
	if sub.Secrets != nil {
		secrets = []byte(sub.Secrets)
	}
	if _, err := tx.Exec(`INSERT INTO webhook_subscriptions (`+subscriptionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, events = excluded.events, workflow_id = excluded.workflow_id,
			states = excluded.states, secrets = excluded.secrets, disabled = excluded.disabled,
			disabled_reason = excluded.disabled_reason, created_at = excluded.created_at, updated_at = excluded.updated_at`,
		sub.ID, sub.URL, milestonesJSON(sub.Events), sub.WorkflowID, milestonesJSON(sub.States), secrets, sub.Disabled, sub.DisabledReason,
		nanos(sub.CreatedAt), nanos(sub.UpdatedAt)); err != nil {
		return fmt.Errorf("sqlite: put subscription %s: %w", sub.ID, err)
	}
	return nil
}

// UpdateSubscription implements store.WebhookStore: the read, update and
// write are one write of the store's writer, so updates apply one after
// the other.
func (s *Store) UpdateSubscription(ctx context.Context, id string, update func(*store.Subscription) error) error {
	return s.write(ctx, func(tx wtx) error {
		sub, err := scanSubscription(tx.QueryRow(`SELECT `+subscriptionCols+` FROM webhook_subscriptions WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: subscription %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: get subscription %s: %w", id, err)
		}
		if err := store.ApplyUpdate(id, &sub, update); err != nil {
			return err
		}
		return putSubscription(tx, sub)
	})
}

// GetSubscription implements store.WebhookStore.
func (s *Store) GetSubscription(ctx context.Context, id string) (store.Subscription, error) {
	sub, err := scanSubscription(s.queryRow(ctx, `SELECT `+subscriptionCols+` FROM webhook_subscriptions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Subscription{}, fmt.Errorf("sqlite: subscription %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Subscription{}, fmt.Errorf("sqlite: get subscription %s: %w", id, err)
	}
	return sub, nil
}

// ListSubscriptions implements store.WebhookStore.
func (s *Store) ListSubscriptions(ctx context.Context, after string, limit int) ([]store.Subscription, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.query(ctx, `SELECT `+subscriptionCols+` FROM webhook_subscriptions WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list subscriptions: %w", err)
	}
	defer rows.Close()
	out := []store.Subscription{}
	for rows.Next() {
		sub, err := scanSubscription(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list subscriptions: %w", err)
		}
		out = append(out, sub)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list subscriptions: %w", err)
	}
	return out, nil
}

// DeleteSubscription implements store.WebhookStore.
func (s *Store) DeleteSubscription(ctx context.Context, id string) error {
	return s.write(ctx, func(tx wtx) error {
		res, err := tx.Exec(`DELETE FROM webhook_subscriptions WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("sqlite: delete subscription %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("sqlite: subscription %s: %w", id, store.ErrNotFound)
		}
		if _, err := tx.Exec(`DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE subscription_id = ?)`, id); err != nil {
			return fmt.Errorf("sqlite: delete the attempts of subscription %s: %w", id, err)
		}
		if _, err := tx.Exec(`DELETE FROM webhook_deliveries WHERE subscription_id = ?`, id); err != nil {
			return fmt.Errorf("sqlite: delete the deliveries of subscription %s: %w", id, err)
		}
		return nil
	})
}

// claimable is the condition on a pending delivery d (walked in
// webhook_deliveries_ready) that makes it claimable once due: it is the
// head of its queue (the first entry of webhook_deliveries_queue for its
// subscription and run) and its subscription is enabled.
const claimable = `d.id = (SELECT q.id FROM webhook_deliveries q
		WHERE q.status = 'pending' AND q.subscription_id = d.subscription_id AND q.run_id = d.run_id
		ORDER BY q.seq, q.id LIMIT 1)
	AND EXISTS (SELECT 1 FROM webhook_subscriptions w WHERE w.id = d.subscription_id AND w.disabled = 0)`

// claimDeliveriesQuery leases the first claimable deliveries of
// webhook_deliveries_ready (ready_at <= now: due and not under a lease).
const claimDeliveriesQuery = `UPDATE webhook_deliveries SET owner = ?1, lease_until = ?2, ready_at = ?2
	WHERE id IN (SELECT d.id FROM webhook_deliveries d
		WHERE d.status = 'pending' AND d.ready_at <= ?3 AND ` + claimable + `
		ORDER BY d.ready_at, d.id LIMIT ?4)
	RETURNING ` + deliveryCols

// nextDeliveryQuery reads the first claimable entry of
// webhook_deliveries_ready, due or not.
const nextDeliveryQuery = `SELECT d.ready_at FROM webhook_deliveries d
	WHERE d.status = 'pending' AND ` + claimable + `
	ORDER BY d.ready_at, d.id LIMIT 1`

// ClaimDeliveries implements store.WebhookStore, in the writer (the one
// process that has the database open is the only claimer).
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Delivery, error) {
	if err := store.CheckDeliveryClaim(now, limit, owner, leaseUntil); err != nil {
		return nil, err
	}
	var out []store.Delivery
	err := s.write(ctx, func(tx wtx) error {
		out = []store.Delivery{}
		rows, err := tx.Query(claimDeliveriesQuery, owner, nanos(leaseUntil), nanos(now), limit)
		if err != nil {
			return fmt.Errorf("sqlite: claim deliveries: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return fmt.Errorf("sqlite: claim deliveries: %w", err)
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	store.SortDeliveries(out)
	return out, nil
}

// RecordAttempts implements store.WebhookStore: the records in one write
// of the writer.
func (s *Store) RecordAttempts(ctx context.Context, owner string, rs []store.AttemptRecord) ([]error, error) {
	errs := make([]error, len(rs))
	err := s.write(ctx, func(tx wtx) error {
		for i, r := range rs {
			if errs[i] = store.CheckAttempt(r.Status, r.NextAt); errs[i] != nil {
				continue
			}
			var err error
			if errs[i], err = recordAttempt(tx, r.ID, owner, r.Attempt, r.Status, r.NextAt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// recordAttempt records attempt a of delivery id in tx: refused is
// ErrNotFound or ErrConflict (nothing written), err a failure of the
// write.
func recordAttempt(tx wtx, id, owner string, a store.DeliveryAttempt, status string, nextAt time.Time) (refused, err error) {
	var cur, holder string
	var attempts int
	var next, ready int64
	err = tx.QueryRow(`SELECT status, owner, attempts, next_at, ready_at FROM webhook_deliveries WHERE id = ?`, id).Scan(&cur, &holder, &attempts, &next, &ready)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: delivery %s: %w", id, store.ErrNotFound), nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: delivery %s: %w", id, err)
	}
	if holder == "" || holder != owner { // a settled delivery holds no lease
		return fmt.Errorf("sqlite: delivery %s (%s) is not held by %s: %w", id, cur, owner, store.ErrConflict), nil
	}
	n := attempts + 1
	if _, err := tx.Exec(`INSERT INTO webhook_attempts (delivery_id, n, at, status, class, duration, answer, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		id, n, nanos(a.At), a.Status, a.Class, int64(a.Duration), a.Answer, a.Error); err != nil {
		return nil, fmt.Errorf("sqlite: record attempt %d of delivery %s: %w", n, id, err)
	}
	if status == store.DeliveryPending {
		next, ready = nanos(nextAt), nanos(nextAt)
	}
	if _, err := tx.Exec(`UPDATE webhook_deliveries SET status = ?, attempts = ?, last_error = ?, next_at = ?, ready_at = ?,
			first_attempt_at = CASE WHEN first_attempt_at = 0 THEN ? ELSE first_attempt_at END,
			updated_at = ?, owner = '', lease_until = 0
		WHERE id = ?`, status, n, a.Error, next, ready, nanos(a.At), nanos(a.At), id); err != nil {
		return nil, fmt.Errorf("sqlite: settle delivery %s: %w", id, err)
	}
	return nil, nil
}

// NextDeliveryDue implements store.WebhookStore.
func (s *Store) NextDeliveryDue(ctx context.Context) (time.Time, bool, error) {
	var at int64
	err := s.queryRow(ctx, nextDeliveryQuery).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("sqlite: next delivery: %w", err)
	}
	return fromNanos(at), true, nil
}

// listDeliveriesQuery reads the first page of a subscription's
// deliveries, newest (highest id) first, walking webhook_deliveries_sub
// backwards; listDeliveriesAfterQuery a page after a cursor (?3).
const (
	listDeliveriesQuery      = `SELECT ` + deliveryCols + ` FROM webhook_deliveries WHERE subscription_id = ?1 ORDER BY id DESC LIMIT ?2`
	listDeliveriesAfterQuery = `SELECT ` + deliveryCols + ` FROM webhook_deliveries WHERE subscription_id = ?1 AND id < ?3 ORDER BY id DESC LIMIT ?2`
)

// ListDeliveries implements store.WebhookStore.
func (s *Store) ListDeliveries(ctx context.Context, subscriptionID, after string, limit int) ([]store.Delivery, error) {
	if limit <= 0 {
		limit = -1
	}
	q, args := listDeliveriesQuery, []any{subscriptionID, limit}
	if after != "" {
		q, args = listDeliveriesAfterQuery, []any{subscriptionID, limit, after}
	}
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
	}
	defer rows.Close()
	out := []store.Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
	}
	return out, nil
}

// GetDelivery implements store.WebhookStore.
func (s *Store) GetDelivery(ctx context.Context, subscriptionID, id string) (store.Delivery, error) {
	d, err := scanDelivery(s.queryRow(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE id = ? AND subscription_id = ?`, id, subscriptionID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Delivery{}, fmt.Errorf("sqlite: delivery %s of subscription %s: %w", id, subscriptionID, store.ErrNotFound)
	}
	if err != nil {
		return store.Delivery{}, fmt.Errorf("sqlite: get delivery %s: %w", id, err)
	}
	return d, nil
}

// DeliveryAttempts implements store.WebhookStore.
func (s *Store) DeliveryAttempts(ctx context.Context, id string, after, limit int) ([]store.DeliveryAttempt, error) {
	var one int
	if err := s.queryRow(ctx, `SELECT 1 FROM webhook_deliveries WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: delivery %s: %w", id, store.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("sqlite: delivery %s: %w", id, err)
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.query(ctx, `SELECT n, at, status, class, duration, answer, error FROM webhook_attempts WHERE delivery_id = ? AND n > ? ORDER BY n LIMIT ?`, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: attempts of delivery %s: %w", id, err)
	}
	defer rows.Close()
	out := []store.DeliveryAttempt{}
	for rows.Next() {
		a := store.DeliveryAttempt{DeliveryID: id}
		var at, dur int64
		if err := rows.Scan(&a.N, &at, &a.Status, &a.Class, &dur, &a.Answer, &a.Error); err != nil {
			return nil, fmt.Errorf("sqlite: attempts of delivery %s: %w", id, err)
		}
		a.At, a.Duration = fromNanos(at), time.Duration(dur)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: attempts of delivery %s: %w", id, err)
	}
	return out, nil
}

// Redeliver implements store.WebhookStore.
func (s *Store) Redeliver(ctx context.Context, subscriptionID, id string, now time.Time) error {
	return s.write(ctx, func(tx wtx) error {
		res, err := tx.Exec(`UPDATE webhook_deliveries SET
				first_attempt_at = CASE WHEN status = 'pending' THEN first_attempt_at ELSE 0 END,
				retry_base = CASE WHEN status = 'pending' THEN retry_base ELSE attempts END,
				ready_at = CASE WHEN status = 'pending' AND owner != '' THEN ready_at ELSE ?1 END,
				status = 'pending', next_at = ?1, updated_at = ?1
			WHERE id = ?2 AND subscription_id = ?3`, nanos(now), id, subscriptionID)
		if err != nil {
			return fmt.Errorf("sqlite: redeliver %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("sqlite: delivery %s of subscription %s: %w", id, subscriptionID, store.ErrNotFound)
		}
		return nil
	})
}

// PendingDeliveries implements store.WebhookStore.
func (s *Store) PendingDeliveries(ctx context.Context) (int64, error) {
	var n int64
	if err := s.queryRow(ctx, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: pending deliveries: %w", err)
	}
	return n, nil
}

// settledBefore selects the ids of the first ?2 settled deliveries that
// settled before ?1, oldest first, walking webhook_deliveries_settled.
// pruneAttemptsQuery and pruneDeliveriesQuery delete them, the attempts
// first; in one transaction of the writer they select the same rows.
const settledBefore = `SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND updated_at < ?1 ORDER BY updated_at, id LIMIT ?2`

const (
	pruneAttemptsQuery   = `DELETE FROM webhook_attempts WHERE delivery_id IN (` + settledBefore + `)`
	pruneDeliveriesQuery = `DELETE FROM webhook_deliveries WHERE id IN (` + settledBefore + `)`
)

// PruneDeliveries implements store.WebhookStore, in one write of the
// writer.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := store.CheckPrune(limit); err != nil {
		return 0, err
	}
	var n int64
	err := s.write(ctx, func(tx wtx) error {
		if _, err := tx.Exec(pruneAttemptsQuery, nanos(before), limit); err != nil {
			return fmt.Errorf("sqlite: prune the attempts of settled deliveries: %w", err)
		}
		res, err := tx.Exec(pruneDeliveriesQuery, nanos(before), limit)
		if err != nil {
			return fmt.Errorf("sqlite: prune settled deliveries: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}
