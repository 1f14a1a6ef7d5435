package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/asmp-dev/asmp/store"
)

// listRunsQuery builds ListRuns' query for f: every filter is an equality
// on an indexed column prefix, and the keyset condition and order follow
// the index's (updated_at, id) suffix, read backwards.
func listRunsQuery(f store.RunFilter) (string, []any) {
	var where []string
	var args []any
	if f.WorkflowID != "" {
		where, args = append(where, "workflow_id = ?"), append(args, f.WorkflowID)
	}
	if f.State != "" {
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	if f.Override != nil {
		where, args = append(where, "status = ?"), append(args, *f.Override)
		if *f.Override != "" {
			// The condition of runs_list_status, a partial index: SQLite
			// uses it only when the query says so itself.
			where = append(where, "status != ''")
		}
	}
	if !f.UpdatedAfter.IsZero() {
		where, args = append(where, "updated_at > ?"), append(args, nanos(f.UpdatedAfter))
	}
	if !f.Before.IsZero() {
		where, args = append(where, "(updated_at, id) < (?, ?)"), append(args, nanos(f.Before.UpdatedAt), f.Before.ID)
	}
	q := `SELECT ` + runCols + ` FROM runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1
	}
	return q + ` ORDER BY updated_at DESC, id DESC LIMIT ?`, append(args, limit)
}

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	q, args := listRunsQuery(f)
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list runs: %w", err)
	}
	defer rows.Close()
	out := []store.Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list runs: %w", err)
	}
	return out, nil
}
