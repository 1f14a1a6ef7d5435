package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/store/storetest"
)

func openBench(b *testing.B) store.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCommitRun: see storetest.BenchmarkCommitRun.
func BenchmarkCommitRun(b *testing.B) { storetest.BenchmarkCommitRun(b, openBench) }

// BenchmarkGetRun: see storetest.BenchmarkGetRun.
func BenchmarkGetRun(b *testing.B) { storetest.BenchmarkGetRun(b, openBench) }
