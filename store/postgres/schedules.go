package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

// scheduleCols are the columns a schedule is written with; a read adds
// its last failure (failed_tick, failed_error), which only FailSchedule
// writes.
const scheduleCols = `id, workflow_id, cron, timezone, data, source, created_at, last_tick`

const scheduleReadCols = scheduleCols + `, failed_tick, failed_error`

func scanSchedule(row pgx.Row) (store.Schedule, error) {
	var s store.Schedule
	var data []byte
	var failed *time.Time
	if err := row.Scan(&s.ID, &s.WorkflowID, &s.Cron, &s.Timezone, &data, &s.Source, &s.CreatedAt, &s.LastTick, &failed, &s.LastFailure.Error); err != nil {
		return store.Schedule{}, err
	}
	s.Data, s.CreatedAt, s.LastTick = json.RawMessage(data), utc(s.CreatedAt), utc(s.LastTick)
	if failed != nil {
		s.LastFailure.Tick = utc(*failed)
	}
	return s, nil
}

func scheduleData(d json.RawMessage) string {
	if len(d) == 0 {
		return `{}`
	}
	return string(d)
}

const insertScheduleQuery = `INSERT INTO schedules (` + scheduleCols + `) VALUES ($1, $2, $3, $4, $5::json, $6, $7, $8) ON CONFLICT (id) DO NOTHING`

func scheduleArgs(s store.Schedule) []any {
	return []any{s.ID, s.WorkflowID, s.Cron, s.Timezone, scheduleData(s.Data), s.Source, store.ScheduleTime(s.CreatedAt), store.ScheduleTime(s.LastTick)}
}

// PutSchedule implements store.ScheduleStore.
func (s *Store) PutSchedule(ctx context.Context, sc store.Schedule) error {
	tag, err := s.pool.Exec(ctx, insertScheduleQuery, scheduleArgs(sc)...)
	if err != nil {
		return fmt.Errorf("postgres: put schedule %s: %w", sc.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: schedule %s: %w", sc.ID, store.ErrExists)
	}
	return nil
}

// PutFileSchedules implements store.ScheduleStore. Replicas that start
// at once with the same files write the same rows: the first insert of a
// schedule wins and the others keep it.
func (s *Store) PutFileSchedules(ctx context.Context, workflows []string, ss []store.Schedule) error {
	keep := []string{}
	for _, sc := range ss {
		if sc.Source != store.ScheduleFile || !slices.Contains(workflows, sc.WorkflowID) {
			return fmt.Errorf("postgres: schedule %s is not a file schedule of the workflows given", sc.ID)
		}
		keep = append(keep, sc.ID)
	}
	if workflows == nil {
		workflows = []string{}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM schedules WHERE source = $1 AND workflow_id = ANY($2) AND NOT (id = ANY($3))`,
			store.ScheduleFile, workflows, keep); err != nil {
			return err
		}
		for _, sc := range ss {
			if _, err := tx.Exec(ctx, insertScheduleQuery, scheduleArgs(sc)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: put file schedules: %w", err)
	}
	return nil
}

// GetSchedule implements store.ScheduleStore.
func (s *Store) GetSchedule(ctx context.Context, id string) (store.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, `SELECT `+scheduleReadCols+` FROM schedules WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Schedule{}, fmt.Errorf("postgres: schedule %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Schedule{}, fmt.Errorf("postgres: get schedule: %w", err)
	}
	return sc, nil
}

// ListSchedules implements store.ScheduleStore.
func (s *Store) ListSchedules(ctx context.Context, after string, limit int) ([]store.Schedule, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleReadCols+` FROM schedules WHERE id > $1 ORDER BY id LIMIT $2`, after, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: list schedules: %w", err)
	}
	defer rows.Close()
	out := []store.Schedule{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list schedules: %w", err)
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list schedules: %w", err)
	}
	return out, nil
}

// DeleteSchedule implements store.ScheduleStore.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	var source string
	err := s.pool.QueryRow(ctx, `DELETE FROM schedules WHERE id = $1 AND source <> $2 RETURNING source`, id, store.ScheduleFile).Scan(&source)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: delete schedule %s: %w", id, err)
	}
	if _, err := s.GetSchedule(ctx, id); err != nil {
		return err // ErrNotFound, or why it could not be read
	}
	return fmt.Errorf("postgres: schedule %s: %w", id, store.ErrFileSchedule)
}

// AdvanceSchedule implements store.ScheduleStore: one UPDATE whose WHERE
// holds the expected last tick, so of concurrent callers (any replica)
// exactly one changes the row.
func (s *Store) AdvanceSchedule(ctx context.Context, id string, from, to time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE schedules SET last_tick = $1 WHERE id = $2 AND last_tick = $3`,
		store.ScheduleTime(to), id, store.ScheduleTime(from))
	if err != nil {
		return false, fmt.Errorf("postgres: advance schedule %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// FailSchedule implements store.ScheduleStore.
func (s *Store) FailSchedule(ctx context.Context, id string, f store.ScheduleFailure) error {
	if _, err := s.pool.Exec(ctx, `UPDATE schedules SET failed_tick = $1, failed_error = $2 WHERE id = $3`,
		store.ScheduleTime(f.Tick), store.ScheduleError(f.Error), id); err != nil {
		return fmt.Errorf("postgres: record schedule %s's failure: %w", id, err)
	}
	return nil
}
