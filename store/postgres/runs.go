package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

// errCASMissed marks a CreateRun or CommitRun whose first statement changed
// no row; the caller classifies it after the rollback.
var errCASMissed = errors.New("postgres: no row changed")

// utc returns a time read from a timestamptz column (which keeps
// microseconds) in UTC, as the other backends return times.
func utc(t time.Time) time.Time { return t.UTC() }

// milestones returns ms as a non-NULL text[] value.
func milestones(ms []string) []string {
	if ms == nil {
		return []string{}
	}
	return ms
}

// readMilestones normalises an empty array to nil, as the other backends do.
func readMilestones(ms []string) []string {
	if len(ms) == 0 {
		return nil
	}
	return ms
}

// dataText returns the JSON text stored for a snapshot's data ("{}" when empty).
func dataText(d json.RawMessage) string {
	if len(d) == 0 {
		return "{}"
	}
	return string(d)
}

// text makes free text storable: Postgres text cannot hold NUL bytes or
// invalid UTF-8, and a task's failure message (Snapshot.Error) may carry
// either from a command's output. Both become U+FFFD; other text is kept.
func text(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// patchText is a delta's patch as a json parameter (NULL for none).
func patchText(p json.RawMessage) *string {
	if p == nil {
		return nil
	}
	t := string(p)
	return &t
}

// offeredJSON encodes Event.Offered: "" for nil (not recorded).
func offeredJSON(a []string) string {
	if a == nil {
		return ""
	}
	b, _ := json.Marshal(a)
	return string(b)
}

// patchLen is what CommitRun adds to a run's patch_bytes for e: -1 when e
// must be kept whole whatever was kept before.
func patchLen(e *store.Event) int64 {
	if store.WholeDue(e, math.MinInt64/2) {
		return -1
	}
	return int64(len(e.Patch))
}

func checkCommit(c store.Commit) error {
	if c.Event.Seq != c.Run.Version || c.Event.RunID != c.Run.ID {
		return fmt.Errorf("postgres: event (%s, %d) does not match run (%s, %d)", c.Event.RunID, c.Event.Seq, c.Run.ID, c.Run.Version)
	}
	return nil
}

// queueRest queues the commit's event, task changes and notification.
// The runs row is written first (its patch_bytes says whether the event is
// kept whole: 0), so the event is inserted from it.
func queueRest(b *pgx.Batch, c store.Commit) {
	e := c.Event
	b.Queue(`INSERT INTO events (run_id, seq, time, kind, action, from_state, to_state, actor, state, status, error,
			data, milestones, patch, offered, workflow_version, reason)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
			CASE WHEN r.patch_bytes = 0 THEN $12::json END,
			CASE WHEN r.patch_bytes = 0 THEN $13::text[] ELSE $14::text[] END,
			CASE WHEN r.patch_bytes = 0 THEN NULL ELSE $15::json END,
			$16, $17, $18
		FROM runs r WHERE r.id = $1`,
		e.RunID, e.Seq, e.Time, e.Kind, e.Action, e.From, e.To, e.Actor, e.State, e.Status, text(e.Error),
		dataText(e.Data), milestones(e.Milestones), milestones(e.Added), patchText(e.Patch),
		offeredJSON(e.Offered), e.WorkflowVersion, text(e.Reason))
	if c.Complete != "" {
		b.Queue(`UPDATE tasks SET status = 'done', owner = '', lease_until = NULL, updated_at = $1 WHERE id = $2 AND status <> 'done'`,
			e.Time, c.Complete)
	}
	if t := c.Enqueue; t != nil {
		b.Queue(`INSERT INTO tasks (id, run_id, state, version, attempts, status, owner, lease_until, created_at, updated_at, attempt, not_before, ready_at)
			VALUES ($1, $2, $3, $4, 0, 'pending', '', NULL, $5, $6, $7, $8, $9)`,
			t.ID, t.RunID, t.State, t.Version, t.CreatedAt, t.UpdatedAt, max(t.Attempt, 1), optTime(t.NotBefore), store.TaskReadyAt(t))
	}
	b.Queue(`SELECT pg_notify($1, $2)`, Channel, c.Run.ID+":"+strconv.FormatInt(c.Run.Version, 10))
}

// runBatch sends b in tx: the first statement must change one row (else
// errCASMissed), the others must succeed.
func runBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch) error {
	br := tx.SendBatch(ctx, b)
	tag, err := br.Exec()
	if err != nil {
		br.Close()
		return err
	}
	if tag.RowsAffected() == 0 {
		br.Close()
		return errCASMissed
	}
	for i := 1; i < b.Len(); i++ {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	return br.Close()
}

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, c store.Commit) error {
	if err := checkCommit(c); err != nil {
		return err
	}
	if c.Run.Version != 1 {
		return fmt.Errorf("postgres: a new run must have version 1, not %d", c.Run.Version)
	}
	if err := store.PrepareTimers(&c, true); err != nil {
		return err
	}
	if err := store.PrepareOutbox(&c); err != nil {
		return err
	}
	r := c.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO runs (id, workflow_id, state, status, data, milestones, error, version, created_at, updated_at, workflow_version)
			VALUES ($1, $2, $3, $4, $5::json, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.WorkflowID, r.State, r.Status, dataText(r.Data), milestones(r.Milestones), text(r.Error), r.Version, r.CreatedAt, r.UpdatedAt, r.WorkflowVersion)
		queueRest(b, c)
		queueTimers(b, &c, true)
		queueOutbox(b, &c)
		return runBatch(ctx, tx, b)
	})
	switch {
	case errors.Is(err, errCASMissed):
		return fmt.Errorf("postgres: run %s: %w", r.ID, store.ErrExists)
	case err != nil:
		return fmt.Errorf("postgres: create run %s: %w", r.ID, err)
	}
	return nil
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Run{}, fmt.Errorf("postgres: run %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("postgres: get run %s: %w", id, err)
	}
	return r, nil
}

const runCols = `id, workflow_id, state, status, data, milestones, error, version, created_at, updated_at, workflow_version`

// scanRun reads one row of runCols.
func scanRun(row pgx.Row) (store.Run, error) {
	var r store.Run
	var data []byte
	var ms []string
	if err := row.Scan(&r.ID, &r.WorkflowID, &r.State, &r.Status, &data, &ms, &r.Error, &r.Version, &r.CreatedAt, &r.UpdatedAt, &r.WorkflowVersion); err != nil {
		return store.Run{}, err
	}
	r.Data = json.RawMessage(data)
	r.Milestones = readMilestones(ms)
	r.CreatedAt, r.UpdatedAt = utc(r.CreatedAt), utc(r.UpdatedAt)
	return r, nil
}

// Events implements store.RunStore. It reads from the last whole event at
// or before after+1 (index events_whole), folding the deltas up to the
// page (store.EventFold).
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	var lim any // NULL: no limit
	var from *int64
	if err := s.pool.QueryRow(ctx, `SELECT MAX(seq) FROM events WHERE run_id = $1 AND seq <= $2 AND data IS NOT NULL`, runID, max(after, 0)+1).Scan(&from); err != nil {
		return nil, fmt.Errorf("postgres: events of %s: %w", runID, err)
	}
	out := []store.Event{}
	if from != nil {
		if limit > 0 {
			lim = after - *from + 1 + int64(limit)
		}
		rows, err := s.pool.Query(ctx, `SELECT seq, time, kind, action, from_state, to_state, actor, state, status, data, milestones, error, patch, offered, workflow_version, reason
			FROM events WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, runID, *from, lim)
		if err != nil {
			return nil, fmt.Errorf("postgres: events of %s: %w", runID, err)
		}
		fold := store.NewEventFold(after, limit)
		var data, patch []byte
		var ms []string
		var offered string
		e := store.Event{RunID: runID}
		var ferr error
		for rows.Next() {
			if err := rows.Scan(&e.Seq, &e.Time, &e.Kind, &e.Action, &e.From, &e.To, &e.Actor, &e.State, &e.Status, &data, &ms, &e.Error, &patch, &offered, &e.WorkflowVersion, &e.Reason); err != nil {
				ferr = err
				break
			}
			ev := e
			ev.Time = utc(e.Time)
			if data != nil {
				ev.Data, ev.Milestones = json.RawMessage(data), readMilestones(ms)
			} else {
				ev.Patch, ev.Added = json.RawMessage(patch), readMilestones(ms)
			}
			if offered != "" {
				ev.Offered = []string{}
				if err := json.Unmarshal([]byte(offered), &ev.Offered); err != nil {
					ferr = fmt.Errorf("bad offered actions %q: %w", offered, err)
					break
				}
			}
			data, patch, ms = nil, nil, nil // never share buffers between events
			more, err := fold.Add(ev)
			if err != nil {
				ferr = err
				break
			}
			if !more {
				break
			}
		}
		rows.Close()
		if ferr == nil {
			ferr = rows.Err()
		}
		if ferr != nil {
			return nil, fmt.Errorf("postgres: events of %s: %w", runID, ferr)
		}
		out = fold.Events()
	}
	if len(out) == 0 {
		var one int
		err := s.pool.QueryRow(ctx, `SELECT 1 FROM runs WHERE id = $1`, runID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("postgres: run %s: %w", runID, store.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("postgres: events of %s: %w", runID, err)
		}
	}
	return out, nil
}

// StaleRuns implements store.RunStore.
func (s *Store) StaleRuns(ctx context.Context, before time.Time, after store.RunCursor, limit int) ([]store.Run, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	var afterAt *time.Time
	if !after.UpdatedAt.IsZero() || after.ID != "" {
		afterAt = &after.UpdatedAt
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runCols+` FROM runs
		WHERE updated_at < $1 AND ($2::timestamptz IS NULL OR (updated_at, id) > ($2, $3))
		ORDER BY updated_at, id LIMIT $4`, before, afterAt, after.ID, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: stale runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: stale runs: %w", err)
	}
	return out, nil
}

// DeleteRun implements store.RunStore. The run's events, tasks and timers go with it
// (ON DELETE CASCADE).
func (s *Store) DeleteRun(ctx context.Context, id string, version int64) error {
	var deleted bool
	var v *int64
	err := s.pool.QueryRow(ctx, `WITH d AS (DELETE FROM runs WHERE id = $1 AND version = $2 RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM d), (SELECT version FROM runs WHERE id = $1)`, id, version).Scan(&deleted, &v)
	switch {
	case err != nil:
		return fmt.Errorf("postgres: delete run %s: %w", id, err)
	case deleted:
		return nil
	case v == nil:
		return fmt.Errorf("postgres: run %s: %w", id, store.ErrNotFound)
	}
	return fmt.Errorf("postgres: run %s at version %d, expected %d: %w", id, *v, version, store.ErrConflict)
}

// CountRuns implements store.RunStore: it sums the shards of the counts
// the triggers of table runs keep (migration 0004), never the runs.
func (s *Store) CountRuns(ctx context.Context) ([]store.RunCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT workflow_id, status, SUM(n)::bigint FROM run_counts
		GROUP BY workflow_id, status HAVING SUM(n) != 0 ORDER BY workflow_id COLLATE "C", status COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("postgres: count runs: %w", err)
	}
	out := []store.RunCount{}
	var c store.RunCount
	if _, err := pgx.ForEachRow(rows, []any{&c.WorkflowID, &c.Status, &c.N}, func() error {
		out = append(out, c)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: count runs: %w", err)
	}
	return out, nil
}

// claimTaskQuery is ClaimTask's statement ($1 now, $2 owner, $3 the
// lease's end, $4 the workflows or NULL).
const claimTaskQuery = `WITH c AS (
			SELECT tasks.id FROM tasks
			WHERE tasks.status <> 'done' AND tasks.ready_at <= $1 -- the tasks_ready index
			  AND (tasks.status = 'pending' OR tasks.lease_until < $1) -- a lease ending now is not over
			  AND ($4::text[] IS NULL OR EXISTS (SELECT 1 FROM runs r WHERE r.id = tasks.run_id AND r.workflow_id = ANY($4::text[])))
			ORDER BY tasks.ready_at, tasks.id
			LIMIT 1
			FOR UPDATE OF tasks SKIP LOCKED
		)
		UPDATE tasks t SET status = 'running', owner = $2, lease_until = $3, ready_at = $3, attempts = t.attempts + 1, updated_at = $1
		FROM c WHERE t.id = c.id
		RETURNING t.id, t.run_id, t.state, t.version, t.attempts, t.status, t.owner, t.lease_until, t.created_at, t.updated_at, t.attempt, t.not_before`

// ClaimTask implements store.TaskStore. One statement picks the first
// claimable task of tasks_ready (ready_at <= now: it reads no task waiting
// out a backoff or a live lease) with FOR UPDATE SKIP LOCKED and marks it
// running, so
// concurrent claimers (in any process) skip each other's rows; a row whose
// claim committed meanwhile is re-checked against the WHERE clause and
// skipped.
func (s *Store) ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration, workflows []string) (store.Task, bool, error) {
	var t store.Task
	var leaseUntil, notBefore *time.Time
	err := s.pool.QueryRow(ctx, claimTaskQuery,
		now, owner, now.Add(lease), workflows).
		Scan(&t.ID, &t.RunID, &t.State, &t.Version, &t.Attempts, &t.Status, &t.Owner, &leaseUntil, &t.CreatedAt, &t.UpdatedAt, &t.Attempt, &notBefore)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Task{}, false, nil
	}
	if err != nil {
		return store.Task{}, false, fmt.Errorf("postgres: claim task: %w", err)
	}
	if leaseUntil != nil {
		t.LeaseUntil = utc(*leaseUntil)
	}
	if notBefore != nil {
		t.NotBefore = utc(*notBefore)
	}
	t.CreatedAt, t.UpdatedAt = utc(t.CreatedAt), utc(t.UpdatedAt)
	return t, true, nil
}

// ownedUpdate runs an UPDATE of one task held by owner; when it changes
// nothing the task is unknown (ErrNotFound) or not owner's (ErrConflict).
func (s *Store) ownedUpdate(ctx context.Context, id, owner, query string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("postgres: task %s: %w", id, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var one int
	err = s.pool.QueryRow(ctx, `SELECT 1 FROM tasks WHERE id = $1`, id).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("postgres: task %s: %w", id, store.ErrNotFound)
	case err != nil:
		return fmt.Errorf("postgres: task %s: %w", id, err)
	}
	return fmt.Errorf("postgres: task %s is not held by %s: %w", id, owner, store.ErrConflict)
}

// ExtendTask implements store.TaskStore.
func (s *Store) ExtendTask(ctx context.Context, id, owner string, until time.Time) error {
	return s.ownedUpdate(ctx, id, owner, `UPDATE tasks SET lease_until = $1, ready_at = $1 WHERE id = $2 AND owner = $3 AND status = 'running'`, until, id, owner)
}

// ReleaseTask implements store.TaskStore.
func (s *Store) ReleaseTask(ctx context.Context, id, owner string) error {
	return s.ownedUpdate(ctx, id, owner, `UPDATE tasks SET status = 'pending', owner = '', lease_until = NULL, ready_at = '-infinity' WHERE id = $1 AND owner = $2 AND status = 'running'`, id, owner)
}

// FinishTask implements store.TaskStore.
func (s *Store) FinishTask(ctx context.Context, id string) error {
	// One statement: the CTE's UPDATE runs whether or not it is read, and
	// the SELECT sees the row as it was before it.
	var found bool
	err := s.pool.QueryRow(ctx, `WITH u AS (
			UPDATE tasks SET status = 'done', owner = '', lease_until = NULL, updated_at = now()
			WHERE id = $1 AND status <> 'done'
		)
		SELECT EXISTS (SELECT 1 FROM tasks WHERE id = $1)`, id).Scan(&found)
	if err != nil {
		return fmt.Errorf("postgres: finish task %s: %w", id, err)
	}
	if !found {
		return fmt.Errorf("postgres: task %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// PendingTasks implements store.TaskStore.
func (s *Store) PendingTasks(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE status <> 'done'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: pending tasks: %w", err)
	}
	return n, nil
}
