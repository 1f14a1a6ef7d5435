package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// queryPlan returns SQLite's plan for query, its steps joined by "; ".
func queryPlan(t *testing.T, query string, args ...any) string {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.rdb.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}

// The ledger's replay lookup uses its index instead of scanning the
// ledger (a scan per receipt made reading histories quadratic).
func TestReplayedByUsesItsIndex(t *testing.T) {
	t.Parallel()
	if p := queryPlan(t, replayedByQuery, "x", 100); !strings.Contains(p, "INDEX ledger_replay") {
		t.Fatalf("plan of the replay lookup: %s", p)
	}
}

// Claiming a task walks the claimable tasks' index (tasks_ready) and looks
// candidates' runs up by id: it never scans every task ever run, nor
// every run, nor sorts.
func TestClaimUsesIndexes(t *testing.T) {
	t.Parallel()
	p := queryPlan(t, claimQuery, 5, `["wf"]`, `["wf"]`)
	if !strings.Contains(p, "INDEX tasks_ready") || strings.Contains(p, "SCAN tasks;") || strings.HasSuffix(p, "SCAN tasks") || strings.Contains(p, "SCAN runs") || strings.Contains(p, "TEMP B-TREE") {
		t.Fatalf("plan of the task claim: %s", p)
	}
}

// A replay finds its starting whole event through events_whole, and a
// key's current row is the last entry of the ledger's (key, seq) index:
// neither walks a run's events nor a key's history, nor sorts.
func TestReplayAndHeadUseIndexes(t *testing.T) {
	t.Parallel()
	if p := queryPlan(t, wholeQuery, "r", 5); !strings.Contains(p, "events_whole") {
		t.Fatalf("plan of the whole-event lookup: %s", p)
	}
	p := queryPlan(t, headQuery, "k")
	if strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "INDEX ledger_key") {
		t.Fatalf("plan of the head lookup: %s", p)
	}
}

// A commit of a kept run finds its row by rowid, not through the id index
// (a walk as deep as the runs are many).
func TestCommitFindsTheRowByRowid(t *testing.T) {
	t.Parallel()
	args := []any{"S", "", "{}", "[]", "", 2, 5, "r", 1, 0, 0, "v", 7}
	p := queryPlan(t, updateRunAt, args...)
	if !strings.Contains(p, "INTEGER PRIMARY KEY (rowid=?)") || strings.Contains(p, "sqlite_autoindex_runs") {
		t.Fatalf("plan of the commit by rowid: %s", p)
	}
	if p := queryPlan(t, updateRun, args[:12]...); !strings.Contains(p, "sqlite_autoindex_runs_1 (id=?)") {
		t.Fatalf("plan of the commit by id: %s", p)
	}
}
