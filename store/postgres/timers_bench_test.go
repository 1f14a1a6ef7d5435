package postgres_test

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/storetest"
)

var pendingTimers = flag.Int("timers", 100_000, "pending timers stored for BenchmarkCommitWithTimers (the target is 1,000,000)")

// BenchmarkCommitWithTimers: see storetest.BenchmarkCommitWithTimers. Each
// store's tables are vacuumed and analysed once loaded (VACUUM ANALYZE), as
// autovacuum would have done on a server that has held them for a while:
// otherwise its vacuum of the million new timers runs during the
// measurement, on the same two cores.
func BenchmarkCommitWithTimers(b *testing.B) {
	storetest.BenchmarkCommitWithTimers(b, openBench, *pendingTimers, vacuum)
}

// vacuum runs VACUUM ANALYZE on the tables of s (a *postgres.Store).
func vacuum(b *testing.B, s store.Store) {
	ps := s.(*postgres.Store)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("ASMP_TEST_POSTGRES"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"runs", "events", "timers"} {
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{postgres.SchemaOf(ps), table}.Sanitize()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitWithOutbox: see storetest.BenchmarkCommitWithOutbox.
func BenchmarkCommitWithOutbox(b *testing.B) { storetest.BenchmarkCommitWithOutbox(b, openBench) }

var waitingTasks = flag.Int("waiting-tasks", 10_000, "tasks waiting out a retry's backoff stored for BenchmarkClaimTask")

// BenchmarkClaimTask: see storetest.BenchmarkClaimTask.
func BenchmarkClaimTask(b *testing.B) {
	storetest.BenchmarkClaimTask(b, openBench, *waitingTasks, vacuum)
}
