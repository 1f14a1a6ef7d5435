package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/storetest"
)

// openBench opens a store on a fresh schema of ASMP_TEST_POSTGRES, dropped
// when the benchmark ends; the benchmark is skipped without it.
func openBench(b *testing.B) store.Store {
	u := os.Getenv("ASMP_TEST_POSTGRES")
	if u == "" {
		b.Skip("ASMP_TEST_POSTGRES is not set")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := "asmp_bench_" + hex.EncodeToString(rnd[:])
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, u); err == nil {
			_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
			conn.Close(ctx)
		}
	})
	s, err := postgres.Open(context.Background(), u, &postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if st := s.CommitStats(); st.Groups > 0 {
			b.Logf("%d commits in %d groups (%.1f per group)", st.Commits, st.Groups, float64(st.Commits)/float64(st.Groups))
		}
	})
	return s
}

// BenchmarkCommitRun: see storetest.BenchmarkCommitRun.
func BenchmarkCommitRun(b *testing.B) { storetest.BenchmarkCommitRun(b, openBench) }
