package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

// queueTimers queues c's timer changes (after store.PrepareTimers) in the
// commit's batch: the named timers done, then, when c enters a state (or
// creates the run), the run's timers replaced by c's, in one insert.
func queueTimers(b *pgx.Batch, c *store.Commit, create bool) {
	if len(c.DoneTimers) > 0 {
		b.Queue(`DELETE FROM timers WHERE id = ANY($1::text[])`, c.DoneTimers)
	}
	if !c.ReplaceTimers && !create {
		return
	}
	if !create { // a new run has none
		b.Queue(`DELETE FROM timers WHERE run_id = $1`, c.Run.ID)
	}
	if len(c.Timers) == 0 {
		return
	}
	n := len(c.Timers)
	ids, actions, data := make([]string, n), make([]string, n), make([]string, n)
	due := make([]time.Time, n)
	for i, t := range c.Timers {
		ids[i], actions[i], data[i], due[i] = t.ID, t.Action, string(t.Data), t.DueAt
	}
	b.Queue(`INSERT INTO timers (id, run_id, workflow_id, state, version, action, due_at, ready_at, data)
		SELECT u.id, $1, $2, $3, $4, u.action, u.due_at, u.due_at, u.data::json
		FROM unnest($5::text[], $6::text[], $7::timestamptz[], $8::text[]) AS u(id, action, due_at, data)`,
		c.Run.ID, c.Run.WorkflowID, c.Run.State, c.Run.Version, ids, actions, due, data)
}

const timerCols = `id, run_id, workflow_id, state, version, action, due_at, data, owner, lease_until`

// scanTimer reads one row of timerCols.
func scanTimer(row pgx.Row) (store.Timer, error) {
	var t store.Timer
	var data []byte
	var lease *time.Time
	if err := row.Scan(&t.ID, &t.RunID, &t.WorkflowID, &t.State, &t.Version, &t.Action, &t.DueAt, &data, &t.Owner, &lease); err != nil {
		return store.Timer{}, err
	}
	t.DueAt, t.Data = utc(t.DueAt), json.RawMessage(data)
	if lease != nil {
		t.LeaseUntil = utc(*lease)
	}
	return t, nil
}

// claimTimersQuery leases the first claimable timers of timers_ready
// (ready_at <= now: due and not under a lease). FOR UPDATE SKIP LOCKED
// lets concurrent claimers (in any process) pass each other's rows
// instead of waiting; a row whose claim committed meanwhile is re-checked
// against ready_at, now the end of its lease, and skipped.
const claimTimersQuery = `WITH c AS (
		SELECT id FROM timers WHERE ready_at <= $1 ORDER BY ready_at, id LIMIT $2
		FOR UPDATE SKIP LOCKED
	)
	UPDATE timers t SET owner = $3, lease_until = $4, ready_at = $4
	FROM c WHERE t.id = c.id
	RETURNING t.id, t.run_id, t.workflow_id, t.state, t.version, t.action, t.due_at, t.data, t.owner, t.lease_until`

// claimTimersWithRunsQuery is claimTimersQuery that also reads each
// claimed timer's run (runCols, NULL when the run is gone), in the same
// statement.
const claimTimersWithRunsQuery = `WITH c AS (
		SELECT id FROM timers WHERE ready_at <= $1 ORDER BY ready_at, id LIMIT $2
		FOR UPDATE SKIP LOCKED
	), t AS (
		UPDATE timers t SET owner = $3, lease_until = $4, ready_at = $4
		FROM c WHERE t.id = c.id
		RETURNING t.id, t.run_id, t.workflow_id, t.state, t.version, t.action, t.due_at, t.data, t.owner, t.lease_until
	)
	SELECT t.id, t.run_id, t.workflow_id, t.state, t.version, t.action, t.due_at, t.data, t.owner, t.lease_until,
		r.id, r.workflow_id, r.state, r.status, r.data, r.milestones, r.error, r.version, r.created_at, r.updated_at, r.workflow_version
	FROM t LEFT JOIN runs r ON r.id = t.run_id`

// nextTimerQuery reads the first entry of timers_ready.
const nextTimerQuery = `SELECT ready_at FROM timers ORDER BY ready_at LIMIT 1`

// ClaimDueTimers implements store.TimerStore.
func (s *Store) ClaimDueTimers(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Timer, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("postgres: claim timers: limit %d, want > 0", limit)
	}
	if !leaseUntil.After(now) {
		return nil, fmt.Errorf("postgres: claim timers: the lease ends (%s) at or before now (%s)", leaseUntil.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	rows, err := s.pool.Query(ctx, claimTimersQuery, now, limit, owner, leaseUntil)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim timers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Timer, error) { return scanTimer(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: claim timers: %w", err)
	}
	if out == nil {
		out = []store.Timer{}
	}
	store.SortTimers(out)
	return out, nil
}

// ClaimDueTimersWithRuns implements engine.TimerRunsClaimer: ClaimDueTimers
// that reads the claimed timers' runs in the same statement, so that the
// timer loop fires a batch without one read of a run per timer.
func (s *Store) ClaimDueTimersWithRuns(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Timer, []store.Run, error) {
	if limit <= 0 {
		return nil, nil, fmt.Errorf("postgres: claim timers: limit %d, want > 0", limit)
	}
	if !leaseUntil.After(now) {
		return nil, nil, fmt.Errorf("postgres: claim timers: the lease ends (%s) at or before now (%s)", leaseUntil.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	rows, err := s.pool.Query(ctx, claimTimersWithRunsQuery, now, limit, owner, leaseUntil)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: claim timers: %w", err)
	}
	type claimed struct {
		t store.Timer
		r store.Run
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var c claimed
		var data, runData []byte
		var lease *time.Time
		var id, wf, state, status, errText, wfVersion *string
		var version *int64
		var created, updated *time.Time
		var ms []string
		if err := row.Scan(&c.t.ID, &c.t.RunID, &c.t.WorkflowID, &c.t.State, &c.t.Version, &c.t.Action, &c.t.DueAt, &data, &c.t.Owner, &lease,
			&id, &wf, &state, &status, &runData, &ms, &errText, &version, &created, &updated, &wfVersion); err != nil {
			return claimed{}, err
		}
		c.t.DueAt, c.t.Data = utc(c.t.DueAt), json.RawMessage(data)
		if lease != nil {
			c.t.LeaseUntil = utc(*lease)
		}
		if id != nil { // else the run is gone: a zero Run
			c.r = store.Run{ID: *id, WorkflowID: *wf, Version: *version, CreatedAt: utc(*created), UpdatedAt: utc(*updated), WorkflowVersion: *wfVersion}
			c.r.State, c.r.Status, c.r.Error = *state, *status, *errText
			c.r.Data, c.r.Milestones = json.RawMessage(runData), readMilestones(ms)
		}
		return c, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: claim timers: %w", err)
	}
	slices.SortFunc(out, func(a, b claimed) int { // as store.SortTimers
		if c := a.t.DueAt.Compare(b.t.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.t.ID, b.t.ID)
	})
	ts, runs := make([]store.Timer, len(out)), make([]store.Run, len(out))
	for i := range out {
		ts[i], runs[i] = out[i].t, out[i].r
	}
	return ts, runs, nil
}

// NextTimerDue implements store.TimerStore.
func (s *Store) NextTimerDue(ctx context.Context) (time.Time, bool, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, nextTimerQuery).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("postgres: next timer: %w", err)
	}
	return utc(at), true, nil
}

// ReleaseTimer implements store.TimerStore.
func (s *Store) ReleaseTimer(ctx context.Context, id, owner string) error {
	var released bool
	var exists bool
	err := s.pool.QueryRow(ctx, `WITH r AS (
			UPDATE timers SET owner = '', lease_until = NULL, ready_at = due_at WHERE id = $1 AND owner = $2 AND owner <> '' RETURNING 1
		)
		SELECT EXISTS (SELECT 1 FROM r), EXISTS (SELECT 1 FROM timers WHERE id = $1)`, id, owner).Scan(&released, &exists)
	switch {
	case err != nil:
		return fmt.Errorf("postgres: release timer %s: %w", id, err)
	case released:
		return nil
	case !exists:
		return fmt.Errorf("postgres: timer %s: %w", id, store.ErrNotFound)
	}
	return fmt.Errorf("postgres: timer %s is not held by %s: %w", id, owner, store.ErrConflict)
}

// CompleteTimer implements store.TimerStore.
func (s *Store) CompleteTimer(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM timers WHERE id = $1`, id); err != nil {
		return fmt.Errorf("postgres: complete timer %s: %w", id, err)
	}
	return nil
}

// RunTimers implements store.TimerStore.
func (s *Store) RunTimers(ctx context.Context, runID string) ([]store.Timer, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+timerCols+` FROM timers WHERE run_id = $1 ORDER BY due_at, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("postgres: run timers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Timer, error) { return scanTimer(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: run timers: %w", err)
	}
	if out == nil {
		out = []store.Timer{}
	}
	return out, nil
}
