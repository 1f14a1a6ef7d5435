package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
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

// BenchmarkCommitWAL reports what one transition writes to Postgres: WAL
// bytes per commit (pg_current_wal_lsn before and after, so other
// databases' writes on the server count too: run it on a quiet server) and
// the growth of the runs and events tables with their indexes, for 64
// runs ticked round-robin by 64 goroutines (groups of up to 64 commits).
// docs/SCALING.md's write-load model is built from these figures.
func BenchmarkCommitWAL(b *testing.B) {
	u := os.Getenv("ASMP_TEST_POSTGRES")
	s := openBench(b).(*postgres.Store)
	defer s.Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	const workers = 64
	runs := make([]store.Run, workers)
	for i := range runs {
		c := storetest.NewRun(fmt.Sprintf("wal-%d", i))
		c.Run.Data = json.RawMessage(`{"value":"` + strings.Repeat("x", 200) + `"}`)
		c.Event.Data = c.Run.Data
		if err := s.CreateRun(ctx, c); err != nil {
			b.Fatal(err)
		}
		runs[i] = c.Run
	}
	size := func() (wal string, rel int64) {
		q := `SELECT pg_current_wal_lsn()::text, pg_total_relation_size($1::regclass) + pg_total_relation_size($2::regclass)`
		if err := conn.QueryRow(ctx, q, s.Schema()+".runs", s.Schema()+".events").Scan(&wal, &rel); err != nil {
			b.Fatal(err)
		}
		return wal, rel
	}
	wal0, rel0 := size()
	per := b.N/workers + 1
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := runs[w]
			for range per {
				n := r // a self-loop that keeps the data, as bench/loop-v1.yaml's tick
				n.Version++
				n.UpdatedAt = r.UpdatedAt.Add(time.Millisecond)
				c := store.Commit{Run: n, Event: store.Event{RunID: r.ID, Seq: n.Version, Time: n.UpdatedAt,
					Kind: store.EventTransition, Action: "tick", From: r.State, To: r.State, Actor: "bench", Snapshot: n.Snapshot}}
				if err := s.CommitRun(ctx, r.Version, c).Wait(); err != nil {
					b.Error(err)
					return
				}
				r = c.Run
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	wal1, rel1 := size()
	var walBytes int64
	if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint`, wal1, wal0).Scan(&walBytes); err != nil {
		b.Fatal(err)
	}
	n := float64(per * workers)
	st := s.CommitStats()
	b.ReportMetric(float64(walBytes)/n, "WAL-B/commit")
	b.ReportMetric(float64(rel1-rel0)/n, "table-B/commit")
	b.ReportMetric(float64(st.Commits)/float64(max(st.Groups, 1)), "commits/group")
}
