package sqlite

import (
	"context"
	"fmt"
	"slices"
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
		where, args = append(where, "updated_at >= ?"), append(args, nanos(f.ChangedFrom()))
	}
	if !f.Before.IsZero() {
		where, args = append(where, "(updated_at, id) < (?, ?)"), append(args, nanos(f.Before.UpdatedAt), f.Before.ID)
	}
	q := `SELECT ` + runCols + ` FROM runs`
	if !f.DueBefore.IsZero() {
		// The runs of the timers due before it, read first (CROSS JOIN
		// keeps SQLite from walking the runs instead, INDEXED BY from
		// walking timers_run for the DISTINCT), then sorted: the cost is
		// that of the timers due, not of the runs.
		q = `SELECT ` + runCols + ` FROM (SELECT DISTINCT run_id FROM timers INDEXED BY timers_due WHERE due_at < ?) AS due CROSS JOIN runs ON runs.id = due.run_id`
		args = append([]any{nanos(f.DueBefore)}, args...)
	}
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
	if byWorkflow(f) {
		return s.listByWorkflow(ctx, f)
	}
	return s.listRuns(ctx, f)
}

// byWorkflow reports whether ListRuns reads f one workflow at a time: a
// state without a workflow has no index of its own (one index fewer for
// every transition to rewrite), so each workflow's runs in that state are
// read through runs_list_workflow_state and the pages merged. A page then
// costs a walk per workflow that has runs, however many runs are stored.
// (A stored override has its own index, runs_list_status.)
func byWorkflow(f store.RunFilter) bool {
	return f.State != "" && f.WorkflowID == "" && (f.Override == nil || *f.Override == "") && f.DueBefore.IsZero()
}

// listByWorkflow is ListRuns for a filter of byWorkflow. Every run belongs
// to one workflow, so it is in at most one of the pages merged.
func (s *Store) listByWorkflow(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	workflows, err := s.runWorkflows(ctx)
	if err != nil {
		return nil, err
	}
	out := []store.Run{}
	for _, w := range workflows {
		sub := f
		sub.WorkflowID = w
		runs, err := s.listRuns(ctx, sub)
		if err != nil {
			return nil, err
		}
		out = append(out, runs...)
	}
	slices.SortFunc(out, func(a, b store.Run) int {
		if store.NewerFirst(store.CursorOf(a), store.CursorOf(b)) {
			return -1
		}
		return 1
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// runWorkflows returns the workflows that have runs, from the counts the
// triggers of table runs keep.
func (s *Store) runWorkflows(ctx context.Context) ([]string, error) {
	rows, err := s.query(ctx, `SELECT workflow_id FROM run_counts GROUP BY workflow_id HAVING SUM(n) > 0`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list runs: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			return nil, fmt.Errorf("sqlite: list runs: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list runs: %w", err)
	}
	return out, nil
}

// listRuns reads one query of listRunsQuery.
func (s *Store) listRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
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
