package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// ledgerScopesTests check the dispatcher scopes stored with an append
// (store.LedgerRecord.DispatcherScopes, store.LedgerStore.DispatcherScopes)
// and the check of the index of each key's latest record
// (store.LedgerStore.CheckLedgerHeads).
var ledgerScopesTests = []test[store.LedgerStore]{
	{"DispatcherScopes", testDispatcherScopes},
	{"DispatcherScopesOnlyWithTheRecord", testDispatcherScopesOnlyWithTheRecord},
	{"CheckLedgerHeads", testCheckLedgerHeads},
}

// testDispatcherScopes: the scopes an append carries read back, an
// empty list as an empty list; a record appended without them, and an
// unknown inv_ID, have none (ErrNotFound); the records read back do not
// carry them.
func testDispatcherScopes(t *testing.T, s store.LedgerStore) {
	if _, err := s.DispatcherScopes(ctx(), "inv_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown inv_ID: %v, want ErrNotFound", err)
	}
	a := appendRec(t, s, "row-a", "directory_row", "inv_a", func(r *store.LedgerRecord) { r.DispatcherScopes = []string{"read", "exec"} })
	if !slices.Equal(a.DispatcherScopes, []string{"read", "exec"}) {
		t.Fatalf("the appended record = %+v, want it as built, with its scopes", a)
	}
	appendRec(t, s, "row-b", "directory_row", "inv_b", func(r *store.LedgerRecord) { r.DispatcherScopes = []string{} })
	appendRec(t, s, "build-1", "invocation", "inv_c", nil)
	if got, err := s.DispatcherScopes(ctx(), "inv_a"); err != nil || !slices.Equal(got, []string{"read", "exec"}) {
		t.Fatalf("inv_a: %v %v, want [read exec]", got, err)
	}
	if got, err := s.DispatcherScopes(ctx(), "inv_b"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("inv_b: %#v %v, want an empty list", got, err)
	}
	if got, err := s.DispatcherScopes(ctx(), "inv_c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a record appended without scopes: %v %v, want ErrNotFound", got, err)
	}
	r, err := s.LedgerRecord(ctx(), "inv_a")
	if err != nil || r.DispatcherScopes != nil {
		t.Fatalf("LedgerRecord(inv_a) = %+v, %v; want the record without its scopes", r, err)
	}
	h, err := s.LedgerHead(ctx(), "row-a")
	if err != nil || h.DispatcherScopes != nil {
		t.Fatalf("LedgerHead(row-a) = %+v, %v; want the record without its scopes", h, err)
	}
}

// testDispatcherScopesOnlyWithTheRecord: scopes are stored in the
// append's transaction, so an append that fails after building its
// record (its signer fails, as a crash before COMMIT would) leaves
// neither the record nor its scopes, and one refused by its builder
// leaves no scopes either.
func testDispatcherScopesOnlyWithTheRecord(t *testing.T, s store.LedgerStore) {
	boom := errors.New("the signer failed")
	_, _, err := s.AppendLedgerSigned(ctx(), "row-a", func(p store.LedgerPrev) (store.LedgerRecord, error) {
		r := Record(p, "row-a", "directory_row", "inv_lost")
		r.DispatcherScopes = []string{"exec"}
		return r, nil
	}, func(*store.LedgerCheckpoint, []store.LedgerRecord) (store.LedgerCheckpoint, error) {
		return store.LedgerCheckpoint{}, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("AppendLedgerSigned = %v, want the signer's error", err)
	}
	if _, err := s.LedgerRecord(ctx(), "inv_lost"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the record of a failed append: %v, want ErrNotFound", err)
	}
	if got, err := s.DispatcherScopes(ctx(), "inv_lost"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the scopes of a failed append: %v %v, want ErrNotFound (scopes without their record)", got, err)
	}
	_, _, err = s.AppendLedgerSigned(ctx(), "row-a", func(p store.LedgerPrev) (store.LedgerRecord, error) {
		return store.LedgerRecord{InvID: "inv_refused", DispatcherScopes: []string{"exec"}}, boom
	}, Sign)
	if !errors.Is(err, boom) {
		t.Fatalf("AppendLedgerSigned = %v, want the builder's error", err)
	}
	if got, err := s.DispatcherScopes(ctx(), "inv_refused"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the scopes of a refused append: %v %v, want ErrNotFound", got, err)
	}
	// The next append takes seq 1 and keeps its scopes.
	r := appendRec(t, s, "row-a", "directory_row", "inv_kept", func(r *store.LedgerRecord) { r.DispatcherScopes = []string{"runs"} })
	if r.Seq != 1 {
		t.Fatalf("seq after failed appends = %d, want 1", r.Seq)
	}
	if got, err := s.DispatcherScopes(ctx(), "inv_kept"); err != nil || !slices.Equal(got, []string{"runs"}) {
		t.Fatalf("inv_kept: %v %v, want [runs]", got, err)
	}
}

// testCheckLedgerHeads: the index of each key's latest record agrees
// with a ledger written only through appends: empty, then with keys of
// several types, superseded versions and a key whose latest record
// changes type (an invocation and its result).
func testCheckLedgerHeads(t *testing.T, s store.LedgerStore) {
	if key, err := s.CheckLedgerHeads(ctx()); err != nil || key != "" {
		t.Fatalf("an empty ledger: CheckLedgerHeads = %q, %v; want \"\"", key, err)
	}
	appendRec(t, s, "row-a", "directory_row", "inv_1", nil)
	appendRec(t, s, "row-b", "directory_row", "inv_2", nil)
	appendRec(t, s, "row-a", "directory_row", "inv_3", nil)
	appendRec(t, s, "build-1", "invocation", "inv_4", nil)
	appendRec(t, s, "build-1", "invocation_result", "inv_5", func(r *store.LedgerRecord) { r.ResultOf = "inv_4" })
	if key, err := s.CheckLedgerHeads(ctx()); err != nil || key != "" {
		t.Fatalf("CheckLedgerHeads = %q, %v; want \"\" (every entry agrees)", key, err)
	}
}
