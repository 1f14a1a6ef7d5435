package memstore_test

import (
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/storetest"
)

func openBench(b *testing.B) store.Store { return memstore.New() }

// BenchmarkCommitRun: see storetest.BenchmarkCommitRun.
func BenchmarkCommitRun(b *testing.B) { storetest.BenchmarkCommitRun(b, openBench) }

// BenchmarkGetRun: see storetest.BenchmarkGetRun.
func BenchmarkGetRun(b *testing.B) { storetest.BenchmarkGetRun(b, openBench) }
