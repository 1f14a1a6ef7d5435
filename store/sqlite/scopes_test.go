package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/store/storetest"
)

// A dispatcher's scopes are written in the transaction of the signed
// append: when writing them fails (here a trigger refuses them, as a full
// disk or a crash would), the append fails whole, and no signed record is
// left without its scopes; once they can be written the next append
// stores both.
func TestScopesFailTheirAppend(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "scopes.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.ScopesFailTheirAppend(t, s, func() {
		if _, err := db.Exec(`CREATE TRIGGER scopes_fail BEFORE INSERT ON ledger_scopes BEGIN SELECT RAISE(ABORT, 'no room for the scopes'); END`); err != nil {
			t.Fatal(err)
		}
	}, func() {
		if _, err := db.Exec(`DROP TRIGGER scopes_fail`); err != nil {
			t.Fatal(err)
		}
	})
}

// The store says what it offers: durable, one process's, group commit.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "caps.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.Capabilities(), (store.Capabilities{Durable: true, GroupCommit: true}); got != want {
		t.Fatalf("Capabilities = %+v, want %+v", got, want)
	}
}
