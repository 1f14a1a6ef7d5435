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

// applyTimers writes c's timer changes (after store.PrepareTimers) in the
// writer's transaction: the named timers done, then, when c enters a
// state (or creates the run), the run's timers replaced by c's.
func applyTimers(tx wtx, c *store.Commit, create bool) error {
	for _, id := range c.DoneTimers {
		if _, err := tx.Exec(`DELETE FROM timers WHERE id = ?`, id); err != nil {
			return fmt.Errorf("sqlite: complete timer %s: %w", id, err)
		}
	}
	if !c.ReplaceTimers && !create {
		return nil
	}
	if !create { // a new run has none
		if _, err := tx.Exec(voidTimersQuery, runTimersArgs(c.Run.ID)...); err != nil {
			return fmt.Errorf("sqlite: void timers of run %s: %w", c.Run.ID, err)
		}
	}
	for _, t := range c.Timers {
		if _, err := tx.Exec(`INSERT INTO timers (id, run_id, workflow_id, state, version, action, due_at, ready_at, data)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.RunID, t.WorkflowID, t.State, t.Version, t.Action, nanos(t.DueAt), nanos(t.DueAt), string(t.Data)); err != nil {
			return fmt.Errorf("sqlite: store timer %s: %w", t.ID, err)
		}
	}
	return nil
}

// voidTimersQuery deletes a run's timers (runTimersArgs): a range of the
// primary key, as a timer's id begins with its run's and "/".
const voidTimersQuery = `DELETE FROM timers WHERE id >= ?1 AND id < ?2 AND run_id = ?3`

// runTimersArgs are the arguments of the queries of one run's timers: the
// range of the ids of its timers, then the run's id.
func runTimersArgs(runID string) []any { return []any{runID + "/", runID + "0", runID} }

const timerCols = `id, run_id, workflow_id, state, version, action, due_at, data, owner, lease_until`

// scanTimer reads one row of timerCols.
func scanTimer(sc scanner) (store.Timer, error) {
	var t store.Timer
	var due, lease int64
	var data string
	if err := sc.Scan(&t.ID, &t.RunID, &t.WorkflowID, &t.State, &t.Version, &t.Action, &due, &data, &t.Owner, &lease); err != nil {
		return store.Timer{}, err
	}
	t.DueAt, t.LeaseUntil, t.Data = fromNanos(due), fromNanos(lease), json.RawMessage(data)
	return t, nil
}

// claimTimersQuery leases the first claimable timers of timers_ready
// (ready_at <= now: due and not under a lease), so a claim walks only
// the timers it takes.
const claimTimersQuery = `UPDATE timers SET owner = ?1, lease_until = ?2, ready_at = ?2
	WHERE id IN (SELECT id FROM timers WHERE ready_at <= ?3 ORDER BY ready_at, id LIMIT ?4)
	RETURNING ` + timerCols

// nextTimerQuery reads the first entry of timers_ready.
const nextTimerQuery = `SELECT ready_at FROM timers ORDER BY ready_at LIMIT 1`

// ClaimDueTimers implements store.TimerStore, in the writer (the one
// process that has the database open is the only claimer).
func (s *Store) ClaimDueTimers(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Timer, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sqlite: claim timers: limit %d, want > 0", limit)
	}
	if !leaseUntil.After(now) {
		return nil, fmt.Errorf("sqlite: claim timers: the lease ends (%s) at or before now (%s)", leaseUntil.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	var out []store.Timer
	err := s.write(ctx, func(tx wtx) error {
		out = []store.Timer{}
		rows, err := tx.Query(claimTimersQuery, owner, nanos(leaseUntil), nanos(now), limit)
		if err != nil {
			return fmt.Errorf("sqlite: claim timers: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTimer(rows)
			if err != nil {
				return fmt.Errorf("sqlite: claim timers: %w", err)
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	store.SortTimers(out)
	return out, nil
}

// NextTimerDue implements store.TimerStore.
func (s *Store) NextTimerDue(ctx context.Context) (time.Time, bool, error) {
	var at int64
	err := s.queryRow(ctx, nextTimerQuery).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("sqlite: next timer: %w", err)
	}
	return fromNanos(at), true, nil
}

// ReleaseTimer implements store.TimerStore.
func (s *Store) ReleaseTimer(ctx context.Context, id, owner string) error {
	return s.write(ctx, func(tx wtx) error {
		res, err := tx.Exec(`UPDATE timers SET owner = '', lease_until = 0, ready_at = due_at WHERE id = ? AND owner = ? AND owner != ''`, id, owner)
		if err != nil {
			return fmt.Errorf("sqlite: release timer %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var one int
			if err := tx.QueryRow(`SELECT 1 FROM timers WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite: timer %s: %w", id, store.ErrNotFound)
			}
			return fmt.Errorf("sqlite: timer %s is not held by %s: %w", id, owner, store.ErrConflict)
		}
		return nil
	})
}

// CompleteTimer implements store.TimerStore.
func (s *Store) CompleteTimer(ctx context.Context, id string) error {
	return s.write(ctx, func(tx wtx) error {
		if _, err := tx.Exec(`DELETE FROM timers WHERE id = ?`, id); err != nil {
			return fmt.Errorf("sqlite: complete timer %s: %w", id, err)
		}
		return nil
	})
}

// RunTimers implements store.TimerStore.
func (s *Store) RunTimers(ctx context.Context, runID string) ([]store.Timer, error) {
	rows, err := s.query(ctx, `SELECT `+timerCols+` FROM timers WHERE id >= ?1 AND id < ?2 AND run_id = ?3 ORDER BY due_at, id`, runTimersArgs(runID)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run timers: %w", err)
	}
	defer rows.Close()
	out := []store.Timer{}
	for rows.Next() {
		t, err := scanTimer(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: run timers: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: run timers: %w", err)
	}
	return out, nil
}
