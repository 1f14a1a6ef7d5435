package storetest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// RunLedgerCheckpoints runs the conformance tests of the tamper-evident
// ledger methods (signed checkpoints, canonical bytes, the verified size)
// against stores made by newStore.
func RunLedgerCheckpoints(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"SignedAppendStoresCheckpoint", testSignedAppend},
		{"CanonicalBytesRoundTrip", testCanonicalRoundTrip},
		{"SignErrorAbortsAppend", testSignErrorAborts},
		{"CheckpointPerSizeOnce", testCheckpointPerSizeOnce},
		{"UncanonicalRecords", testUncanonical},
		{"VerifiedSize", testVerifiedSize},
		{"ConcurrentSignedAppends", testConcurrentSigned},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

// fakeSigner checks that it is given the records right after prev, with
// their canonical bytes, and "signs" a checkpoint whose range hashes the
// sizes (so a round trip of Range is visible).
func fakeSigner(prev *store.LedgerCheckpoint, added []store.LedgerRecord) (store.LedgerCheckpoint, error) {
	var from int64
	if prev != nil {
		from = prev.TreeSize
		if len(prev.Range) != 1 || string(prev.Range[0]) != string(rangeOf(prev.TreeSize)) {
			return store.LedgerCheckpoint{}, fmt.Errorf("prev range of %d did not round-trip: %x", prev.TreeSize, prev.Range)
		}
	}
	for i, r := range added {
		if r.Seq != from+int64(i)+1 {
			return store.LedgerCheckpoint{}, fmt.Errorf("added[%d] has seq %d after a checkpoint of %d", i, r.Seq, from)
		}
		if string(r.Canonical) != canonicalOf(r.InvID) {
			return store.LedgerCheckpoint{}, fmt.Errorf("added %s without its canonical bytes: %q", r.InvID, r.Canonical)
		}
	}
	size := from + int64(len(added))
	return store.LedgerCheckpoint{
		TreeSize: size, PrevSize: from, RootHash: fmt.Sprintf("%064x", size), Note: fmt.Sprintf("note %d\n", size),
		PublicKey: "key", Range: [][]byte{rangeOf(size)}, Time: t0,
	}, nil
}

func rangeOf(size int64) []byte {
	h := sha256.Sum256([]byte(fmt.Sprint(size)))
	return h[:]
}

func canonicalOf(invID string) string { return `{"canonical":"` + invID + `"}` }

func appendSigned(t *testing.T, s store.Store, key, invID string) (store.LedgerRecord, store.LedgerCheckpoint) {
	t.Helper()
	r, ck, err := s.AppendLedgerSigned(ctx(), key, func(p store.LedgerPrev) (store.LedgerRecord, error) {
		r := Record(p, key, "directory_row", invID)
		r.Canonical = []byte(canonicalOf(invID))
		return r, nil
	}, fakeSigner)
	if err != nil {
		t.Fatalf("AppendLedgerSigned(%s): %v", invID, err)
	}
	return r, ck
}

func testSignedAppend(t *testing.T, s store.Store) {
	if _, err := s.LatestLedgerCheckpoint(ctx()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LatestLedgerCheckpoint on an empty ledger: %v", err)
	}
	_, ck1 := appendSigned(t, s, "a", "inv_1")
	r2, ck2 := appendSigned(t, s, "b", "inv_2")
	if ck1.TreeSize != 1 || ck2.TreeSize != 2 || ck2.PrevSize != 1 || r2.Seq != 2 {
		t.Fatalf("checkpoints %+v %+v", ck1, ck2)
	}
	latest, err := s.LatestLedgerCheckpoint(ctx())
	if err != nil || latest.TreeSize != 2 || latest.Note != "note 2\n" || latest.PublicKey != "key" || latest.RootHash != ck2.RootHash || !latest.Time.Equal(t0) {
		t.Fatalf("LatestLedgerCheckpoint = %+v, %v", latest, err)
	}
	all, err := s.LedgerCheckpoints(ctx(), 0, 0)
	if err != nil || len(all) != 2 || all[0].TreeSize != 1 || all[1].TreeSize != 2 {
		t.Fatalf("LedgerCheckpoints = %+v, %v", all, err)
	}
	page, err := s.LedgerCheckpoints(ctx(), 1, 1)
	if err != nil || len(page) != 1 || page[0].TreeSize != 2 || string(page[0].Range[0]) != string(rangeOf(2)) {
		t.Fatalf("LedgerCheckpoints(1, 1) = %+v, %v", page, err)
	}
}

func testCanonicalRoundTrip(t *testing.T, s store.Store) {
	appendSigned(t, s, "a", "inv_1")
	want := canonicalOf("inv_1")
	r, err := s.LedgerRecord(ctx(), "inv_1")
	if err != nil || string(r.Canonical) != want {
		t.Fatalf("LedgerRecord canonical = %q, %v", r.Canonical, err)
	}
	rs, err := s.LedgerRange(ctx(), 1, 2)
	if err != nil || len(rs) != 1 || string(rs[0].Canonical) != want {
		t.Fatalf("LedgerRange canonical = %+v, %v", rs, err)
	}
	h, err := s.LedgerHistory(ctx(), "a", 0, 0)
	if err != nil || len(h) != 1 || string(h[0].Canonical) != want {
		t.Fatalf("LedgerHistory canonical = %+v, %v", h, err)
	}
	l, err := s.LedgerLatest(ctx(), "directory_row", "", 10)
	if err != nil || len(l) != 1 || string(l[0].Canonical) != want {
		t.Fatalf("LedgerLatest canonical = %+v, %v", l, err)
	}
}

func testSignErrorAborts(t *testing.T, s store.Store) {
	appendSigned(t, s, "a", "inv_1")
	boom := errors.New("boom")
	_, _, err := s.AppendLedgerSigned(ctx(), "b", func(p store.LedgerPrev) (store.LedgerRecord, error) {
		r := Record(p, "b", "directory_row", "inv_2")
		r.Canonical = []byte(canonicalOf("inv_2"))
		return r, nil
	}, func(*store.LedgerCheckpoint, []store.LedgerRecord) (store.LedgerCheckpoint, error) {
		return store.LedgerCheckpoint{}, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("AppendLedgerSigned with a failing signer = %v, want its error", err)
	}
	if n, _ := s.LedgerSize(ctx()); n != 1 {
		t.Fatalf("a failed signature left the ledger at %d records", n)
	}
	if _, err := s.LedgerRecord(ctx(), "inv_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the unsigned record was stored: %v", err)
	}
	if ck, _ := s.LatestLedgerCheckpoint(ctx()); ck.TreeSize != 1 {
		t.Fatalf("newest checkpoint %+v", ck)
	}
}

func testCheckpointPerSizeOnce(t *testing.T, s store.Store) {
	_, ck := appendSigned(t, s, "a", "inv_1")
	other := ck
	other.RootHash, other.Note = fmt.Sprintf("%064x", 99), "another root\n"
	if err := s.PutLedgerCheckpoint(ctx(), other); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a second checkpoint of tree size 1: %v, want ErrExists", err)
	}
	if got, _ := s.LatestLedgerCheckpoint(ctx()); got.Note != ck.Note {
		t.Fatalf("the checkpoint of size 1 became %+v", got)
	}
	third := ck
	third.TreeSize, third.PrevSize = 3, 1
	if err := s.PutLedgerCheckpoint(ctx(), third); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LatestLedgerCheckpoint(ctx()); got.TreeSize != 3 {
		t.Fatalf("LatestLedgerCheckpoint after a put = %+v", got)
	}
}

func testUncanonical(t *testing.T, s store.Store) {
	if n, err := s.LedgerUncanonical(ctx()); err != nil || n != 0 {
		t.Fatalf("LedgerUncanonical on an empty ledger = %d, %v", n, err)
	}
	appendRec(t, s, "a", "directory_row", "inv_1", nil)
	appendRec(t, s, "b", "directory_row", "inv_2", nil)
	appendRec(t, s, "c", "directory_row", "inv_3", func(r *store.LedgerRecord) { r.Canonical = []byte("kept") })
	if n, _ := s.LedgerUncanonical(ctx()); n != 1 {
		t.Fatalf("LedgerUncanonical = %d, want 1", n)
	}
	if err := s.SetLedgerCanonical(ctx(), map[int64][]byte{1: []byte("one"), 3: []byte("not kept")}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.LedgerUncanonical(ctx()); n != 2 {
		t.Fatalf("LedgerUncanonical = %d, want 2", n)
	}
	if err := s.SetLedgerCanonical(ctx(), map[int64][]byte{2: []byte("two")}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.LedgerUncanonical(ctx()); n != 0 {
		t.Fatalf("LedgerUncanonical = %d, want 0", n)
	}
	rs, _ := s.LedgerRange(ctx(), 1, 4)
	if len(rs) != 3 || string(rs[0].Canonical) != "one" || string(rs[1].Canonical) != "two" || string(rs[2].Canonical) != "kept" {
		t.Fatalf("canonical bytes after SetLedgerCanonical: %q %q %q", rs[0].Canonical, rs[1].Canonical, rs[2].Canonical)
	}
}

func testVerifiedSize(t *testing.T, s store.Store) {
	if n, err := s.LedgerVerified(ctx()); err != nil || n != 0 {
		t.Fatalf("LedgerVerified on a new store = %d, %v", n, err)
	}
	for _, c := range []struct{ set, want int64 }{{5, 5}, {3, 5}, {8, 8}} {
		if err := s.SetLedgerVerified(ctx(), c.set); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.LedgerVerified(ctx()); n != c.want {
			t.Fatalf("LedgerVerified after setting %d = %d, want %d (never lowered)", c.set, n, c.want)
		}
	}
}

// Concurrent signed appends: every checkpoint extends the one before it
// by exactly the records after it (fakeSigner checks), none is lost.
func testConcurrentSigned(t *testing.T, s store.Store) {
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			invID := fmt.Sprintf("inv_%02d", i)
			_, _, err := s.AppendLedgerSigned(ctx(), fmt.Sprintf("k%d", i%5), func(p store.LedgerPrev) (store.LedgerRecord, error) {
				r := Record(p, fmt.Sprintf("k%d", i%5), "directory_row", invID)
				r.Canonical = []byte(canonicalOf(invID))
				return r, nil
			}, fakeSigner)
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cks, err := s.LedgerCheckpoints(ctx(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	prev := int64(0)
	for _, ck := range cks {
		if ck.PrevSize != prev || ck.TreeSize <= prev {
			t.Fatalf("checkpoint %d follows %d, want %d", ck.TreeSize, ck.PrevSize, prev)
		}
		prev = ck.TreeSize
	}
	if prev != n {
		t.Fatalf("the newest checkpoint is of %d, want %d", prev, n)
	}
}
