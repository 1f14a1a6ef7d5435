package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// LedgerStore runs the suite of store.LedgerStore against stores made by
// newStore.
func LedgerStore(t *testing.T, newStore func(t *testing.T) store.LedgerStore) {
	suite(t, newStore, []test[store.LedgerStore]{
		{"LedgerAppend", testLedgerAppend},
		{"LedgerBuildError", testLedgerBuildError},
		{"LedgerNeedsASigner", testLedgerNeedsASigner},
		{"LedgerConcurrentSeq", testLedgerConcurrentSeq},
		{"LedgerLatestAndReplay", testLedgerLatestAndReplay},
		{"LedgerHistoryPages", testLedgerHistoryPages},
	})
	suite(t, newStore, ledgerScopesTests)
}

// testLedgerHistoryPages: a key's history pages by seq and limit, and a
// page of large records ends once their bodies reach store.MaxPageBytes.
func testLedgerHistoryPages(t *testing.T, s store.LedgerStore) {
	big := `{"type":"directory_row","pad":"` + strings.Repeat("p", 5<<20) + `"}`
	for i := 0; i < 5; i++ {
		appendRec(t, s, "k", "directory_row", fmt.Sprintf("inv_%d", i), func(r *store.LedgerRecord) { r.Body = json.RawMessage(big) })
		appendRec(t, s, "other", "directory_row", fmt.Sprintf("inv_o%d", i), nil)
	}
	h, err := s.LedgerHistory(ctx(), "k", 0, 2)
	if err != nil || len(h) != 2 || h[0].InvID != "inv_0" || h[1].InvID != "inv_1" {
		t.Fatalf("LedgerHistory(k, 0, 2) = %d records, %v", len(h), err)
	}
	h, err = s.LedgerHistory(ctx(), "k", h[1].Seq, 0)
	if err != nil || len(h) != 3 {
		t.Fatalf("LedgerHistory after the second: %d records, %v", len(h), err)
	}
	// 5 MiB bodies: a page ends with the record that reaches 16 MiB.
	h, err = s.LedgerHistory(ctx(), "k", 0, 100)
	if err != nil || len(h) != 4 {
		t.Fatalf("a page of 5 MiB records: %d records, %v; want 4 (bounded in bytes)", len(h), err)
	}
}

// Record builds a ledger record for tests.
func Record(p store.LedgerPrev, key, typ, invID string) store.LedgerRecord {
	r := store.LedgerRecord{InvID: invID, Seq: p.Seq, Key: key, Type: typ, Body: json.RawMessage(`{"type":"` + typ + `"}`), Timestamp: t0, Source: "anonymous", EntryHash: fmt.Sprintf("%064x", p.Seq)}
	if p.Latest != nil {
		r.Supersedes = p.Latest.InvID
	}
	return r
}

// Sign is a store.LedgerSigner for tests of a store: it "signs" the
// checkpoint of the records added after prev, whatever their bytes.
func Sign(prev *store.LedgerCheckpoint, added []store.LedgerRecord) (store.LedgerCheckpoint, error) {
	var from int64
	if prev != nil {
		from = prev.TreeSize
	}
	size := from + int64(len(added))
	return store.LedgerCheckpoint{
		TreeSize: size, PrevSize: from, RootHash: fmt.Sprintf("%064x", size), Note: fmt.Sprintf("note %d\n", size),
		PublicKey: "key", Range: [][]byte{rangeOf(size)}, Time: t0,
	}, nil
}

func appendRec(t *testing.T, s store.LedgerStore, key, typ, invID string, mod func(*store.LedgerRecord)) store.LedgerRecord {
	t.Helper()
	r, _, err := s.AppendLedgerSigned(ctx(), key, func(p store.LedgerPrev) (store.LedgerRecord, error) {
		r := Record(p, key, typ, invID)
		if mod != nil {
			mod(&r)
		}
		return r, nil
	}, Sign)
	if err != nil {
		t.Fatalf("AppendLedgerSigned(%s): %v", invID, err)
	}
	return r
}

// testLedgerNeedsASigner: there is no unsigned append; one without a
// signer writes nothing.
func testLedgerNeedsASigner(t *testing.T, s store.LedgerStore) {
	_, _, err := s.AppendLedgerSigned(ctx(), "k", func(p store.LedgerPrev) (store.LedgerRecord, error) {
		return Record(p, "k", "directory_row", "inv_1"), nil
	}, nil)
	if err == nil {
		t.Fatal("AppendLedgerSigned without a signer appended")
	}
	if n, _ := s.LedgerSize(ctx()); n != 0 {
		t.Fatalf("an append without a signer wrote %d records", n)
	}
}

func testLedgerAppend(t *testing.T, s store.LedgerStore) {
	a := appendRec(t, s, "row-a", "directory_row", "inv_1", nil)
	b := appendRec(t, s, "row-a", "directory_row", "inv_2", nil)
	if a.Seq != 1 || b.Seq != 2 || b.Supersedes != "inv_1" || a.Supersedes != "" {
		t.Fatalf("records = %+v %+v", a, b)
	}
	got, err := s.LedgerRecord(ctx(), "inv_1")
	if err != nil || got.Key != "row-a" || string(got.Body) != `{"type":"directory_row"}` || !got.Timestamp.Equal(t0) || got.EntryHash != a.EntryHash {
		t.Fatalf("LedgerRecord = %+v, %v", got, err)
	}
	h, err := s.LedgerHistory(ctx(), "row-a", 0, 0)
	if err != nil || len(h) != 2 || h[0].InvID != "inv_1" || h[1].InvID != "inv_2" {
		t.Fatalf("LedgerHistory = %+v, %v", h, err)
	}
	if _, err := s.LedgerHistory(ctx(), "nope", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LedgerHistory(missing) = %v", err)
	}
	if h, err := s.LedgerHistory(ctx(), "row-a", 2, 0); err != nil || len(h) != 0 {
		t.Fatalf("LedgerHistory after the last = %+v, %v; want an empty page", h, err)
	}
	head, err := s.LedgerHead(ctx(), "row-a")
	if err != nil || head.InvID != "inv_2" {
		t.Fatalf("LedgerHead = %+v, %v", head, err)
	}
	if _, err := s.LedgerHead(ctx(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LedgerHead(missing) = %v", err)
	}
	if _, err := s.LedgerRecord(ctx(), "inv_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LedgerRecord(missing) = %v", err)
	}
	rng, _ := s.LedgerRange(ctx(), 2, 3)
	if len(rng) != 1 || rng[0].InvID != "inv_2" {
		t.Fatalf("LedgerRange(2,3) = %+v", rng)
	}
	if n, _ := s.LedgerSize(ctx()); n != 2 {
		t.Fatalf("LedgerSize = %d", n)
	}
}

func testLedgerBuildError(t *testing.T, s store.LedgerStore) {
	boom := errors.New("refused")
	_, _, err := s.AppendLedgerSigned(ctx(), "k", func(store.LedgerPrev) (store.LedgerRecord, error) { return store.LedgerRecord{}, boom }, Sign)
	if !errors.Is(err, boom) {
		t.Fatalf("AppendLedgerSigned error = %v, want the builder's", err)
	}
	if n, _ := s.LedgerSize(ctx()); n != 0 {
		t.Fatalf("a refused append wrote %d records", n)
	}
	if r := appendRec(t, s, "k", "directory_row", "inv_ok", nil); r.Seq != 1 {
		t.Fatalf("seq after a refused append = %d, want 1 (no gap)", r.Seq)
	}
}

func testLedgerConcurrentSeq(t *testing.T, s store.LedgerStore) {
	const n = 50
	var wg sync.WaitGroup
	seqs := make(chan int64, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, _, err := s.AppendLedgerSigned(ctx(), fmt.Sprintf("key-%d", i%7), func(p store.LedgerPrev) (store.LedgerRecord, error) {
				return Record(p, fmt.Sprintf("key-%d", i%7), "directory_row", fmt.Sprintf("inv_c%d", i)), nil
			}, Sign)
			if err != nil {
				t.Error(err)
				return
			}
			seqs <- r.Seq
		}(i)
	}
	wg.Wait()
	close(seqs)
	var got []int
	for q := range seqs {
		got = append(got, int(q))
	}
	sort.Ints(got)
	for i, q := range got {
		if q != i+1 {
			t.Fatalf("seqs = %v: want 1..%d with no gap or duplicate", got, n)
		}
	}
	// Every key's history links each record to its predecessor.
	for k := 0; k < 7; k++ {
		h, _ := s.LedgerHistory(ctx(), fmt.Sprintf("key-%d", k), 0, 0)
		for i := 1; i < len(h); i++ {
			if h[i].Supersedes != h[i-1].InvID {
				t.Fatalf("key-%d record %d supersedes %q, want %q", k, i, h[i].Supersedes, h[i-1].InvID)
			}
		}
	}
}

func testLedgerLatestAndReplay(t *testing.T, s store.LedgerStore) {
	appendRec(t, s, "b-row", "directory_row", "inv_b1", nil)
	appendRec(t, s, "a-row", "directory_row", "inv_a1", nil)
	appendRec(t, s, "b-row", "directory_row", "inv_b2", nil)
	appendRec(t, s, "build-1", "invocation", "inv_i1", nil)
	appendRec(t, s, "build-2", "invocation", "inv_i2", func(r *store.LedgerRecord) { r.ReplayOf = "inv_i1" })
	appendRec(t, s, "build-1", "invocation_result", "inv_r1", func(r *store.LedgerRecord) { r.ResultOf = "inv_i1" })
	rows, err := s.LedgerLatest(ctx(), "directory_row", "", 0)
	if err != nil || len(rows) != 2 || rows[0].InvID != "inv_a1" || rows[1].InvID != "inv_b2" {
		t.Fatalf("LedgerLatest = %+v, %v; want a-row@a1, b-row@b2", rows, err)
	}
	rows, _ = s.LedgerLatest(ctx(), "directory_row", "a-row", 10)
	if len(rows) != 1 || rows[0].Key != "b-row" {
		t.Fatalf("LedgerLatest(after a-row) = %+v", rows)
	}
	rows, _ = s.LedgerLatest(ctx(), "directory_row", "", 1)
	if len(rows) != 1 || rows[0].Key != "a-row" {
		t.Fatalf("LedgerLatest(limit 1) = %+v", rows)
	}
	by, err := s.ReplayedBy(ctx(), "inv_i1", 0)
	if err != nil || len(by) != 1 || by[0] != "inv_i2" {
		t.Fatalf("ReplayedBy = %v, %v", by, err)
	}
	appendRec(t, s, "build-3", "invocation", "inv_i3", func(r *store.LedgerRecord) { r.ReplayOf = "inv_i1" })
	if by, err := s.ReplayedBy(ctx(), "inv_i1", 0); err != nil || !slices.Equal(by, []string{"inv_i2", "inv_i3"}) {
		t.Fatalf("ReplayedBy of two replays = %v, %v", by, err)
	}
	if by, err := s.ReplayedBy(ctx(), "inv_i1", 1); err != nil || !slices.Equal(by, []string{"inv_i2"}) {
		t.Fatalf("ReplayedBy(limit 1) = %v, %v; want the oldest", by, err)
	}
	r, _ := s.LedgerRecord(ctx(), "inv_r1")
	if r.ResultOf != "inv_i1" || r.Supersedes != "inv_i1" {
		t.Fatalf("result record = %+v", r)
	}
	r, _ = s.LedgerRecord(ctx(), "inv_i2")
	if r.ReplayOf != "inv_i1" {
		t.Fatalf("replay record = %+v", r)
	}
}
