package oip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

// countingStore records which seqs LedgerRange was asked for, and can
// hand out edited records (an attacker between the store and the server).
type countingStore struct {
	store.Store
	mu    sync.Mutex
	read  []int64 // the from of every LedgerRange
	edit  func(*store.LedgerRecord)
	reads int64 // records returned by LedgerRange
}

func (c *countingStore) LedgerRange(ctx context.Context, from, to int64) ([]store.LedgerRecord, error) {
	recs, err := c.Store.LedgerRange(ctx, from, to)
	c.mu.Lock()
	c.read = append(c.read, from)
	c.reads += int64(len(recs))
	c.mu.Unlock()
	return recs, err
}

func (c *countingStore) LedgerRecord(ctx context.Context, invID string) (store.LedgerRecord, error) {
	r, err := c.Store.LedgerRecord(ctx, invID)
	if err == nil && c.edit != nil {
		c.edit(&r)
	}
	return r, err
}

func dispatchN(t *testing.T, svc *Service, from, n int) []Receipt {
	t.Helper()
	var out []Receipt
	for i := from; i < from+n; i++ {
		rc, err := svc.Dispatch(context.Background(), fmt.Sprintf("row-%d", i), json.RawMessage(simpleRow))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rc)
	}
	return out
}

// Start-up checks only the records added since the last full check; the
// older ones are checked by Verify, after it.
func TestStartupChecksOnlyNewRecords(t *testing.T) {
	st := memstore.New()
	opts := &Options{KeyPath: filepath.Join(t.TempDir(), "ledger.key")}
	svc := newService(t, st, opts)
	dispatchN(t, svc, 0, 50)
	// The second start checks all 50 (none was checked in full yet).
	newService(t, st, opts)
	dispatchN(t, newService(t, st, opts), 50, 5)

	cs := &countingStore{Store: st}
	fresh := newService(t, cs, opts)
	if cs.reads != 5 || len(cs.read) != 1 || cs.read[0] != 51 {
		t.Fatalf("start-up read %d records from %v; want only 51..55", cs.reads, cs.read)
	}
	if fresh.Ready() {
		t.Fatal("ready before the full check")
	}
	if err := fresh.Verify(context.Background(), nil); err != nil || !fresh.Ready() {
		t.Fatalf("Verify = %v, ready %v", err, fresh.Ready())
	}
	if cs.reads != 5+55 {
		t.Fatalf("the full check read %d records, want 55", cs.reads-5)
	}
	if v, _ := st.LedgerVerified(context.Background()); v != 55 {
		t.Fatalf("verified size %d, want 55", v)
	}
}

// Every dispatch stores one checkpoint of its tree; the head file follows
// it (0600) and GET /api/ledger/checkpoint answers the stored one.
func TestCheckpointStoredWithEveryAppend(t *testing.T) {
	backends(t, func(t *testing.T, st store.Store) {
		key := filepath.Join(t.TempDir(), "ledger.key")
		svc := newService(t, st, &Options{KeyPath: key})
		for i := range 3 {
			rc := dispatchN(t, svc, i, 1)[0]
			cks, err := st.LedgerCheckpoints(context.Background(), rc.Seq-1, 1)
			if err != nil || len(cks) != 1 || cks[0].TreeSize != rc.Seq || cks[0].PrevSize != int64(i) {
				t.Fatalf("checkpoint of %d: %+v %v", rc.Seq, cks, err)
			}
			head, ok, err := readHead(HeadPath(key))
			if err != nil || !ok || head.TreeSize != rc.Seq || head.RootHash != cks[0].RootHash {
				t.Fatalf("head file after seq %d: %+v %v %v", rc.Seq, head, ok, err)
			}
		}
		if fi, err := os.Stat(HeadPath(key)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("head file: %v %v", fi, err)
		}
		ck, err := svc.Checkpoint(context.Background())
		stored, _ := st.LatestLedgerCheckpoint(context.Background())
		if err != nil || ck.Note != stored.Note || ck.TreeSize != 3 {
			t.Fatalf("Checkpoint = %+v %v, stored %+v", ck, err, stored)
		}
		// The proof of a stored size carries the stored note.
		p, err := svc.Proof(context.Background(), mustFirst(t, st).InvID, 2)
		prev, _ := st.LedgerCheckpoints(context.Background(), 1, 1)
		if err != nil || p.Checkpoint != prev[0].Note {
			t.Fatalf("proof at 2: %v, checkpoint %q, stored %q", err, p.Checkpoint, prev[0].Note)
		}
	})
}

func mustFirst(t *testing.T, st store.Store) store.LedgerRecord {
	t.Helper()
	recs, err := st.LedgerRange(context.Background(), 1, 2)
	if err != nil || len(recs) != 1 {
		t.Fatal(err)
	}
	return recs[0]
}

// A SQLite group commit signs one checkpoint for all its records.
func TestGroupCommitSignsOneCheckpoint(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "x.db"))
	svc := newService(t, st, nil)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if _, err := svc.Dispatch(context.Background(), fmt.Sprintf("k-%d", i), json.RawMessage(simpleRow)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	cks, err := st.LedgerCheckpoints(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	prev := int64(0)
	for _, ck := range cks {
		if ck.PrevSize != prev {
			t.Fatalf("checkpoint %d follows %d, want %d", ck.TreeSize, ck.PrevSize, prev)
		}
		prev = ck.TreeSize
	}
	if prev != 64 {
		t.Fatalf("the last checkpoint is of %d", prev)
	}
	t.Logf("64 concurrent dispatches, %d checkpoints", len(cks))
	rep, err := Check(context.Background(), st, nil)
	if err != nil || !rep.OK || rep.Checkpoints != int64(len(cks)) {
		t.Fatalf("Check = %+v %v", rep, err)
	}
}

// A record read is checked: an edited one answers 500 and stops the
// server (OnTamper), it is never served.
func TestEditedRecordIsNeverServed(t *testing.T) {
	st := memstore.New()
	var tampered error
	cs := &countingStore{Store: st}
	svc := newService(t, cs, &Options{OnTamper: func(err error) { tampered = err }})
	rc := dispatchN(t, svc, 0, 2)[1]
	cs.edit = func(r *store.LedgerRecord) {
		r.Body = json.RawMessage(strings.Replace(string(r.Body), "Say it.", "Say no.", 1))
	}
	_, err := svc.Record(context.Background(), rc.InvID)
	var te *TamperError
	if err == nil || !errors.As(tampered, &te) || te.Seq != 2 {
		t.Fatalf("Record = %v, OnTamper got %v", err, tampered)
	}
	srv := newServer(t, svc.Handler())
	res, err := srv.Client().Get(srv.URL + "/api/dispatch?receipt=" + rc.InvID)
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Hint string }
	json.NewDecoder(res.Body).Decode(&e)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Hint, "integrity check") {
		t.Fatalf("GET an edited record: %d %q", res.StatusCode, e.Hint)
	}
}

// ?proof=true receipts carry the checkpoint they were issued under and
// the inclusion proof in its tree, which verify offline.
func TestReceiptWithProof(t *testing.T) {
	svc := newService(t, memstore.New(), nil)
	dispatchN(t, svc, 0, 2)
	srv := newServer(t, svc.Handler())
	m, err := srv.post("/api/dispatch?proof=true", dispatchBody("with-proof", simpleRow))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	var rc Receipt
	if err := json.Unmarshal(b, &rc); err != nil || rc.Checkpoint == nil || rc.Proof == nil || rc.Checkpoint.TreeSize != 3 {
		t.Fatalf("receipt %s: %v", b, err)
	}
	rec, err := svc.Record(context.Background(), rc.InvID)
	if err != nil {
		t.Fatal(err)
	}
	rec.ReplayedBy = nil
	if err := verify.Receipt(rec, *rc.Proof, []byte(rc.Checkpoint.Note), svc.VerifierKey()); err != nil {
		t.Fatalf("the receipt's own evidence: %v", err)
	}
	dispatchN(t, svc, 10, 2) // the tree grows: the replay still names the checkpoint of 3
	res, err := srv.Client().Get(srv.URL + "/api/dispatch?proof=true&receipt=" + rc.InvID)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got struct {
		InvID      string     `json:"inv_ID"`
		Checkpoint Checkpoint `json:"checkpoint"`
		Proof      Proof      `json:"proof"`
	}
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil || got.InvID != rc.InvID || got.Checkpoint.Note != rc.Checkpoint.Note || got.Proof.TreeSize != 3 {
		t.Fatalf("replay with proof: %+v %v", got, err)
	}
	res2, err := srv.Client().Get(srv.URL + "/api/dispatch?proof=maybe&receipt=" + rc.InvID)
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if res2.StatusCode != http.StatusBadRequest {
		t.Fatalf("proof=maybe: %d", res2.StatusCode)
	}
}

// legacyLedger is a ledger of n records as an earlier release wrote it:
// no canonical bytes, no checkpoints. edit, when set, changes records
// after they were hashed.
func legacyLedger(t *testing.T, n int, edit ...func(*store.LedgerRecord)) store.Store {
	t.Helper()
	st := memstore.New()
	dispatchN(t, newService(t, st, nil), 0, n)
	legacy := memstore.New()
	recs, _ := st.LedgerRange(context.Background(), 1, int64(n)+1)
	for _, r := range recs {
		r.Canonical = nil
		for _, e := range edit {
			e(&r)
		}
		if _, err := legacy.AppendUnsigned(context.Background(), r.Key, func(store.LedgerPrev) (store.LedgerRecord, error) { return r, nil }); err != nil {
			t.Fatal(err)
		}
	}
	return legacy
}

// The upgrade of an earlier release's ledger checks every entry_hash
// before storing canonical bytes, and then stores one checkpoint.
func TestUpgradeRefusesBadHash(t *testing.T) {
	legacy := legacyLedger(t, 3, func(r *store.LedgerRecord) {
		if r.Seq == 2 {
			r.Source = "someone else"
		}
	})
	_, err := New(legacy, nil)
	var te *TamperError
	if !errors.As(err, &te) || te.Seq != 2 || !strings.Contains(err.Error(), "does not match its content") {
		t.Fatalf("New on a legacy ledger with a bad hash: %v", err)
	}
	good := legacyLedger(t, 3)
	if _, err := New(good, nil); err != nil {
		t.Fatal(err)
	}
	if cks, _ := good.LedgerCheckpoints(context.Background(), 0, 0); len(cks) != 1 || cks[0].TreeSize != 3 {
		t.Fatalf("checkpoints after the upgrade: %+v", cks)
	}
	if first, _ := good.LedgerUncanonical(context.Background()); first != 0 {
		t.Fatalf("record %d still has no canonical bytes", first)
	}
}

// A checkpoint signed by another key with no key-rotation record before it
// fails the full check.
func TestKeyChangeWithoutRotationFails(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	a := newService(t, st, nil)
	dispatchN(t, a, 0, 2)
	b := newService(t, memstore.New(), nil) // another key
	tmpl, err := b.template(ctx, "row-x", TypeDirectoryRow, []byte(simpleRow))
	if err != nil {
		t.Fatal(err)
	}
	// b signs the append: a checkpoint by another key.
	_, _, err = st.AppendLedgerSigned(ctx, "row-x", func(p store.LedgerPrev) (store.LedgerRecord, error) {
		r := tmpl
		r.Seq = p.Seq
		var c []byte
		var leaf [hashSize]byte
		r.EntryHash, leaf, c, err = hashes(r)
		b.building.Store(r.InvID, leaf) // b's own append, as far as b knows
		sr := store.LedgerRecord{InvID: r.InvID, Seq: r.Seq, Key: r.Key, Type: r.Type, Body: r.Body, Source: r.Source, EntryHash: r.EntryHash, Canonical: c}
		sr.Timestamp, _ = parseTime(r.Timestamp)
		return sr, err
	}, b.sign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(ctx, st, nil); err == nil || !strings.Contains(err.Error(), "with no key-rotation record") {
		t.Fatalf("Check = %v", err)
	}
}

func parseTime(s string) (time.Time, error) { return time.Parse(TimeFormat, s) }

// Records appended after the last full check are checked in the
// background once there are enough, so that start-up stays bounded.
func TestVerifiedSizeAdvances(t *testing.T) {
	st := memstore.New()
	opts := &Options{KeyPath: filepath.Join(t.TempDir(), "ledger.key")}
	svc := newService(t, st, opts)
	svc.verifyEvery = 10
	dispatchN(t, svc, 0, 25)
	// A check running while the last appends came skips them: append
	// until one starts after the 20th record.
	for i := 25; i < 1000; i++ {
		for svc.advancing.Load() {
			runtime.Gosched()
		}
		if svc.verified.Load() >= 20 {
			break
		}
		dispatchN(t, svc, i, 1)
	}
	v, _ := st.LedgerVerified(context.Background())
	n := size(t, st)
	if v < 20 {
		t.Fatalf("verified size %d after %d appends", v, n)
	}
	cs := &countingStore{Store: st}
	newService(t, cs, opts)
	if cs.reads != n-v {
		t.Fatalf("start-up read %d records, want the %d after the last full check", cs.reads, n-v)
	}
}

// A start that checked the records since the last verified point records
// it: the next start checks none of them again, even when no full pass
// has finished in between (a server stopped during it).
func TestStartupRecordsWhatItChecked(t *testing.T) {
	st := memstore.New()
	opts := &Options{KeyPath: filepath.Join(t.TempDir(), "ledger.key")}
	dispatchN(t, newService(t, st, opts), 0, 50)
	newService(t, st, opts) // checks all 50 in full
	dispatchN(t, newService(t, st, opts), 50, 5)
	first := &countingStore{Store: st}
	newService(t, first, opts)
	if first.reads != 5 {
		t.Fatalf("start-up read %d records, want the 5 new ones", first.reads)
	}
	again := &countingStore{Store: st}
	newService(t, again, opts)
	if again.reads != 0 {
		t.Fatalf("the next start read %d records again, from %v", again.reads, again.read)
	}
}

// Records appended while the full pass has not finished are checked in
// the background all the same, so they do not pile up for the next start.
func TestVerifiedSizeAdvancesBeforeTheFullPass(t *testing.T) {
	st := memstore.New()
	opts := &Options{KeyPath: filepath.Join(t.TempDir(), "ledger.key")}
	dispatchN(t, newService(t, st, opts), 0, 5)
	newService(t, st, opts)        // checks the 5 in full
	svc := newService(t, st, opts) // the full pass is not run
	svc.verifyEvery = 10
	for i := 5; i < 1000 && svc.verified.Load() < 20; i++ {
		for svc.advancing.Load() {
			runtime.Gosched()
		}
		if svc.Ready() {
			t.Fatal("ready without the full pass")
		}
		dispatchN(t, svc, i, 1)
	}
	if v, _ := st.LedgerVerified(context.Background()); v < 20 {
		t.Fatalf("verified size %d after %d appends", v, size(t, st))
	}
}

// forgedPrevStore hands the signer of an append another newest checkpoint
// than the one stored: what the store would say after an attacker removed
// or rewrote records and checkpoints under the running server.
type forgedPrevStore struct {
	store.Store
	forge func(prev *store.LedgerCheckpoint) *store.LedgerCheckpoint
}

func (f *forgedPrevStore) AppendLedgerSigned(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error), sign store.LedgerSigner) (store.LedgerRecord, store.LedgerCheckpoint, error) {
	return f.Store.AppendLedgerSigned(ctx, key, build, func(prev *store.LedgerCheckpoint, added []store.LedgerRecord) (store.LedgerCheckpoint, error) {
		if f.forge != nil {
			prev = f.forge(prev)
		}
		return sign(prev, added)
	})
}

// An append is refused unless the store's newest checkpoint extends the
// newest one the service signed: not smaller, the same root at that size,
// and (once the tree has reached it) the checked root at a larger size.
// Nothing is appended and OnTamper stops the server.
func TestAppendRefusedUnlessTheStoreExtendsWhatWasSigned(t *testing.T) {
	rewrite := func(prev *store.LedgerCheckpoint) *store.LedgerCheckpoint {
		ck := *prev
		ck.RootHash = strings.Repeat("ab", 32)
		return &ck
	}
	cases := []struct {
		name  string
		other int // records another service appends first
		forge func(prev *store.LedgerCheckpoint) *store.LedgerCheckpoint
		want  string
	}{
		{"no checkpoint", 0, func(*store.LedgerCheckpoint) *store.LedgerCheckpoint { return nil }, "newest checkpoint is of tree size 0, but this server signed one of tree size 3"},
		{"a smaller tree", 0, func(prev *store.LedgerCheckpoint) *store.LedgerCheckpoint {
			ck := *prev
			ck.TreeSize = 2
			return &ck
		}, "records 3..3 and their checkpoints were removed while it ran"},
		{"another root at the size signed", 0, rewrite, "has root abab"},
		{"another root at a larger size", 2, rewrite, "the checked tree"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := memstore.New()
			fs := &forgedPrevStore{Store: st}
			var tampered error
			key := filepath.Join(t.TempDir(), "ledger.key")
			svc := newService(t, fs, &Options{KeyPath: key, OnTamper: func(err error) { tampered = err }})
			dispatchN(t, svc, 0, 3)
			if c.other > 0 { // a replica, with the same key
				dispatchN(t, newService(t, st, &Options{KeyPath: key}), 3, c.other)
				if n, err := svc.Size(context.Background()); err != nil || n != int64(3+c.other) {
					t.Fatalf("Size = %d %v", n, err)
				}
			}
			before := size(t, st)
			fs.forge = c.forge
			_, err := svc.Dispatch(context.Background(), "row-new", json.RawMessage(simpleRow))
			var te *TamperError
			if protocol.ErrorCode(err) != protocol.EUnavailable || !errors.As(tampered, &te) || !strings.Contains(te.What, c.want) {
				t.Fatalf("Dispatch = %v, OnTamper got %v; want %q", err, tampered, c.want)
			}
			if n := size(t, st); n != before {
				t.Fatalf("the refused append left %d records, want %d", n, before)
			}
			if ck, _ := st.LatestLedgerCheckpoint(context.Background()); ck.TreeSize != before {
				t.Fatalf("the newest checkpoint is of %d after a refused append, want %d", ck.TreeSize, before)
			}
		})
	}
}
