package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// nanos returns t as stored: nanoseconds since 1970, 0 for the zero time.
// A time outside what an int64 holds (after 2262-04-11, before 1677-09-21:
// a retry's backoff of a century) is kept as the latest or earliest one
// instead of wrapping round, so a time far ahead stays ahead.
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.After(lastNano):
		return math.MaxInt64
	case t.Before(firstNano):
		return math.MinInt64
	}
	return t.UnixNano()
}

// lastNano and firstNano bound the times nanos keeps as they are.
var lastNano, firstNano = time.Unix(0, math.MaxInt64), time.Unix(0, math.MinInt64)

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func milestonesJSON(ms []string) string {
	if len(ms) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(ms)
	return string(b)
}

func parseMilestones(s string) ([]string, error) {
	if s == "" || s == "[]" {
		return nil, nil
	}
	var ms []string
	if err := json.Unmarshal([]byte(s), &ms); err != nil {
		return nil, fmt.Errorf("sqlite: bad milestones %q: %w", s, err)
	}
	return ms, nil
}

func dataText(d json.RawMessage) string {
	if len(d) == 0 {
		return "{}"
	}
	return string(d)
}

func checkCommit(c store.Commit) error {
	if c.Event.Seq != c.Run.Version || c.Event.RunID != c.Run.ID {
		return fmt.Errorf("sqlite: event (%s, %d) does not match run (%s, %d)", c.Event.RunID, c.Event.Seq, c.Run.ID, c.Run.Version)
	}
	return nil
}

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, c store.Commit) error {
	if err := checkCommit(c); err != nil {
		return err
	}
	if c.Run.Version != 1 {
		return fmt.Errorf("sqlite: a new run must have version 1, not %d", c.Run.Version)
	}
	if err := store.PrepareTimers(&c, true); err != nil {
		return err
	}
	if err := store.PrepareOutbox(&c); err != nil {
		return err
	}
	return s.queue(ctx, func(tx wtx) error {
		r := c.Run
		res, err := tx.Exec(`INSERT INTO runs (id, workflow_id, state, status, data, milestones, error, version, created_at, updated_at, workflow_version)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.WorkflowID, r.State, r.Status, dataText(r.Data), milestonesJSON(r.Milestones), r.Error, r.Version, nanos(r.CreatedAt), nanos(r.UpdatedAt), r.WorkflowVersion)
		if err != nil {
			return fmt.Errorf("sqlite: insert run: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("sqlite: run %s: %w", r.ID, store.ErrExists)
		}
		if err := s.applyRest(tx, c, 0); err != nil {
			return err
		}
		if err := applyTimers(tx, &c, true); err != nil {
			return err
		}
		return applyOutbox(tx, &c)
	}, s.runs.hook(c.Run.ID, &c.Run)).Wait()
}

// applyRest writes the commit's event and task changes. patchBytes is the
// run's patch_bytes once its row is written: 0 keeps the event whole.
func (s *Store) applyRest(tx wtx, c store.Commit, patchBytes int64) error {
	e := c.Event
	data, ms, patch := dataText(e.Data), milestonesJSON(e.Milestones), ""
	if patchBytes != 0 {
		data, ms, patch = "", milestonesJSON(e.Added), string(e.Patch)
	}
	if _, err := tx.Exec(`INSERT INTO events (run_id, seq, time, kind, action, from_state, to_state, actor, state, status, error,
			data, milestones, patch, offered, workflow_version, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.RunID, e.Seq, nanos(e.Time), e.Kind, e.Action, e.From, e.To, e.Actor, e.State, e.Status, e.Error,
		data, ms, patch, offeredJSON(e.Offered), e.WorkflowVersion, e.Reason); err != nil {
		return fmt.Errorf("sqlite: insert event: %w", err)
	}
	if c.Complete != "" {
		if _, err := tx.Exec(`UPDATE tasks SET status = 'done', owner = '', updated_at = ? WHERE id = ? AND status != 'done'`, nanos(e.Time), c.Complete); err != nil {
			return fmt.Errorf("sqlite: complete task: %w", err)
		}
	}
	if t := c.Enqueue; t != nil {
		if _, err := tx.Exec(`INSERT INTO tasks (id, run_id, state, version, attempts, status, owner, lease_until, created_at, updated_at, attempt, not_before, ready_at)
			VALUES (?, ?, ?, ?, 0, 'pending', '', 0, ?, ?, ?, ?, ?)`,
			t.ID, t.RunID, t.State, t.Version, nanos(t.CreatedAt), nanos(t.UpdatedAt), max(t.Attempt, 1), nanos(t.NotBefore), nanos(store.TaskReadyAt(t))); err != nil {
			return fmt.Errorf("sqlite: enqueue task: %w", err)
		}
	}
	return nil
}

// offeredJSON encodes Event.Offered: "" for nil (not recorded).
func offeredJSON(a []string) string {
	if a == nil {
		return ""
	}
	b, _ := json.Marshal(a)
	return string(b)
}

func parseOffered(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	a := []string{}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return nil, fmt.Errorf("sqlite: bad offered actions %q: %w", s, err)
	}
	return a, nil
}

// patchLen is what CommitRun adds to a run's patch_bytes for e: -1 when e
// must be kept whole whatever was kept before.
func patchLen(e *store.Event) int64 {
	if store.WholeDue(e, math.MinInt64/2) {
		return -1
	}
	return int64(len(e.Patch))
}

const runCols = `id, workflow_id, state, status, data, milestones, error, version, created_at, updated_at, workflow_version`

// scanRun reads one row of runCols.
func scanRun(sc scanner) (store.Run, error) {
	var r store.Run
	var data, ms string
	var created, updated int64
	if err := sc.Scan(&r.ID, &r.WorkflowID, &r.State, &r.Status, &data, &ms, &r.Error, &r.Version, &created, &updated, &r.WorkflowVersion); err != nil {
		return store.Run{}, err
	}
	r.Data = json.RawMessage(data)
	var err error
	if r.Milestones, err = parseMilestones(ms); err != nil {
		return store.Run{}, err
	}
	r.CreatedAt, r.UpdatedAt = fromNanos(created), fromNanos(updated)
	return r, nil
}

// rowidScanner reads a row's rowid, then the columns scanRun reads.
type rowidScanner struct {
	sc    scanner
	rowid *int64
}

func (r rowidScanner) Scan(dest ...any) error {
	return r.sc.Scan(append([]any{r.rowid}, dest...)...)
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	r, ok, gen := s.runs.get(id)
	if ok {
		return r, nil
	}
	var rowid int64
	r, err := scanRun(rowidScanner{s.queryRow(ctx, `SELECT rowid, `+runCols+` FROM runs WHERE id = ?`, id), &rowid})
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, fmt.Errorf("sqlite: run %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("sqlite: get run: %w", err)
	}
	s.runs.fill(r, rowid, gen)
	return r, nil
}

// StaleRuns implements store.RunStore.
func (s *Store) StaleRuns(ctx context.Context, before time.Time, after store.RunCursor, limit int) ([]store.Run, error) {
	if limit <= 0 {
		limit = -1
	}
	afterNanos := int64(math.MinInt64)
	if !after.UpdatedAt.IsZero() || after.ID != "" {
		afterNanos = nanos(after.UpdatedAt)
	}
	rows, err := s.query(ctx, `SELECT `+runCols+` FROM runs
		WHERE updated_at < ? AND (updated_at > ? OR (updated_at = ? AND id > ?))
		ORDER BY updated_at, id LIMIT ?`, nanos(before), afterNanos, afterNanos, after.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: stale runs: %w", err)
	}
	defer rows.Close()
	out := []store.Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: stale runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: stale runs: %w", err)
	}
	return out, nil
}

// DeleteRun implements store.RunStore.
func (s *Store) DeleteRun(ctx context.Context, id string, version int64) error {
	return s.queue(ctx, func(tx wtx) error {
		res, err := tx.Exec(`DELETE FROM runs WHERE id = ? AND version = ?`, id, version)
		if err != nil {
			return fmt.Errorf("sqlite: delete run %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var v int64
			err := tx.QueryRow(`SELECT version FROM runs WHERE id = ?`, id).Scan(&v)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite: run %s: %w", id, store.ErrNotFound)
			}
			return fmt.Errorf("sqlite: run %s at version %d, expected %d: %w", id, v, version, store.ErrConflict)
		}
		if _, err := tx.Exec(`DELETE FROM events WHERE run_id = ?`, id); err != nil {
			return fmt.Errorf("sqlite: delete run %s's events: %w", id, err)
		}
		if _, err := tx.Exec(`DELETE FROM tasks WHERE run_id = ?`, id); err != nil {
			return fmt.Errorf("sqlite: delete run %s's tasks: %w", id, err)
		}
		if _, err := tx.Exec(voidTimersQuery, runTimersArgs(id)...); err != nil {
			return fmt.Errorf("sqlite: delete run %s's timers: %w", id, err)
		}
		return nil
	}, s.runs.hook(id, nil)).Wait()
}

// CommitRun implements store.RunStore. It queues the commit for the writer
// and returns; the Pending settles once the group holding the commit is
// durable (one fsync for the group). Commits queued one after the other are
// applied in that order, so a caller may queue a run's next commit
// (expecting the version this one creates) before this one is durable: if
// this one fails, the next fails with store.ErrConflict.
func (s *Store) CommitRun(ctx context.Context, expected int64, c store.Commit) store.Pending {
	if err := checkCommit(c); err != nil {
		return store.Settled(err)
	}
	if c.Run.Version != expected+1 {
		return store.Settled(fmt.Errorf("sqlite: new version %d is not expected+1 (%d)", c.Run.Version, expected+1))
	}
	if err := store.PrepareTimers(&c, false); err != nil {
		return store.Settled(err)
	}
	if err := store.PrepareOutbox(&c); err != nil {
		return store.Settled(err)
	}
	return s.queue(ctx, func(tx wtx) error {
		r := c.Run
		args := []any{r.State, r.Status, dataText(r.Data), milestonesJSON(r.Milestones), r.Error, r.Version, nanos(r.UpdatedAt), r.ID, expected,
			patchLen(&c.Event), store.WholeBound(len(c.Event.Data)), r.WorkflowVersion}
		// Most commits keep the run's workflow version, and their run was
		// just read (kept with its rowid): updateRunAt finds the row by
		// rowid, not through the id index, and leaves workflow_version
		// (and its index) alone. A commit that changes the version, or
		// of a run not kept, takes updateRun.
		var patchBytes int64
		err := sql.ErrNoRows
		if rowid := s.runs.rowid(r.ID); rowid != 0 {
			err = tx.QueryRow(updateRunAt, append(args, rowid)...).Scan(&patchBytes)
		}
		if errors.Is(err, sql.ErrNoRows) {
			err = tx.QueryRow(updateRun, args...).Scan(&patchBytes)
		}
		if errors.Is(err, sql.ErrNoRows) {
			var v int64
			err := tx.QueryRow(`SELECT version FROM runs WHERE id = ?`, r.ID).Scan(&v)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite: run %s: %w", r.ID, store.ErrNotFound)
			}
			return fmt.Errorf("sqlite: run %s at version %d, expected %d: %w", r.ID, v, expected, store.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("sqlite: update run: %w", err)
		}
		if err := s.applyRest(tx, c, patchBytes); err != nil {
			return err
		}
		if err := applyTimers(tx, &c, false); err != nil {
			return err
		}
		return applyOutbox(tx, &c)
	}, s.runs.hook(c.Run.ID, &c.Run))
}

// updateRunAt writes a commit's run in the row of rowid ?13 when it is
// still the run's (id ?8) at the version expected (?9) with the same
// workflow version (?12), and returns the run's new patch_bytes (whether
// the commit's event is kept whole: 0). SQLite rewrites the entries of
// the runs table's indexes that hold a column set here, whatever the
// value: leaving workflow_version out keeps runs_workflow_version (the
// deepest of them) out of every ordinary transition.
const updateRunAt = `UPDATE runs SET state = ?1, status = ?2, data = ?3, milestones = ?4, error = ?5, version = ?6, updated_at = ?7,
	patch_bytes = CASE WHEN ?10 < 0 OR patch_bytes + ?10 > ?11 THEN 0 ELSE patch_bytes + ?10 END
	WHERE rowid = ?13 AND id = ?8 AND version = ?9 AND workflow_version = ?12 RETURNING patch_bytes`

// updateRun is updateRunAt for any commit, the row found by id.
const updateRun = `UPDATE runs SET state = ?1, status = ?2, data = ?3, milestones = ?4, error = ?5, version = ?6, updated_at = ?7,
	patch_bytes = CASE WHEN ?10 < 0 OR patch_bytes + ?10 > ?11 THEN 0 ELSE patch_bytes + ?10 END, workflow_version = ?12
	WHERE id = ?8 AND version = ?9 RETURNING patch_bytes`

// Events implements store.RunStore. It reads from the last whole event at
// or before after+1 (index events_whole), folding the deltas up to the
// page (store.EventFold).
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	var from sql.NullInt64
	if err := s.queryRow(ctx, wholeQuery, runID, max(after, 0)+1).Scan(&from); err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	out := []store.Event{}
	if from.Valid {
		var err error
		if out, err = s.foldEvents(ctx, runID, from.Int64, after, limit); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		var one int
		err := s.queryRow(ctx, `SELECT 1 FROM runs WHERE id = ?`, runID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("sqlite: run %s: %w", runID, store.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: events: %w", err)
		}
	}
	return out, nil
}

// wholeQuery finds the last whole event at or before a seq. It repeats the
// events_whole index's condition (non-empty data) so that SQLite uses that
// partial index for a parameter; INDEXED BY keeps it from walking the
// primary key back through every delta instead.
const wholeQuery = `SELECT MAX(seq) FROM events INDEXED BY events_whole WHERE run_id = ? AND seq <= ? AND data != ''`

// headQuery reads a key's latest record through the ledger's (key, seq)
// index (not ledger_heads, which an edit of the file could point at an
// older version: the records themselves are checked against the tree).
const headQuery = `SELECT ` + ledgerCols + ` FROM ledger WHERE key = ? ORDER BY seq DESC LIMIT 1`

func (s *Store) foldEvents(ctx context.Context, runID string, from, after int64, limit int) ([]store.Event, error) {
	n := int64(-1)
	if limit > 0 {
		n = after - from + 1 + int64(limit)
	}
	rows, err := s.query(ctx, `SELECT seq, time, kind, action, from_state, to_state, actor, state, status, data, milestones, error, patch, offered, workflow_version, reason
		FROM events WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ?`, runID, from, n)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	defer rows.Close()
	fold := store.NewEventFold(after, limit)
	for rows.Next() {
		e := store.Event{RunID: runID}
		var t int64
		var data, ms, patch, offered string
		if err := rows.Scan(&e.Seq, &t, &e.Kind, &e.Action, &e.From, &e.To, &e.Actor, &e.State, &e.Status, &data, &ms, &e.Error, &patch, &offered, &e.WorkflowVersion, &e.Reason); err != nil {
			return nil, fmt.Errorf("sqlite: events: %w", err)
		}
		e.Time = fromNanos(t)
		list, err := parseMilestones(ms)
		if err != nil {
			return nil, err
		}
		if data != "" {
			e.Data, e.Milestones = json.RawMessage(data), list
		} else {
			e.Patch, e.Added = json.RawMessage(patch), list
		}
		if e.Offered, err = parseOffered(offered); err != nil {
			return nil, err
		}
		more, err := fold.Add(e)
		if err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
		if !more {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	return fold.Events(), nil
}

// CountRuns implements store.RunStore: it reads the counts the triggers
// of table runs keep (migration 0004), never the runs.
func (s *Store) CountRuns(ctx context.Context) ([]store.RunCount, error) {
	rows, err := s.query(ctx, `SELECT workflow_id, status, n FROM run_counts WHERE n != 0 ORDER BY workflow_id, status`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: count runs: %w", err)
	}
	defer rows.Close()
	out := []store.RunCount{}
	for rows.Next() {
		var c store.RunCount
		if err := rows.Scan(&c.WorkflowID, &c.Status, &c.N); err != nil {
			return nil, fmt.Errorf("sqlite: count runs: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// claimQuery picks the claimable task that became claimable first (see
// store.TaskStore.ClaimTask): the first entries of tasks_ready (ready_at
// <= now) are the claimable tasks, so the claim reads no task waiting out
// a backoff or a live lease. (A lease ending exactly now is not yet over,
// hence the second test.) It checks a candidate's workflow by looking its
// run up, not by listing every run of the served workflows.
const claimQuery = `SELECT id, run_id, state, version, attempts, created_at, updated_at, lease_until, attempt, not_before FROM tasks
	WHERE status != 'done' AND ready_at <= ?1 AND (status = 'pending' OR lease_until < ?1)
	  AND (? = '' OR EXISTS (SELECT 1 FROM runs WHERE runs.id = tasks.run_id AND runs.workflow_id IN (SELECT value FROM json_each(?))))
	ORDER BY ready_at, id LIMIT 1`

// ClaimTask implements store.TaskStore.
func (s *Store) ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration, workflows []string) (store.Task, bool, error) {
	var t store.Task
	var found bool
	only := "" // a JSON array of workflow ids, or "" for any workflow
	if workflows != nil {
		b, _ := json.Marshal(workflows)
		only = string(b)
	}
	err := s.write(ctx, func(tx wtx) error {
		var leaseUntil, created, updated, notBefore int64
		err := tx.QueryRow(claimQuery, nanos(now), only, only).
			Scan(&t.ID, &t.RunID, &t.State, &t.Version, &t.Attempts, &created, &updated, &leaseUntil, &t.Attempt, &notBefore)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sqlite: claim task: %w", err)
		}
		t.Attempts++
		t.Status, t.Owner, t.LeaseUntil = store.TaskRunning, owner, now.Add(lease)
		t.CreatedAt, t.UpdatedAt = fromNanos(created), now
		if notBefore != 0 {
			t.NotBefore = fromNanos(notBefore)
		}
		if _, err := tx.Exec(`UPDATE tasks SET status = 'running', owner = ?1, lease_until = ?2, ready_at = ?2, attempts = ?3, updated_at = ?4 WHERE id = ?5`,
			owner, nanos(t.LeaseUntil), t.Attempts, nanos(now), t.ID); err != nil {
			return fmt.Errorf("sqlite: claim task: %w", err)
		}
		found = true
		return nil
	})
	if err != nil || !found {
		return store.Task{}, false, err
	}
	return t, true, nil
}

func (s *Store) ownedUpdate(ctx context.Context, id, owner, query string, args ...any) error {
	return s.write(ctx, func(tx wtx) error {
		res, err := tx.Exec(query, args...)
		if err != nil {
			return fmt.Errorf("sqlite: task %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var one int
			if err := tx.QueryRow(`SELECT 1 FROM tasks WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite: task %s: %w", id, store.ErrNotFound)
			}
			return fmt.Errorf("sqlite: task %s is not held by %s: %w", id, owner, store.ErrConflict)
		}
		return nil
	})
}

// ExtendTask implements store.TaskStore.
func (s *Store) ExtendTask(ctx context.Context, id, owner string, until time.Time) error {
	return s.ownedUpdate(ctx, id, owner, `UPDATE tasks SET lease_until = ?1, ready_at = ?1 WHERE id = ?2 AND owner = ?3 AND status = 'running'`, nanos(until), id, owner)
}

// ReleaseTask implements store.TaskStore.
func (s *Store) ReleaseTask(ctx context.Context, id, owner string) error {
	return s.ownedUpdate(ctx, id, owner, `UPDATE tasks SET status = 'pending', owner = '', lease_until = 0, ready_at = 0 WHERE id = ? AND owner = ? AND status = 'running'`, id, owner)
}

// FinishTask implements store.TaskStore.
func (s *Store) FinishTask(ctx context.Context, id string) error {
	return s.write(ctx, func(tx wtx) error {
		var one int
		if err := tx.QueryRow(`SELECT 1 FROM tasks WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: task %s: %w", id, store.ErrNotFound)
		}
		_, err := tx.Exec(`UPDATE tasks SET status = 'done', owner = '' WHERE id = ? AND status != 'done'`, id)
		return err
	})
}

// PendingTasks implements store.TaskStore.
func (s *Store) PendingTasks(ctx context.Context) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE status != 'done'`).Scan(&n)
	return n, err
}
