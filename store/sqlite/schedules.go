package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// scheduleCols are the columns a schedule is written with; a read adds
// its last failure (failed_tick, failed_error), which only FailSchedule
// writes.
const scheduleCols = `id, workflow_id, cron, timezone, data, source, created_at, last_tick`

const scheduleReadCols = scheduleCols + `, failed_tick, failed_error`

func scanSchedule(sc scanner) (store.Schedule, error) {
	var s store.Schedule
	var data string
	var created, last, failed int64
	if err := sc.Scan(&s.ID, &s.WorkflowID, &s.Cron, &s.Timezone, &data, &s.Source, &created, &last, &failed, &s.LastFailure.Error); err != nil {
		return store.Schedule{}, err
	}
	s.Data, s.CreatedAt, s.LastTick = json.RawMessage(data), fromNanos(created), fromNanos(last)
	if failed != 0 {
		s.LastFailure.Tick = fromNanos(failed)
	}
	return s, nil
}

func scheduleData(d json.RawMessage) string {
	if len(d) == 0 {
		return `{}`
	}
	return string(d)
}

func insertSchedule(tx wtx, s store.Schedule) (bool, error) {
	res, err := tx.Exec(`INSERT INTO schedules (`+scheduleCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		s.ID, s.WorkflowID, s.Cron, s.Timezone, scheduleData(s.Data), s.Source,
		nanos(store.ScheduleTime(s.CreatedAt)), nanos(store.ScheduleTime(s.LastTick)))
	if err != nil {
		return false, fmt.Errorf("sqlite: put schedule %s: %w", s.ID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// PutSchedule implements store.ScheduleStore.
func (s *Store) PutSchedule(ctx context.Context, sc store.Schedule) error {
	return s.write(ctx, func(tx wtx) error {
		ok, err := insertSchedule(tx, sc)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("sqlite: schedule %s: %w", sc.ID, store.ErrExists)
		}
		return nil
	})
}

// PutFileSchedules implements store.ScheduleStore.
func (s *Store) PutFileSchedules(ctx context.Context, workflows []string, ss []store.Schedule) error {
	keep := map[string]bool{}
	for _, sc := range ss {
		if sc.Source != store.ScheduleFile || !slices.Contains(workflows, sc.WorkflowID) {
			return fmt.Errorf("sqlite: schedule %s is not a file schedule of the workflows given", sc.ID)
		}
		keep[sc.ID] = true
	}
	return s.write(ctx, func(tx wtx) error {
		for _, wf := range workflows {
			rows, err := tx.Query(`SELECT id FROM schedules WHERE source = ? AND workflow_id = ?`, store.ScheduleFile, wf)
			if err != nil {
				return fmt.Errorf("sqlite: file schedules: %w", err)
			}
			var drop []string
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return fmt.Errorf("sqlite: file schedules: %w", err)
				}
				if !keep[id] {
					drop = append(drop, id)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: file schedules: %w", err)
			}
			for _, id := range drop {
				if _, err := tx.Exec(`DELETE FROM schedules WHERE id = ?`, id); err != nil {
					return fmt.Errorf("sqlite: delete file schedule %s: %w", id, err)
				}
			}
		}
		for _, sc := range ss {
			if _, err := insertSchedule(tx, sc); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetSchedule implements store.ScheduleStore.
func (s *Store) GetSchedule(ctx context.Context, id string) (store.Schedule, error) {
	sc, err := scanSchedule(s.queryRow(ctx, `SELECT `+scheduleReadCols+` FROM schedules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Schedule{}, fmt.Errorf("sqlite: schedule %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Schedule{}, fmt.Errorf("sqlite: get schedule: %w", err)
	}
	return sc, nil
}

// ListSchedules implements store.ScheduleStore.
func (s *Store) ListSchedules(ctx context.Context, after string, limit int) ([]store.Schedule, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.query(ctx, `SELECT `+scheduleReadCols+` FROM schedules WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list schedules: %w", err)
	}
	defer rows.Close()
	out := []store.Schedule{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list schedules: %w", err)
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

// DeleteSchedule implements store.ScheduleStore.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	return s.write(ctx, func(tx wtx) error {
		var source string
		err := tx.QueryRow(`SELECT source FROM schedules WHERE id = ?`, id).Scan(&source)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("sqlite: schedule %s: %w", id, store.ErrNotFound)
		case err != nil:
			return fmt.Errorf("sqlite: delete schedule %s: %w", id, err)
		case source == store.ScheduleFile:
			return fmt.Errorf("sqlite: schedule %s: %w", id, store.ErrFileSchedule)
		}
		if _, err := tx.Exec(`DELETE FROM schedules WHERE id = ?`, id); err != nil {
			return fmt.Errorf("sqlite: delete schedule %s: %w", id, err)
		}
		return nil
	})
}

// AdvanceSchedule implements store.ScheduleStore.
func (s *Store) AdvanceSchedule(ctx context.Context, id string, from, to time.Time) (bool, error) {
	var ok bool
	err := s.write(ctx, func(tx wtx) error {
		res, err := tx.Exec(`UPDATE schedules SET last_tick = ? WHERE id = ? AND last_tick = ?`,
			nanos(store.ScheduleTime(to)), id, nanos(store.ScheduleTime(from)))
		if err != nil {
			return fmt.Errorf("sqlite: advance schedule %s: %w", id, err)
		}
		n, _ := res.RowsAffected()
		ok = n == 1
		return nil
	})
	return ok, err
}

// FailSchedule implements store.ScheduleStore.
func (s *Store) FailSchedule(ctx context.Context, id string, f store.ScheduleFailure) error {
	return s.write(ctx, func(tx wtx) error {
		if _, err := tx.Exec(`UPDATE schedules SET failed_tick = ?, failed_error = ? WHERE id = ?`,
			nanos(store.ScheduleTime(f.Tick)), store.ScheduleError(f.Error), id); err != nil {
			return fmt.Errorf("sqlite: record schedule %s's failure: %w", id, err)
		}
		return nil
	})
}
