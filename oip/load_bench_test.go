package oip

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/asmp-dev/asmp/store/memstore"
)

// BenchmarkLoad measures New over a ledger of 100,000 records, as a
// server starts: the checks of its newest checkpoint and of the records
// added since the last full check (the full pass runs after it, in the
// background, and is measured by BenchmarkCheck).
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	opts := &Options{KeyPath: filepath.Join(b.TempDir(), "ledger.key")}
	svc := newService(b, st, opts)
	for i := range 100_000 {
		if _, err := svc.Dispatch(ctx, fmt.Sprint("k", i%5000), json.RawMessage(simpleRow)); err != nil {
			b.Fatal(err)
		}
	}
	want, _ := svc.Checkpoint(ctx)
	b.ResetTimer()
	for b.Loop() {
		s2, err := New(st, opts)
		if err != nil {
			b.Fatal(err)
		}
		if got, _ := s2.Checkpoint(ctx); got.RootHash != want.RootHash {
			b.Fatal("root differs")
		}
	}
}

// BenchmarkReadBeforeFullPass measures the read of an old record before
// the background pass has built the tree: each read proves the record's
// batch to its signed checkpoints (two signature checks, three indexed
// reads), with nothing remembered between reads.
func BenchmarkReadBeforeFullPass(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	opts := &Options{KeyPath: filepath.Join(b.TempDir(), "ledger.key")}
	svc := newService(b, st, opts)
	for i := range 10_000 {
		if _, err := svc.Dispatch(ctx, fmt.Sprint("k", i), json.RawMessage(simpleRow)); err != nil {
			b.Fatal(err)
		}
	}
	newService(b, st, opts) // checks all: the next start checks none
	s2 := newService(b, st, opts)
	i := 0
	for b.Loop() {
		s2.mu.Lock()
		s2.known = nil
		s2.mu.Unlock()
		s2.provedMu.Lock()
		s2.provedCks = nil
		s2.provedMu.Unlock()
		if _, err := s2.Latest(ctx, fmt.Sprint("k", i%10_000)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if s2.Ready() {
		b.Fatal("the full pass ran")
	}
}
