package oip

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

// forged is a store whose answers an attacker rewrites on the way out.
type forged struct {
	store.Store
	recs   func([]store.LedgerRecord) []store.LedgerRecord
	cks    func([]store.LedgerCheckpoint) []store.LedgerCheckpoint // LedgerCheckpoints
	latest func(store.LedgerCheckpoint) (store.LedgerCheckpoint, bool)
	size   func(int64) int64
}

func (f *forged) LedgerRange(ctx context.Context, from, to int64) ([]store.LedgerRecord, error) {
	recs, err := f.Store.LedgerRange(ctx, from, to)
	if err == nil && f.recs != nil {
		recs = f.recs(recs)
	}
	return recs, err
}

func (f *forged) LedgerCheckpoints(ctx context.Context, after int64, limit int) ([]store.LedgerCheckpoint, error) {
	all, err := f.Store.LedgerCheckpoints(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	if f.cks != nil {
		all = f.cks(all)
	}
	var out []store.LedgerCheckpoint
	for _, ck := range all {
		if ck.TreeSize > after && (limit <= 0 || len(out) < limit) {
			out = append(out, ck)
		}
	}
	return out, nil
}

func (f *forged) LatestLedgerCheckpoint(ctx context.Context) (store.LedgerCheckpoint, error) {
	ck, err := f.Store.LatestLedgerCheckpoint(ctx)
	if err == nil && f.latest != nil {
		var ok bool
		if ck, ok = f.latest(ck); !ok {
			return ck, store.ErrNotFound
		}
	}
	return ck, err
}

func (f *forged) LedgerSize(ctx context.Context) (int64, error) {
	n, err := f.Store.LedgerSize(ctx)
	if err == nil && f.size != nil {
		n = f.size(n)
	}
	return n, err
}

// fiveRecords is a genuine ledger of five records, one checkpoint each,
// signed with the key file key.
func fiveRecords(t *testing.T) (st store.Store, key string) {
	t.Helper()
	st = memstore.New()
	key = filepath.Join(t.TempDir(), "ledger.key")
	svc := newService(t, st, &Options{KeyPath: key})
	dispatchN(t, svc, 0, 5)
	return st, key
}

func editRec(seq int64, f func(*store.LedgerRecord)) func([]store.LedgerRecord) []store.LedgerRecord {
	return func(recs []store.LedgerRecord) []store.LedgerRecord {
		out := slices.Clone(recs)
		for i := range out {
			if out[i].Seq == seq {
				f(&out[i])
			}
		}
		return out
	}
}

func editCk(size int64, f func(*store.LedgerCheckpoint)) func([]store.LedgerCheckpoint) []store.LedgerCheckpoint {
	return func(cks []store.LedgerCheckpoint) []store.LedgerCheckpoint {
		out := slices.Clone(cks)
		for i := range out {
			if out[i].TreeSize == size {
				f(&out[i])
			}
		}
		return out
	}
}

func dropCk(size int64) func([]store.LedgerCheckpoint) []store.LedgerCheckpoint {
	return func(cks []store.LedgerCheckpoint) []store.LedgerCheckpoint {
		return slices.DeleteFunc(slices.Clone(cks), func(ck store.LedgerCheckpoint) bool { return ck.TreeSize == size })
	}
}

// Every check of the full pass refuses its own forgery.
func TestCheckRefusesEachForgery(t *testing.T) {
	cases := []struct {
		name  string
		forge func(f *forged, st store.Store)
		want  string
		seq   int64
	}{
		{name: "a record missing in the middle", forge: func(f *forged, _ store.Store) {
			f.recs = func(recs []store.LedgerRecord) []store.LedgerRecord {
				return slices.DeleteFunc(slices.Clone(recs), func(r store.LedgerRecord) bool { return r.Seq == 3 })
			}
		}, want: "record seq 3: is missing", seq: 3},
		{name: "the ledger ending early", forge: func(f *forged, _ store.Store) {
			f.recs = func(recs []store.LedgerRecord) []store.LedgerRecord {
				return slices.DeleteFunc(slices.Clone(recs), func(r store.LedgerRecord) bool { return r.Seq >= 4 })
			}
		}, want: "record seq 4: is missing (the ledger ends at 3)", seq: 4},
		{name: "no canonical bytes", forge: func(f *forged, _ store.Store) {
			f.recs = editRec(2, func(r *store.LedgerRecord) { r.Canonical = nil })
		}, want: "record seq 2: has no stored canonical bytes", seq: 2},
		{name: "a body other than its bytes", forge: func(f *forged, _ store.Store) {
			f.recs = editRec(2, func(r *store.LedgerRecord) { r.Body = json.RawMessage(`{"type":"directory_row"}`) })
		}, want: "record seq 2: (", seq: 2},
		{name: "bytes other than the leaf signed", forge: func(f *forged, _ store.Store) {
			f.recs = editRec(2, func(r *store.LedgerRecord) {
				r.Canonical = []byte(strings.Replace(string(r.Canonical), `"seq":2`, `"seq":9`, 1))
			})
		}, want: "records 2..2 do not make the root signed in the checkpoint of tree size 2", seq: 2},
		{name: "a removed checkpoint in the chain", forge: func(f *forged, _ store.Store) { f.cks = dropCk(3) },
			want: "the checkpoint of tree size 3 was removed"},
		{name: "a checkpoint of another root", forge: func(f *forged, _ store.Store) {
			f.cks = editCk(2, func(ck *store.LedgerCheckpoint) { ck.RootHash = strings.Repeat("0", 64) })
		}, want: "do not make the root signed in the checkpoint of tree size 2", seq: 2},
		{name: "a checkpoint with a forged signature", forge: func(f *forged, _ store.Store) {
			f.cks = editCk(2, func(ck *store.LedgerCheckpoint) { ck.Note = strings.Replace(ck.Note, "\n2\n", "\n9\n", 1) })
		}, want: "the checkpoint of tree size 2 does not verify"},
		{name: "a checkpoint whose note says another size", forge: func(f *forged, _ store.Store) {
			f.cks = func(cks []store.LedgerCheckpoint) []store.LedgerCheckpoint {
				out := slices.Clone(cks)
				out[1].Note = out[0].Note // size 1's signed note under size 2's root
				return out
			}
		}, want: "the signed note of the checkpoint of tree size 2 says tree size 1"},
		{name: "the newest checkpoint hidden from the chain", forge: func(f *forged, _ store.Store) { f.cks = dropCk(5) },
			want: "no stored checkpoint covers records 5..5"},
		{name: "a ledger shorter than its newest checkpoint", forge: func(f *forged, _ store.Store) { f.size = func(n int64) int64 { return n - 1 } },
			want: "records 5..5 were removed", seq: 5},
		{name: "no checkpoint at all", forge: func(f *forged, _ store.Store) {
			f.latest = func(store.LedgerCheckpoint) (store.LedgerCheckpoint, bool) { return store.LedgerCheckpoint{}, false }
		}, want: "no stored checkpoint (the checkpoints were removed)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _ := fiveRecords(t)
			f := &forged{Store: st}
			c.forge(f, st)
			rep, err := Check(context.Background(), f, nil)
			var te *TamperError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), c.want) || rep.OK || rep.FirstBadSeq != c.seq {
				t.Fatalf("Check = %+v, %v; want %q at seq %d", rep, err, c.want, c.seq)
			}
		})
	}
}

// The signer refuses records it cannot extend the tree with.
func TestSignRefusesGapsAndMissingBytes(t *testing.T) {
	st, _ := fiveRecords(t)
	svc := newService(t, memstore.New(), nil)
	prev, _ := st.LatestLedgerCheckpoint(context.Background())
	recs, _ := st.LedgerRange(context.Background(), 1, 6)
	if _, err := svc.sign(&prev, []store.LedgerRecord{recs[2]}); err == nil || !strings.Contains(err.Error(), "record seq 6: is missing") {
		t.Fatalf("sign after a gap: %v", err)
	}
	bare := recs[0]
	bare.Canonical = nil
	if _, err := svc.sign(nil, []store.LedgerRecord{bare}); err == nil || !strings.Contains(err.Error(), "no stored canonical bytes") {
		t.Fatalf("sign without canonical bytes: %v", err)
	}
	broken := prev
	broken.Range = nil
	if _, err := svc.sign(&broken, []store.LedgerRecord{recs[0]}); err == nil || !strings.Contains(err.Error(), "broken Merkle range") {
		t.Fatalf("sign over a broken range: %v", err)
	}
}

// Start-up refuses a ledger the key file or the head file does not match,
// unless told to rotate the key or reset the head.
func TestStartRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("another key file", func(t *testing.T) {
		st, key := fiveRecords(t)
		os.Remove(key)
		if err := createKey(key, DefaultOrigin); err != nil {
			t.Fatal(err)
		}
		if _, err := New(st, &Options{KeyPath: key}); err == nil || !strings.Contains(err.Error(), "is not the key") {
			t.Fatalf("New with another key: %v", err)
		}
		svc, err := New(st, &Options{KeyPath: key, RotateKey: true})
		if err != nil {
			t.Fatal(err)
		}
		if rec, err := svc.Latest(ctx, keyRotationKey); err != nil || rec.Seq != 6 || rec.Type != TypeKeyRotation {
			t.Fatalf("rotation record %+v %v", rec, err)
		}
		if rep, err := Check(ctx, st, &CheckOptions{HeadPath: HeadPath(key)}); err != nil || !rep.OK || rep.Head != 6 {
			t.Fatalf("Check after rotation: %+v %v", rep, err)
		}
	})
	t.Run("a missing head file", func(t *testing.T) {
		st, key := fiveRecords(t)
		os.Remove(HeadPath(key))
		if _, err := New(st, &Options{KeyPath: key}); err == nil || !strings.Contains(err.Error(), "head file") || !strings.Contains(err.Error(), "is missing") {
			t.Fatalf("New without the head file: %v", err)
		}
		if _, err := New(st, &Options{KeyPath: key, ResetHead: true}); err != nil {
			t.Fatal(err)
		}
		if head, ok, err := readHead(HeadPath(key)); !ok || err != nil || head.TreeSize != 5 {
			t.Fatalf("the reset head file: %+v %v %v", head, ok, err)
		}
	})
	t.Run("a replica's first start", func(t *testing.T) {
		// A store other servers append to (Options.SharedStore): a
		// replica without a head file of its own creates it; the same
		// store not declared shared is refused.
		st, key := fiveRecords(t)
		os.Remove(HeadPath(key))
		if _, err := New(st, &Options{KeyPath: key}); err == nil || !strings.Contains(err.Error(), "is missing") {
			t.Fatalf("New without the head file, not shared: %v", err)
		}
		if _, err := New(st, &Options{KeyPath: key, SharedStore: true}); err != nil {
			t.Fatal(err)
		}
		if head, ok, err := readHead(HeadPath(key)); !ok || err != nil || head.TreeSize != 5 {
			t.Fatalf("the replica's head file: %+v %v %v", head, ok, err)
		}
	})
	t.Run("a head file that is not signed", func(t *testing.T) {
		st, key := fiveRecords(t)
		b, _ := os.ReadFile(HeadPath(key))
		os.WriteFile(HeadPath(key), []byte(strings.Replace(string(b), `"tree_size":5`, `"tree_size":4`, 1)), 0o600)
		if _, err := New(st, &Options{KeyPath: key}); err == nil || !strings.Contains(err.Error(), "does not hold a validly signed checkpoint") {
			t.Fatalf("New with a forged head: %v", err)
		}
	})
	t.Run("a head file ahead of the database", func(t *testing.T) {
		st, key := fiveRecords(t)
		f := &forged{Store: st, size: func(n int64) int64 { return n - 2 },
			latest: func(ck store.LedgerCheckpoint) (store.LedgerCheckpoint, bool) {
				cks, _ := st.LedgerCheckpoints(ctx, 2, 1)
				return cks[0], true
			}}
		f.cks = func(cks []store.LedgerCheckpoint) []store.LedgerCheckpoint { return cks[:3] }
		f.recs = func(recs []store.LedgerRecord) []store.LedgerRecord {
			return slices.DeleteFunc(slices.Clone(recs), func(r store.LedgerRecord) bool { return r.Seq > 3 })
		}
		_, err := New(f, &Options{KeyPath: key})
		var te *TamperError
		if !errors.As(err, &te) || te.Seq != 4 || !strings.Contains(err.Error(), "the head file records a tree of 5 records, the database holds 3") {
			t.Fatalf("New with the head ahead: %v", err)
		}
	})
	t.Run("the head's checkpoint missing or rewritten", func(t *testing.T) {
		st, key := fiveRecords(t)
		old, _ := st.LedgerCheckpoints(ctx, 2, 1)
		svc := newService(t, st, &Options{KeyPath: key})
		dispatchN(t, svc, 10, 1)
		// The head file of another replica, at 3.
		if err := writeHead(HeadPath(key), wireCheckpoint(DefaultOrigin, old[0])); err != nil {
			t.Fatal(err)
		}
		if _, err := New(&forged{Store: st, cks: dropCk(3)}, &Options{KeyPath: key}); err == nil || !strings.Contains(err.Error(), "the checkpoint of tree size 3 recorded in the head file is missing") {
			t.Fatalf("New without the head's checkpoint: %v", err)
		}
		other := editCk(3, func(ck *store.LedgerCheckpoint) { ck.RootHash = strings.Repeat("0", 64) })
		if _, err := New(&forged{Store: st, cks: other}, &Options{KeyPath: key}); err == nil || !strings.Contains(err.Error(), "the ledger was rewritten") {
			t.Fatalf("New with the head's checkpoint rewritten: %v", err)
		}
	})
	t.Run("a newest checkpoint not validly signed", func(t *testing.T) {
		st, key := fiveRecords(t)
		f := &forged{Store: st, latest: func(ck store.LedgerCheckpoint) (store.LedgerCheckpoint, bool) {
			ck.RootHash = strings.Repeat("0", 64)
			return ck, true
		}}
		if _, err := New(f, &Options{KeyPath: key}); err == nil || !strings.Contains(err.Error(), "is not validly signed") {
			t.Fatalf("New with a forged newest checkpoint: %v", err)
		}
	})
}

// The upgrade of an earlier release's ledger refuses gaps.
func TestUpgradeRefusesGaps(t *testing.T) {
	for _, c := range []struct {
		drop func(int64) bool
		want string
	}{
		{func(q int64) bool { return q == 2 }, "record seq 2: is missing from the ledger being upgraded (the next record stored has seq 3)"},
		{func(q int64) bool { return q >= 2 }, "record seq 2: is missing from the ledger being upgraded (it ends at 1)"},
	} {
		legacy := legacyLedger(t, 3)
		f := &forged{Store: legacy, recs: func(recs []store.LedgerRecord) []store.LedgerRecord {
			return slices.DeleteFunc(slices.Clone(recs), func(r store.LedgerRecord) bool { return c.drop(r.Seq) })
		}}
		if _, err := New(f, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("New = %v, want %q", err, c.want)
		}
	}
}
