package oip

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/asmp-dev/asmp/store/memstore"
)

const benchLeaves = 1_000_000

var (
	benchOnce sync.Once
	benchTree *tree
)

// millionTree is a tree of 1,000,000 synthetic leaf hashes, built once.
func millionTree() *tree {
	benchOnce.Do(func() { benchTree = buildTree(benchLeaves) })
	return benchTree
}

// BenchmarkAppend measures appending one leaf to a tree that already
// holds a million (tree), and one whole dispatch through the Service:
// validation, canonical JSON, the store's append and the tree update.
func BenchmarkAppend(b *testing.B) {
	b.Run("tree/1M", func(b *testing.B) {
		t := buildTree(benchLeaves)
		i := uint64(benchLeaves)
		b.ResetTimer()
		for b.Loop() {
			t.append(testLeaf(i))
			i++
		}
	})
	body := json.RawMessage(simpleRow)
	b.Run("dispatch/memstore", func(b *testing.B) {
		svc := newService(b, memstore.New(), nil)
		ctx := context.Background()
		i := 0
		for b.Loop() {
			if _, err := svc.Dispatch(ctx, fmt.Sprint("k", i%1000), body); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("dispatch/sqlite", func(b *testing.B) {
		svc := newService(b, openSQLite(b, filepath.Join(b.TempDir(), "x.db")), nil)
		ctx := context.Background()
		i := 0
		for b.Loop() {
			if _, err := svc.Dispatch(ctx, fmt.Sprint("k", i%1000), body); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkProof measures inclusion proofs for random leaves, consistency
// proofs between random sizes, and roots, all in a tree of a million
// leaves; and a whole Service.Proof (store read, catch-up check, proof,
// cached checkpoint) on a ledger of 10,000 records.
func BenchmarkProof(b *testing.B) {
	t := millionTree()
	rng := rand.New(rand.NewPCG(1, 2))
	b.Run("inclusion/1M", func(b *testing.B) {
		for b.Loop() {
			if _, err := t.inclusion(rng.Uint64N(benchLeaves), benchLeaves); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inclusion-old-size/1M", func(b *testing.B) {
		for b.Loop() {
			size := 1 + rng.Uint64N(benchLeaves)
			if _, err := t.inclusion(rng.Uint64N(size), size); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("consistency/1M", func(b *testing.B) {
		for b.Loop() {
			from := 1 + rng.Uint64N(benchLeaves)
			if _, err := t.consistency(from, benchLeaves); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("root/1M", func(b *testing.B) {
		for b.Loop() {
			if _, err := t.root(benchLeaves - 1 - rng.Uint64N(1000)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("service/10k", func(b *testing.B) {
		ctx := context.Background()
		svc := newService(b, memstore.New(), nil)
		ids := make([]string, 10_000)
		for i := range ids {
			rc, err := svc.Dispatch(ctx, fmt.Sprint("k", i), json.RawMessage(simpleRow))
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = rc.InvID
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := svc.Proof(ctx, ids[rng.IntN(len(ids))], 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheck measures the full pass over a ledger (what the
// background check after start and `asmp ledger check` do): one record
// against its leaf, and Check over 10,000 records; ns/record is the cost
// per record.
func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	svc := newService(b, st, nil)
	const n = 10_000
	for i := range n {
		if _, err := svc.Dispatch(ctx, fmt.Sprint("k", i%1000), json.RawMessage(simpleRow)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("record", func(b *testing.B) {
		recs, err := st.LedgerRange(ctx, 1, 2)
		if err != nil || len(recs) != 1 {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := checkRecord(recs[0], 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ledger/10k", func(b *testing.B) {
		for b.Loop() {
			rep, err := Check(ctx, st, nil)
			if err != nil || rep.Records != n {
				b.Fatal(rep, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
	})
	// As a server under load writes its ledger: SQLite group commits, one
	// signed checkpoint per batch (the checkpoints' signatures are checked
	// once per batch, the records one by one).
	b.Run("ledger/10k-group-commit/sqlite", func(b *testing.B) {
		sq := openSQLite(b, filepath.Join(b.TempDir(), "x.db"))
		svc := newService(b, sq, nil)
		var wg sync.WaitGroup
		for w := range 64 {
			wg.Go(func() {
				for i := w; i < n; i += 64 {
					if _, err := svc.Dispatch(ctx, fmt.Sprint("k", i%1000), json.RawMessage(simpleRow)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		cks, _ := sq.LedgerCheckpoints(ctx, 0, 0)
		b.ResetTimer()
		for b.Loop() {
			rep, err := Check(ctx, sq, nil)
			if err != nil || rep.Records != n {
				b.Fatal(rep, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		b.ReportMetric(float64(n)/float64(len(cks)), "records/checkpoint")
	})
}
