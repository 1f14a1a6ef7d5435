package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/workflow"
)

// BenchmarkTimerFiring fires b.N timers, one per run, all due at once,
// with the engine's FireDueTimers (the timer loop's claims and firings,
// default TimerOptions) on a new database, with the writer's page cache
// at SQLite's default (2 MiB) and at 64 MiB. Besides the time per timer
// it reports counts that do not depend on the machine's load: the pages
// the writer's connection found in its cache, read from the file and
// wrote, per timer. The runs are stored first, outside the timing.
func BenchmarkTimerFiring(b *testing.B) {
	for _, tc := range []struct{ name, pragma string }{{"cache=default", ""}, {"cache=64MiB", "cache_size = -65536"}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "firing.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if tc.pragma != "" {
				sqlite.Pragma(b, s, tc.pragma)
			}
			wb := workflow.New("due-v1", "WAIT")
			wb.State("WAIT").After(time.Minute, "done")
			wb.State("DONE")
			wb.Transition("WAIT", "done", "DONE")
			fc := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
			e, err := engine.New(s, []*workflow.Definition{wb.MustBuild()}, &engine.Options{Clock: fc})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			const writers = 64
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += writers {
						if _, err := e.StartRun(ctx, "due-v1", nil, engine.StartOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			fc.Advance(2 * time.Minute)
			st0, cpu0 := sqlite.WriterStatus(b, s), cpuTime()
			b.ResetTimer()
			for fired := 0; fired < b.N; {
				n, err := e.FireDueTimers(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if n == 0 {
					b.Fatalf("%d of %d timers fired, none left due", fired, b.N)
				}
				fired += n
			}
			b.StopTimer()
			st1, cpu1 := sqlite.WriterStatus(b, s), cpuTime()
			n := float64(b.N)
			b.ReportMetric(float64(st1.Hit-st0.Hit)/n, "page-hits/op")
			b.ReportMetric(float64(st1.Miss-st0.Miss)/n, "page-misses/op")
			b.ReportMetric(float64(st1.Write-st0.Write)/n, "pages-written/op")
			b.ReportMetric(float64(cpu1-cpu0)/n, "cpu-ns/op")
		})
	}
}
