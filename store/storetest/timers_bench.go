package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// BenchmarkCommitWithTimers measures what pending timers cost a transition
// (SPEC section 17: a store holding 1,000,000 pending timers commits at
// least 0.95 of the transitions per second of one holding none). It opens
// three stores: "pending", holding pending timers (far from due, 1,000 per
// run); "none", holding the same runs without their timers; and "empty",
// holding no other run. Then it commits, in turn on each store, a
// transition that enters a state with a timer (replacing its run's): so
// the stores do the same work but for what they hold, and all are measured
// in one run, under the same load. It reports each store's nanoseconds per
// commit and two ratios of throughput: ratio, of "pending" over "none"
// (what the timers cost: 1 when they cost nothing), the target's; and
// ratio-empty, of "pending" over "empty" (what the timers and their 1,000
// runs cost together, the figure this benchmark reported before the store
// without timers held the same runs). On a shared machine a stall (a
// preemption, a slow fsync, a log's copy as it grows) lands on one store's
// commit and moves ratio, a ratio of sums; ratio-median, the ratio of the
// stores' median times over blocks of 32 commits each, is that ratio
// without the stalls.
//
// settle, when given, is called on each store once the timers and runs
// are stored and before anything is measured: a backend whose database
// cleans up after a bulk load in the background (Postgres's autovacuum of
// the million new rows) does that cleaning there, so the measurement is of
// a server that has held its timers for a while, not of one busy with the
// load it just took.
//
// Each backend calls it with the number of pending timers from its
// -timers flag:
//
//	go test -run '^$' -bench CommitWithTimers -timers 1000000 ./store/sqlite/
func BenchmarkCommitWithTimers(b *testing.B, openBench func(*testing.B) store.Store, pending int, settle ...func(*testing.B, store.Store)) {
	ctx := context.Background()
	stores := [3]store.Store{openBench(b), openBench(b), openBench(b)} // none, pending, empty
	for _, s := range stores {
		defer s.Close()
	}
	const perRun = 1000
	far := benchT0.Add(365 * 24 * time.Hour)
	for i := 0; i*perRun < pending; i++ {
		c := benchCreateCommit(fmt.Sprintf("pending-%07d", i))
		if err := stores[0].CreateRun(ctx, c); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < perRun && i*perRun+j < pending; j++ {
			c.Timers = append(c.Timers, store.Timer{Action: fmt.Sprintf("t%04d", j), DueAt: far.Add(time.Duration(i*perRun+j) * time.Millisecond)})
		}
		if err := stores[1].CreateRun(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	for _, fn := range settle {
		for _, s := range stores {
			fn(b, s)
		}
	}
	var runs [3]store.Run
	for k, s := range stores {
		runs[k] = benchCreate(b, s, "hot")
	}
	var spent, block [3]time.Duration
	var blocks [3][]time.Duration
	const perBlock = 32
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%perBlock == 0 {
			for k := range 3 {
				blocks[k] = append(blocks[k], block[k])
				block[k] = 0
			}
		}
		for k := range 3 {
			k := (k + i) % 3 // rotate which store goes first
			r := runs[k]
			c := tick(r)
			c.ReplaceTimers = true
			c.Timers = []store.Timer{{Action: "escalate", DueAt: c.Run.UpdatedAt.Add(time.Hour)}}
			start := time.Now()
			if err := stores[k].CommitRun(ctx, r.Version, c).Wait(); err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			spent[k] += d
			block[k] += d
			runs[k] = c.Run
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[2].Nanoseconds())/n, "ns/commit-empty")
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "ns/commit-none")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "ns/commit-pending")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "ratio")
	b.ReportMetric(float64(spent[2])/float64(spent[1]), "ratio-empty")
	if len(blocks[0]) > 0 {
		med := func(ds []time.Duration) float64 {
			s := slices.Clone(ds)
			slices.Sort(s)
			return float64(s[len(s)/2])
		}
		b.ReportMetric(med(blocks[0])/med(blocks[1]), "ratio-median")
	}
	b.ReportMetric(float64(pending), "pending")
}

// benchCreateCommit is the first commit of benchCreate's run.
func benchCreateCommit(id string) store.Commit {
	r := store.Run{ID: id, WorkflowID: "loop-v1", Version: 1, CreatedAt: benchT0, UpdatedAt: benchT0}
	r.State, r.Data = "LOOP", []byte(`{"value":"x"}`)
	return store.Commit{Run: r, Event: store.Event{RunID: id, Seq: 1, Time: benchT0, Kind: store.EventCreated, To: "LOOP", Actor: "bench", Snapshot: r.Snapshot}}
}
