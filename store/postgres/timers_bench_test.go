package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/storetest"
)

var pendingTimers = flag.Int("timers", 100_000, "pending timers stored for BenchmarkCommitWithTimers (the target is 1,000,000)")

// openBench opens a store on a new schema of ASMP_TEST_POSTGRES, dropped
// when the benchmark ends.
func openBench(b *testing.B) store.Store {
	u := os.Getenv("ASMP_TEST_POSTGRES")
	if u == "" {
		b.Skip("ASMP_TEST_POSTGRES is not set")
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema := "asmp_bench_" + hex.EncodeToString(r[:])
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if conn, err := pgx.Connect(ctx, u); err == nil {
			_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
			_ = conn.Close(ctx)
		}
	})
	s, err := postgres.Open(context.Background(), u, &postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCommitWithTimers: see storetest.BenchmarkCommitWithTimers.
func BenchmarkCommitWithTimers(b *testing.B) {
	storetest.BenchmarkCommitWithTimers(b, openBench, *pendingTimers)
}
