package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

// listRunsQuery builds ListRuns' query for f: every filter is an equality
// on an indexed column prefix, and the keyset condition and order follow
// the index's (updated_at, id) suffix, read backwards.
func listRunsQuery(f store.RunFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.WorkflowID != "" {
		where = append(where, "workflow_id = "+arg(f.WorkflowID))
	}
	if f.State != "" {
		where = append(where, "state = "+arg(f.State))
	}
	if f.Override != nil {
		where = append(where, "status = "+arg(*f.Override))
	}
	if !f.UpdatedAfter.IsZero() {
		where = append(where, "updated_at >= "+arg(f.ChangedFrom()))
	}
	if !f.Before.IsZero() {
		where = append(where, "(updated_at, id) < ("+arg(f.Before.UpdatedAt)+", "+arg(f.Before.ID)+")")
	}
	if !f.DueBefore.IsZero() {
		// The runs of the timers due before it, read first through
		// timers_due (MATERIALIZED), each looked up by id (LIMIT 1 keeps
		// the planner from turning the lookups into a walk of the runs),
		// then filtered and sorted: the cost is that of the timers due,
		// not of the runs.
		q := `WITH due AS MATERIALIZED (SELECT DISTINCT run_id FROM timers WHERE due_at < ` + arg(f.DueBefore) + `)
			SELECT r.* FROM due CROSS JOIN LATERAL (SELECT ` + runCols + ` FROM runs WHERE runs.id = due.run_id LIMIT 1) r`
		if len(where) > 0 {
			q += ` WHERE ` + strings.Join(where, " AND ")
		}
		q += ` ORDER BY r.updated_at DESC, r.id DESC`
		if f.Limit > 0 {
			q += ` LIMIT ` + arg(f.Limit)
		}
		return q, args
	}
	q := `SELECT ` + runCols + ` FROM runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY updated_at DESC, id DESC`
	if f.Limit > 0 {
		q += ` LIMIT ` + arg(f.Limit)
	}
	return q, args
}

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	q, args := listRunsQuery(f)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list runs: %w", err)
	}
	if out == nil {
		out = []store.Run{}
	}
	return out, nil
}
