package engine_test

import (
	"context"
	"flag"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

var (
	delayRuns = flag.Int("delay-runs", 10_000, "runs of BenchmarkTimerFiringDelay, each with a timer due within the same second")
	delayLead = flag.Duration("delay-lead", 20*time.Second, "how long after BenchmarkTimerFiringDelay starts storing its runs their timers fall due (storing them must take less)")
	delayOpts = engine.TimerOptions{}
)

func init() {
	flag.IntVar(&delayOpts.Batch, "delay-batch", 0, "TimerOptions.Batch of BenchmarkTimerFiringDelay (0: the default)")
	flag.IntVar(&delayOpts.Concurrency, "delay-concurrency", 0, "TimerOptions.Concurrency of BenchmarkTimerFiringDelay (0: the default)")
}

// BenchmarkTimerFiringDelay measures how late the timer loop fires timers
// (SPEC section 17; the target is a p99 under 1 s): on each backend
// (memory, sqlite, and postgres with ASMP_TEST_POSTGRES) it stores
// -delay-runs runs whose timers fall due spread evenly over one second,
// -delay-lead after it started storing them, starts the engine's timer
// loop (StartTimers with its default options unless -delay-batch or
// -delay-concurrency say otherwise, on the real clock) once
// they are stored, waits until every timer has fired and reports, for
// each, fired-at (its transition's event time) minus due-at: mean, p99
// and max in milliseconds. Run it once:
//
//	go test -run '^$' -bench TimerFiringDelay/sqlite -benchtime 1x ./engine/
func BenchmarkTimerFiringDelay(b *testing.B) {
	for _, be := range backends.All() {
		b.Run(be.Name, func(b *testing.B) {
			for range b.N {
				delays := timerDelays(b, be.New(b).Open(b), *delayRuns, *delayLead)
				mean, p99, worst := delayStats(delays)
				b.ReportMetric(mean, "mean-ms")
				b.ReportMetric(p99, "p99-ms")
				b.ReportMetric(worst, "max-ms")
				b.ReportMetric(float64(len(delays)), "timers")
			}
		})
	}
}

// dueFlow is a run waiting for its deadline (data.due_at), which fires
// done.
func dueFlow(b testing.TB) *workflow.Definition {
	wb := workflow.New("due-v1", "WAIT")
	wb.State("WAIT").At("data.due_at", "done")
	wb.State("DONE")
	wb.Transition("WAIT", "done", "DONE")
	d, err := wb.Build()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// timerDelays stores n runs on st whose timers fall due within one second,
// lead from now, fires them with the timer loop and returns each one's
// delay after its due time.
func timerDelays(b testing.TB, st store.Store, n int, lead time.Duration) []time.Duration {
	ctx := context.Background()
	eng, err := engine.New(st, []*workflow.Definition{dueFlow(b)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	due0 := time.Now().Add(lead).Truncate(time.Second)
	dueAt := func(i int) time.Time { return due0.Add(time.Duration(i) * time.Second / time.Duration(n)) }
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	const writers = 64 // concurrent commits share the store's group commits
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				r, err := eng.StartRun(ctx, "due-v1", map[string]any{"due_at": dueAt(i).Format(time.RFC3339Nano)}, engine.StartOptions{Actor: "bench"})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				ids[i] = r.ID
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	if left := time.Until(due0); left < 500*time.Millisecond {
		b.Fatalf("storing %d runs ended %s before their timers fell due; raise -delay-lead (now %s)", n, left, lead)
	}
	o := delayOpts
	loop := eng.StartTimers(&o)
	defer loop.Stop()
	for deadline := due0.Add(lead + time.Minute); ; {
		_, pending, err := st.NextTimerDue(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if !pending {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("timers still pending a minute after the last one fell due")
		}
		time.Sleep(50 * time.Millisecond)
	}
	delays := make([]time.Duration, n)
	for i, id := range ids {
		evs, err := eng.Events(ctx, id, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		last := evs[len(evs)-1]
		if last.Actor != engine.ActorTimer || last.To != "DONE" {
			b.Fatalf("run %s: last event %+v, want the timer's done", id, last)
		}
		delays[i] = last.Time.Sub(dueAt(i))
	}
	return delays
}

// delayStats returns the mean, 99th percentile and largest of ds, in
// milliseconds.
func delayStats(ds []time.Duration) (mean, p99, worst float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	i := int(math.Ceil(0.99*float64(len(s)))) - 1
	return ms(sum / time.Duration(len(s))), ms(s[i]), ms(s[len(s)-1])
}
