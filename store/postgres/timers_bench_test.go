package postgres_test

import (
	"flag"
	"testing"

	"github.com/asmp-dev/asmp/store/storetest"
)

var pendingTimers = flag.Int("timers", 100_000, "pending timers stored for BenchmarkCommitWithTimers (the target is 1,000,000)")

// BenchmarkCommitWithTimers: see storetest.BenchmarkCommitWithTimers.
func BenchmarkCommitWithTimers(b *testing.B) {
	storetest.BenchmarkCommitWithTimers(b, openBench, *pendingTimers)
}

// BenchmarkCommitWithOutbox: see storetest.BenchmarkCommitWithOutbox.
func BenchmarkCommitWithOutbox(b *testing.B) { storetest.BenchmarkCommitWithOutbox(b, openBench) }
