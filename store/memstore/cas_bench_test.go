package memstore_test

import (
	"flag"
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

var pendingTimers = flag.Int("timers", 100_000, "pending timers stored for BenchmarkCommitWithTimers (the target is 1,000,000)")

// BenchmarkCommitWithTimers: see storetest.BenchmarkCommitWithTimers.
func BenchmarkCommitWithTimers(b *testing.B) {
	storetest.BenchmarkCommitWithTimers(b, openBench, *pendingTimers)
}

// BenchmarkCommitWithOutbox: see storetest.BenchmarkCommitWithOutbox.
func BenchmarkCommitWithOutbox(b *testing.B) { storetest.BenchmarkCommitWithOutbox(b, openBench) }

var waitingTasks = flag.Int("waiting-tasks", 10_000, "tasks waiting out a retry's backoff stored for BenchmarkClaimTask")

// BenchmarkClaimTask: see storetest.BenchmarkClaimTask.
func BenchmarkClaimTask(b *testing.B) {
	storetest.BenchmarkClaimTask(b, openBench, *waitingTasks)
}
