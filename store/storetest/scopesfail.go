package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// ScopesFailTheirAppend checks that a dispatcher's scopes are written in
// the transaction of the signed append: while writing them fails (refuse,
// a backend's own way of making the scopes' insert fail, e.g. a trigger,
// is in force), the append fails whole and leaves no record and no
// checkpoint; after allow, the next append stores record and scopes. s
// must hold an empty ledger.
func ScopesFailTheirAppend(t *testing.T, s store.Store, refuse, allow func()) {
	t.Helper()
	ctx := context.Background()
	appendRow := func(invID string) error {
		_, _, err := s.AppendLedgerSigned(ctx, "row-a", func(p store.LedgerPrev) (store.LedgerRecord, error) {
			r := Record(p, "row-a", "directory_row", invID)
			r.DispatcherScopes = []string{"exec"}
			return r, nil
		}, Sign)
		return err
	}
	refuse()
	if err := appendRow("inv_lost"); err == nil {
		t.Fatal("the append succeeded although its scopes could not be written")
	}
	if n, err := s.LedgerSize(ctx); err != nil || n != 0 {
		t.Fatalf("LedgerSize = %d, %v; want 0: a record without its scopes", n, err)
	}
	if _, err := s.LatestLedgerCheckpoint(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LatestLedgerCheckpoint = %v, want ErrNotFound: a checkpoint of a failed append", err)
	}
	allow()
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
