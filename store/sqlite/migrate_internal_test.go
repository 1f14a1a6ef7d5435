package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// Migration 5 adds events.workflow_version only when no earlier migration
// did: a database whose events table has it already opens, and keeps it.
func TestMigration5KeepsAnEarlierEventsVersionColumn(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		t.Fatal(err)
	}
	for v, name := range map[int]string{1: "migrations/0001_init.sql", 2: "migrations/0002_retention.sql"} {
		body, err := migrations.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO schema_migrations (version) VALUES (?)`, v); err != nil {
			t.Fatal(err)
		}
	}
	// What another migration before 5 may do.
	if _, err := db.Exec(`ALTER TABLE events ADD COLUMN workflow_version TEXT NOT NULL DEFAULT ''`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("opening a database whose events have workflow_version already: %v", err)
	}
	defer s.Close()
	now := time.Unix(1700000000, 0).UTC()
	snap := store.Snapshot{State: "A", Data: json.RawMessage(`{}`)}
	c := store.Commit{
		Run:   store.Run{ID: "r", WorkflowID: "wf", WorkflowVersion: "sha256:aa", Snapshot: snap, Version: 1, CreatedAt: now, UpdatedAt: now},
		Event: store.Event{RunID: "r", Seq: 1, Time: now, Kind: store.EventCreated, To: "A", WorkflowVersion: "sha256:aa", Snapshot: snap},
	}
	if err := s.CreateRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	if evs, err := s.Events(ctx, "r", 0, 0); err != nil || len(evs) != 1 || evs[0].WorkflowVersion != "sha256:aa" {
		t.Fatalf("Events = %+v, %v", evs, err)
	}
}
