package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

// Every filter of a run list walks an index in the list's order and stops
// at the page's end: no sequential scan of runs and no sort of what
// matched, so a page costs the same at 10 and at 1,000,000 runs. The
// planner is told to avoid sequential and bitmap scans (on a small table
// it would rightly prefer them); a sort still shows when no index gives
// the order.
func TestListRunsUsesIndexes(t *testing.T) {
	s := openPlanStore(t)
	for _, tc := range listIndexCases() {
		q, args := listRunsQuery(tc.Filter)
		plan := explain(t, s, q, args...)
		if !strings.Contains(plan, "Index Scan Backward using "+tc.Index+" ") || strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s: plan\n%s\nwant a backward walk of %s, no sort", tc.Name, plan, tc.Index)
		}
	}
}

// openPlanStore opens a store on a new schema of the server named by
// ASMP_TEST_POSTGRES, dropped when the test ends.
func openPlanStore(t *testing.T) *Store {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the Postgres store's tests need a server (scripts/test runs them)")
	}
	u := os.Getenv("ASMP_TEST_POSTGRES")
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ASMP_TEST_POSTGRES is not set, and CI is")
		}
		t.Skip("ASMP_TEST_POSTGRES is not set")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "asmp_plan_" + hex.EncodeToString(b[:])
	s, err := Open(t.Context(), u, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, u); err == nil {
			_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
			_ = conn.Close(ctx)
		}
	})
	return s
}

// explain returns Postgres' plan for query, one node a line.
func explain(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	ctx := t.Context()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// listIndexCase is one filter of a run list and the index that must
// serve it in the list's order.
type listIndexCase struct {
	Name   string
	Filter store.RunFilter
	Index  string
}

// listIndexCases are the filters GET /runs makes, each with its index.
func listIndexCases() []listIndexCase {
	processing, derived := "processing", ""
	cursor := store.RunCursor{UpdatedAt: time.Unix(100, 0), ID: "x"}
	return []listIndexCase{
		{"unfiltered", store.RunFilter{Limit: 50}, "runs_updated"},
		{"updated after", store.RunFilter{UpdatedAfter: time.Unix(5, 0), Limit: 50}, "runs_updated"},
		{"next page", store.RunFilter{Before: cursor, Limit: 50}, "runs_updated"},
		{"workflow", store.RunFilter{WorkflowID: "wf", Limit: 50}, "runs_list_workflow"},
		{"workflow, next page", store.RunFilter{WorkflowID: "wf", Before: cursor, Limit: 50}, "runs_list_workflow"},
		{"state", store.RunFilter{State: "S", Limit: 50}, "runs_list_state"},
		{"status override", store.RunFilter{Override: &processing, Limit: 50}, "runs_list_status"},
		{"workflow and state", store.RunFilter{WorkflowID: "wf", State: "S", Limit: 50}, "runs_list_workflow_state"},
		{"derived status of one state", store.RunFilter{WorkflowID: "wf", State: "S", Override: &derived, Limit: 50}, "runs_list_workflow_state"},
	}
}

// The runs table, updated in place by every transition, is vacuumed after
// 1% of dead rows, not Postgres' default 20%: the newest page of a list
// would otherwise walk every dead index entry left since the last vacuum.
func TestRunsAreVacuumedOften(t *testing.T) {
	s := openPlanStore(t)
	var opts []string
	if err := s.pool.QueryRow(t.Context(), `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'runs'::regclass`).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(opts, "autovacuum_vacuum_scale_factor=0.01") {
		t.Fatalf("runs table options %v", opts)
	}
}
