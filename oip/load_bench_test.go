package oip

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/asmp-dev/asmp/store/memstore"
)

// BenchmarkLoad measures New over a ledger of 100,000 records: reading
// them in pages and rebuilding the tree from their canonical JSON.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	svc := newService(b, st, nil)
	for i := range 100_000 {
		if _, err := svc.Dispatch(ctx, fmt.Sprint("k", i%5000), json.RawMessage(simpleRow)); err != nil {
			b.Fatal(err)
		}
	}
	want, _ := svc.Checkpoint(ctx)
	b.ResetTimer()
	for b.Loop() {
		s2, err := New(st, nil)
		if err != nil {
			b.Fatal(err)
		}
		if got, _ := s2.Checkpoint(ctx); got.RootHash != want.RootHash {
			b.Fatal("root differs")
		}
	}
}
