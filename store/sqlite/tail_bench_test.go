package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/sqlite"
)

// BenchmarkCommitTail: 64 goroutines each ticking its own run, as the
// transition workload does, reporting the latency of each commit (p50,
// p99, max) and of the groups' COMMIT (p99, max, and how many took longer
// than 20 ms): where the SQLite tail comes from. The "noautocheckpoint"
// case turns SQLite's automatic WAL checkpoint off (the WAL then grows for
// the benchmark's length), to tell the checkpoints' share of the tail.
// Performance is never asserted; this is for profiling (bench/OPTIMISATION_LOG.md).
func BenchmarkCommitTail(b *testing.B) {
	for _, tc := range []struct{ name, pragma string }{{"default", ""}, {"noautocheckpoint", "wal_autocheckpoint=0"}} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "tail.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if tc.pragma != "" {
				sqlite.Pragma(b, s, tc.pragma)
			}
			var mu sync.Mutex
			var commits []time.Duration
			sqlite.OnCommit(s, func(n int, d time.Duration) {
				mu.Lock()
				commits = append(commits, d)
				mu.Unlock()
			})
			const workers = 64
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			data := json.RawMessage(`{"value":"` + fmt.Sprintf("%0400d", 0) + `"}`)
			runs := make([]store.Run, workers)
			for i := range runs {
				snap := store.Snapshot{State: "LOOP", Data: data}
				c := store.Commit{
					Run:   store.Run{ID: fmt.Sprintf("tail-%d", i), WorkflowID: "loop-v1", Snapshot: snap, Version: 1, CreatedAt: t0, UpdatedAt: t0},
					Event: store.Event{RunID: fmt.Sprintf("tail-%d", i), Seq: 1, Time: t0, Kind: store.EventCreated, To: "LOOP", Actor: "bench", Snapshot: snap},
				}
				if err := s.CreateRun(context.Background(), c); err != nil {
					b.Fatal(err)
				}
				runs[i] = c.Run
			}
			lat := make([][]time.Duration, workers)
			per := b.N/workers + 1
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := runs[w]
					for range per {
						n := r
						n.Version++
						n.UpdatedAt = r.UpdatedAt.Add(time.Millisecond)
						c := store.Commit{Run: n, Event: store.Event{RunID: r.ID, Seq: n.Version, Time: n.UpdatedAt,
							Kind: store.EventTransition, Action: "tick", From: "LOOP", To: "LOOP", Actor: "bench", Snapshot: n.Snapshot}}
						start := time.Now()
						if err := s.CommitRun(context.Background(), r.Version, c).Wait(); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(start))
						r = n
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			all := slices.Concat(lat...)
			pct := func(xs []time.Duration, p float64) float64 {
				if len(xs) == 0 {
					return 0
				}
				slices.Sort(xs)
				return float64(xs[int(float64(len(xs)-1)*p)].Microseconds()) / 1000
			}
			b.ReportMetric(pct(all, 0.5), "p50-ms")
			b.ReportMetric(pct(all, 0.99), "p99-ms")
			b.ReportMetric(pct(all, 1), "max-ms")
			mu.Lock()
			slow := 0
			for _, d := range commits {
				if d > 20*time.Millisecond {
					slow++
				}
			}
			b.ReportMetric(pct(commits, 0.99), "commit-p99-ms")
			b.ReportMetric(pct(commits, 1), "commit-max-ms")
			b.ReportMetric(float64(slow), "commits>20ms")
			b.ReportMetric(float64(len(all))/float64(max(len(commits), 1)), "per-group")
			mu.Unlock()
		})
	}
}
