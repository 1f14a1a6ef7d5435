package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/store/storetest"
)

// dbBytes returns the size of the database file's pages once the store is
// closed (its WAL folded back).
func dbBytes(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages, size, free int64
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	db.QueryRow(`PRAGMA page_size`).Scan(&size)
	db.QueryRow(`PRAGMA freelist_count`).Scan(&free)
	return (pages - free) * size
}

// The events of a run with 1 MB of data ticked 100 times take the size of
// their changes, not 100 copies of the data.
func TestEventStorageGrowsWithThePatch(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "size.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.NewRun("big")
	c.Run.Data = json.RawMessage(`{"blob":"` + strings.Repeat("z", 1<<20) + `"}`)
	c.Event.Snapshot = c.Run.Snapshot
	if err := s.CreateRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before := dbBytes(t, path)
	if s, err = sqlite.Open(ctx, path, nil); err != nil {
		t.Fatal(err)
	}
	r := c.Run
	const ticks = 100
	for i := 0; i < ticks; i++ {
		c := storetest.Delta(t, r, "START", "n", i, "", []string{"tick"})
		if err := s.CommitRun(ctx, r.Version, c).Wait(); err != nil {
			t.Fatal(err)
		}
		r = c.Run
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	grown := dbBytes(t, path) - before
	if perTick := grown / ticks; perTick > 2048 {
		t.Fatalf("the database grew by %d bytes for %d ticks (%d per tick): events keep the data, not the change", grown, ticks, perTick)
	}
	t.Logf("%d bytes for %d ticks of a 1 MB run", grown, ticks)
}
