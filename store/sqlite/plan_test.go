package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// The ledger's replay lookup uses its index instead of scanning the
// ledger (a scan per receipt made reading histories quadratic).
func TestReplayedByUsesItsIndex(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.rdb.Query(`EXPLAIN QUERY PLAN `+replayedByQuery, "x")
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
	if p := strings.Join(plan, "; "); !strings.Contains(p, "INDEX ledger_replay") {
		t.Fatalf("plan of the replay lookup: %s", p)
	}
}
