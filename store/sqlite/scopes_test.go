package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
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
	if _, err := db.Exec(`CREATE TRIGGER scopes_fail BEFORE INSERT ON ledger_scopes BEGIN SELECT RAISE(ABORT, 'no room for the scopes'); END`); err != nil {
		t.Fatal(err)
	}
	appendRow := func(invID string) error {
		_, _, err := s.AppendLedgerSigned(ctx, "row-a", func(p store.LedgerPrev) (store.LedgerRecord, error) {
			r := storetest.Record(p, "row-a", "directory_row", invID)
			r.DispatcherScopes = []string{"exec"}
			return r, nil
		}, storetest.Sign)
		return err
	}
	if err := appendRow("inv_lost"); err == nil {
		t.Fatal("the append succeeded although its scopes could not be written")
	}
	if n, err := s.LedgerSize(ctx); err != nil || n != 0 {
		t.Fatalf("LedgerSize = %d, %v; want 0: a record without its scopes", n, err)
	}
	if _, err := s.LatestLedgerCheckpoint(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LatestLedgerCheckpoint = %v, want ErrNotFound: a checkpoint of a failed append", err)
	}
	if _, err := db.Exec(`DROP TRIGGER scopes_fail`); err != nil {
		t.Fatal(err)
	}
	if err := appendRow("inv_kept"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DispatcherScopes(ctx, "inv_kept"); err != nil || !slices.Equal(got, []string{"exec"}) {
		t.Fatalf("DispatcherScopes = %v, %v; want [exec]", got, err)
	}
	if r, err := s.LedgerRecord(ctx, "inv_kept"); err != nil || r.Seq != 1 {
		t.Fatalf("LedgerRecord = %+v, %v; want seq 1", r, err)
	}
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
