package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

// outboxArgs returns the columns of c's deliveries (after
// store.PrepareOutbox) as arrays, for an insert from unnest.
func outboxArgs(c *store.Commit) []any {
	n := len(c.Outbox)
	ids, subs, msgs, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	bodies := make([][]byte, n)
	next, created := make([]time.Time, n), make([]time.Time, n)
	for i, d := range c.Outbox {
		ids[i], subs[i], msgs[i], types[i], bodies[i], next[i], created[i] = d.ID, d.SubscriptionID, d.MessageID, d.Type, []byte(d.Body), d.NextAt, d.CreatedAt
	}
	return []any{ids, subs, msgs, types, bodies, next, created}
}

// outboxInsert is the insert of a commit's deliveries from the arrays of
// outboxArgs, numbered from $%[1]d, for the run $%[2]d at seq $%[3]d; the
// join keeps only the deliveries whose subscription is stored (and takes
// the key lock that makes a concurrent deletion wait, or fail this
// statement: see migration 0012).
const outboxInsert = `INSERT INTO webhook_deliveries (id, subscription_id, message_id, run_id, seq, type, body, status,
		attempts, next_at, ready_at, owner, created_at, updated_at, last_error)
	SELECT o.id, o.sub, o.msg, $%[2]d, $%[3]d, o.type, o.body, 'pending', 0, o.next_at, o.next_at, '', o.created_at, o.created_at, ''
	FROM unnest($%[1]d::text[], $%[4]d::text[], $%[5]d::text[], $%[6]d::text[], $%[7]d::bytea[], $%[8]d::timestamptz[], $%[9]d::timestamptz[])
		AS o(id, sub, msg, type, body, next_at, created_at)
	JOIN webhook_subscriptions w ON w.id = o.sub`

// outboxSQL is outboxInsert with its arguments from $first on.
func outboxSQL(first, run, seq int) string {
	return fmt.Sprintf(outboxInsert, first, run, seq, first+1, first+2, first+3, first+4, first+5, first+6)
}

// queueOutbox queues c's deliveries in CreateRun's batch.
func queueOutbox(b *pgx.Batch, c *store.Commit) {
	if len(c.Outbox) == 0 {
		return
	}
	b.Queue(outboxSQL(3, 1, 2), append([]any{c.Run.ID, c.Run.Version}, outboxArgs(c)...)...)
}

const subscriptionCols = `id, url, events, workflow_id, states, secrets, disabled, disabled_reason, created_at, updated_at`

func scanSubscription(row pgx.Row) (store.Subscription, error) {
	var s store.Subscription
	var events, states []string
	var secrets []byte
	if err := row.Scan(&s.ID, &s.URL, &events, &s.WorkflowID, &states, &secrets, &s.Disabled, &s.DisabledReason, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return store.Subscription{}, err
	}
	s.Events, s.States = readMilestones(events), readMilestones(states)
	if secrets != nil {
		s.Secrets = json.RawMessage(secrets)
	}
	s.CreatedAt, s.UpdatedAt = utc(s.CreatedAt), utc(s.UpdatedAt)
	return s, nil
}

const deliveryCols = `id, subscription_id, message_id, run_id, seq, type, body, status, attempts, next_at, first_attempt_at,
	owner, lease_until, created_at, updated_at, last_error, retry_base`

func scanDelivery(row pgx.Row) (store.Delivery, error) {
	var d store.Delivery
	var body []byte
	var first, lease *time.Time
	if err := row.Scan(&d.ID, &d.SubscriptionID, &d.MessageID, &d.RunID, &d.Seq, &d.Type, &body, &d.Status, &d.Attempts, &d.NextAt, &first,
		&d.Owner, &lease, &d.CreatedAt, &d.UpdatedAt, &d.LastError, &d.RetryBase); err != nil {
		return store.Delivery{}, err
	}
	d.Body = json.RawMessage(body)
	d.NextAt, d.CreatedAt, d.UpdatedAt = utc(d.NextAt), utc(d.CreatedAt), utc(d.UpdatedAt)
	if first != nil {
		d.FirstAttemptAt = utc(*first)
	}
	if lease != nil {
		d.LeaseUntil = utc(*lease)
	}
	return d, nil
}

func collectDeliveries(rows pgx.Rows) ([]store.Delivery, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Delivery, error) { return scanDelivery(row) })
	if out == nil {
		out = []store.Delivery{}
	}
	return out, err
}

// PutSubscription implements store.WebhookStore.
func (s *Store) PutSubscription(ctx context.Context, sub store.Subscription) error {
	if err := store.CheckSubscription(sub); err != nil {
		return err
	}
	return putSubscription(ctx, s.pool, sub)
}

// putSubscription creates sub or replaces the row with its ID.
func putSubscription(ctx context.Context, db execer, sub store.Subscription) error {
	var secrets []byte
	if sub.Secrets != nil {
		secrets = []byte(sub.Secrets)
	}
	if _, err := db.Exec(ctx, `INSERT INTO webhook_subscriptions (`+subscriptionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, events = excluded.events, workflow_id = excluded.workflow_id,
			states = excluded.states, secrets = excluded.secrets, disabled = excluded.disabled,
			disabled_reason = excluded.disabled_reason, created_at = excluded.created_at, updated_at = excluded.updated_at`,
		sub.ID, text(sub.URL), milestones(sub.Events), text(sub.WorkflowID), milestones(sub.States), secrets, sub.Disabled, text(sub.DisabledReason),
		sub.CreatedAt, sub.UpdatedAt); err != nil {
		return fmt.Errorf("postgres: put subscription %s: %w", sub.ID, err)
	}
	return nil
}

// UpdateSubscription implements store.WebhookStore: the row is read FOR
// UPDATE and written in one transaction, so updates from every replica
// apply one after the other (a DELETE meanwhile makes it ErrNotFound).
func (s *Store) UpdateSubscription(ctx context.Context, id string, update func(*store.Subscription) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		sub, err := scanSubscription(tx.QueryRow(ctx, `SELECT `+subscriptionCols+` FROM webhook_subscriptions WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: subscription %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("postgres: get subscription %s: %w", id, err)
		}
		if err := store.ApplyUpdate(id, &sub, update); err != nil {
			return err
		}
		return putSubscription(ctx, tx, sub)
	})
}

// GetSubscription implements store.WebhookStore.
func (s *Store) GetSubscription(ctx context.Context, id string) (store.Subscription, error) {
	sub, err := scanSubscription(s.pool.QueryRow(ctx, `SELECT `+subscriptionCols+` FROM webhook_subscriptions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Subscription{}, fmt.Errorf("postgres: subscription %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Subscription{}, fmt.Errorf("postgres: get subscription %s: %w", id, err)
	}
	return sub, nil
}

// ListSubscriptions implements store.WebhookStore.
func (s *Store) ListSubscriptions(ctx context.Context, after string, limit int) ([]store.Subscription, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+subscriptionCols+` FROM webhook_subscriptions WHERE id > $1 ORDER BY id LIMIT $2`, after, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: list subscriptions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Subscription, error) { return scanSubscription(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list subscriptions: %w", err)
	}
	if out == nil {
		out = []store.Subscription{}
	}
	return out, nil
}

// DeleteSubscription implements store.WebhookStore: its deliveries and
// their attempts go by ON DELETE CASCADE.
func (s *Store) DeleteSubscription(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_subscriptions WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("postgres: delete subscription %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: subscription %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// claimable is the condition on a pending delivery d (walked in
// webhook_deliveries_ready) that makes it claimable once due: it is the
// head of its queue (the first entry of webhook_deliveries_queue for its
// subscription and run) and its subscription is enabled.
const claimable = `d.id = (SELECT q.id FROM webhook_deliveries q
			WHERE q.status = 'pending' AND q.subscription_id = d.subscription_id AND q.run_id = d.run_id
			ORDER BY q.seq, q.id LIMIT 1)
		AND EXISTS (SELECT 1 FROM webhook_subscriptions w WHERE w.id = d.subscription_id AND NOT w.disabled)`

// claimDeliveriesQuery leases the first claimable deliveries of
// webhook_deliveries_ready (ready_at <= now: due and not under a lease).
// FOR UPDATE SKIP LOCKED lets concurrent claimers (in any process) pass
// each other's rows instead of waiting; a row whose claim committed
// meanwhile is re-checked against ready_at, now the end of its lease, and
// skipped.
const claimDeliveriesQuery = `WITH c AS (
		SELECT d.id FROM webhook_deliveries d
		WHERE d.status = 'pending' AND d.ready_at <= $1 AND ` + claimable + `
		ORDER BY d.ready_at, d.id LIMIT $2
		FOR UPDATE OF d SKIP LOCKED
	)
	UPDATE webhook_deliveries t SET owner = $3, lease_until = $4, ready_at = $4
	FROM c WHERE t.id = c.id
	RETURNING t.id, t.subscription_id, t.message_id, t.run_id, t.seq, t.type, t.body, t.status, t.attempts, t.next_at, t.first_attempt_at,
		t.owner, t.lease_until, t.created_at, t.updated_at, t.last_error, t.retry_base`

// nextDeliveryQuery reads the first claimable entry of
// webhook_deliveries_ready, due or not.
const nextDeliveryQuery = `SELECT d.ready_at FROM webhook_deliveries d
	WHERE d.status = 'pending' AND ` + claimable + `
	ORDER BY d.ready_at, d.id LIMIT 1`

// ClaimDeliveries implements store.WebhookStore.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Delivery, error) {
	if err := store.CheckDeliveryClaim(now, limit, owner, leaseUntil); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, claimDeliveriesQuery, now, limit, owner, leaseUntil)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim deliveries: %w", err)
	}
	out, err := collectDeliveries(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim deliveries: %w", err)
	}
	store.SortDeliveries(out)
	return out, nil
}

// recordAttemptQuery appends an attempt and settles the delivery in one
// statement, if owner ($2) holds it: cur locks the row (waiting for a
// concurrent change and reading its result), ok is the attempt's number
// when the lease is owner's. It answers whether the delivery exists and
// the number (NULL: not held).
const recordAttemptQuery = `WITH cur AS (
		SELECT status, owner, attempts FROM webhook_deliveries WHERE id = $1 FOR UPDATE
	), ok AS (
		SELECT attempts + 1 AS n FROM cur WHERE owner = $2 AND owner <> '' -- a settled delivery holds no lease
	), a AS (
		INSERT INTO webhook_attempts (delivery_id, n, at, status, class, duration, answer, error)
		SELECT $1, ok.n, $3, $4, $5, $6, $7, $8 FROM ok
	), u AS (
		UPDATE webhook_deliveries d SET status = $9, attempts = ok.n, last_error = $8,
			next_at = CASE WHEN $9 = 'pending' THEN $10::timestamptz ELSE d.next_at END,
			ready_at = CASE WHEN $9 = 'pending' THEN $10::timestamptz ELSE d.ready_at END,
			first_attempt_at = COALESCE(d.first_attempt_at, $3), updated_at = $3, owner = '', lease_until = NULL
		FROM ok WHERE d.id = $1
	)
	SELECT EXISTS (SELECT 1 FROM cur), (SELECT n FROM ok)`

// RecordAttempts implements store.WebhookStore: recordAttemptQuery for
// each record, sent as one batch: one round trip, and one transaction
// (the statements of a batch run in the implicit transaction that ends
// at its single Sync: one fails, none is kept), the deliveries locked in the order of their ids (so that
// two batches never wait for each other in a cycle).
func (s *Store) RecordAttempts(ctx context.Context, owner string, rs []store.AttemptRecord) ([]error, error) {
	errs := make([]error, len(rs))
	order := make([]int, 0, len(rs))
	for i, r := range rs {
		if errs[i] = store.CheckAttempt(r.Status, r.NextAt); errs[i] == nil {
			order = append(order, i)
		}
	}
	if len(order) == 0 {
		return errs, nil
	}
	slices.SortStableFunc(order, func(i, j int) int { return strings.Compare(rs[i].ID, rs[j].ID) })
	b := &pgx.Batch{}
	for _, i := range order {
		r := &rs[i]
		a := &r.Attempt
		b.Queue(recordAttemptQuery, r.ID, owner, a.At, a.Status, text(a.Class), int64(a.Duration), text(a.Answer), text(a.Error),
			r.Status, optTime(r.NextAt))
	}
	br := s.pool.SendBatch(ctx, b)
	for _, i := range order {
		var exists bool
		var n *int
		if err := br.QueryRow().Scan(&exists, &n); err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("postgres: record attempt of delivery %s: %w", rs[i].ID, err)
		}
		switch {
		case !exists:
			errs[i] = fmt.Errorf("postgres: delivery %s: %w", rs[i].ID, store.ErrNotFound)
		case n == nil:
			errs[i] = fmt.Errorf("postgres: delivery %s is not held by %s: %w", rs[i].ID, owner, store.ErrConflict)
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("postgres: record attempts: %w", err)
	}
	return errs, nil
}

// NextDeliveryDue implements store.WebhookStore.
func (s *Store) NextDeliveryDue(ctx context.Context) (time.Time, bool, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, nextDeliveryQuery).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("postgres: next delivery: %w", err)
	}
	return utc(at), true, nil
}

// listDeliveriesQuery reads the first page of a subscription's
// deliveries, newest (highest id) first, walking webhook_deliveries_sub
// backwards; listDeliveriesAfterQuery a page after a cursor ($3).
const (
	listDeliveriesQuery      = `SELECT ` + deliveryCols + ` FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY id DESC LIMIT $2`
	listDeliveriesAfterQuery = `SELECT ` + deliveryCols + ` FROM webhook_deliveries WHERE subscription_id = $1 AND id < $3 ORDER BY id DESC LIMIT $2`
)

// ListDeliveries implements store.WebhookStore.
func (s *Store) ListDeliveries(ctx context.Context, subscriptionID, after string, limit int) ([]store.Delivery, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	q, args := listDeliveriesQuery, []any{subscriptionID, lim}
	if after != "" {
		q, args = listDeliveriesAfterQuery, append(args, after)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list deliveries: %w", err)
	}
	out, err := collectDeliveries(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: list deliveries: %w", err)
	}
	return out, nil
}

// GetDelivery implements store.WebhookStore.
func (s *Store) GetDelivery(ctx context.Context, subscriptionID, id string) (store.Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE id = $1 AND subscription_id = $2`, id, subscriptionID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Delivery{}, fmt.Errorf("postgres: delivery %s of subscription %s: %w", id, subscriptionID, store.ErrNotFound)
	}
	if err != nil {
		return store.Delivery{}, fmt.Errorf("postgres: get delivery %s: %w", id, err)
	}
	return d, nil
}

// DeliveryAttempts implements store.WebhookStore.
func (s *Store) DeliveryAttempts(ctx context.Context, id string, after, limit int) ([]store.DeliveryAttempt, error) {
	var lim *int // NULL: no limit
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT a.n, a.at, a.status, a.class, a.duration, a.answer, a.error
		FROM webhook_deliveries d LEFT JOIN webhook_attempts a ON a.delivery_id = d.id AND a.n > $2
		WHERE d.id = $1 ORDER BY a.n LIMIT $3`, id, after, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: attempts of delivery %s: %w", id, err)
	}
	found := false
	out := []store.DeliveryAttempt{}
	var n, status *int
	var at *time.Time
	var class, answer, msg *string
	var dur *int64
	if _, err := pgx.ForEachRow(rows, []any{&n, &at, &status, &class, &dur, &answer, &msg}, func() error {
		found = true
		if n != nil {
			out = append(out, store.DeliveryAttempt{DeliveryID: id, N: *n, At: utc(*at), Status: *status, Class: *class,
				Duration: time.Duration(*dur), Answer: *answer, Error: *msg})
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: attempts of delivery %s: %w", id, err)
	}
	if !found {
		return nil, fmt.Errorf("postgres: delivery %s: %w", id, store.ErrNotFound)
	}
	return out, nil
}

// Redeliver implements store.WebhookStore.
func (s *Store) Redeliver(ctx context.Context, subscriptionID, id string, now time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_deliveries SET
			first_attempt_at = CASE WHEN status = 'pending' THEN first_attempt_at END,
			retry_base = CASE WHEN status = 'pending' THEN retry_base ELSE attempts END,
			ready_at = CASE WHEN status = 'pending' AND owner <> '' THEN ready_at ELSE $1 END,
			status = 'pending', next_at = $1, updated_at = $1
		WHERE id = $2 AND subscription_id = $3`, now, id, subscriptionID)
	if err != nil {
		return fmt.Errorf("postgres: redeliver %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: delivery %s of subscription %s: %w", id, subscriptionID, store.ErrNotFound)
	}
	return nil
}

// PendingDeliveries implements store.WebhookStore.
func (s *Store) PendingDeliveries(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: pending deliveries: %w", err)
	}
	return n, nil
}

// pruneDeliveriesQuery deletes the first $2 settled deliveries that
// settled before $1, oldest first, walking webhook_deliveries_settled,
// and then each by its key (the array keeps the planner from joining the
// ids with a walk of the whole table); their attempts go by ON DELETE
// CASCADE, in the same statement. FOR UPDATE SKIP LOCKED passes over a
// row another transaction is changing (a redelivery, another replica's
// prune) instead of waiting for it; a row whose change committed
// meanwhile is checked again against the condition, so one redelivered
// (pending again) stays.
const pruneDeliveriesQuery = `DELETE FROM webhook_deliveries WHERE id = ANY (ARRAY (
		SELECT id FROM webhook_deliveries
		WHERE status <> 'pending' AND updated_at < $1
		ORDER BY updated_at, id LIMIT $2
		FOR UPDATE SKIP LOCKED
	))`

// PruneDeliveries implements store.WebhookStore, in one statement.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := store.CheckPrune(limit); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, pruneDeliveriesQuery, before, limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: prune settled deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
