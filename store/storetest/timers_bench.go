package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// BenchmarkCommitWithTimers measures what pending timers cost a transition
// (SPEC section 17: a store holding 1,000,000 pending timers commits at
// least 0.95 of the transitions per second of one holding none). It opens
// two stores, stores pending timers (far from due, 1,000 per run) in one
// of them, and then commits, alternately on each store, a transition
// that enters a state with a timer (replacing its run's): so both stores
// do the same work but for the timers already stored, and both are
// measured in one run, under the same load. It reports each store's
// nanoseconds per commit and ratio, the throughput of the store with
// timers over that of the store without (1 when they cost nothing).
//
// Each backend calls it with the number of pending timers from its
// -timers flag:
//
//	go test -run '^$' -bench CommitWithTimers -timers 1000000 ./store/sqlite/
func BenchmarkCommitWithTimers(b *testing.B, openBench func(*testing.B) store.Store, pending int) {
	ctx := context.Background()
	none, with := openBench(b), openBench(b)
	defer none.Close()
	defer with.Close()
	const perRun = 1000
	far := benchT0.Add(365 * 24 * time.Hour)
	for i := 0; i*perRun < pending; i++ {
		c := benchCreateCommit(fmt.Sprintf("pending-%07d", i))
		for j := 0; j < perRun && i*perRun+j < pending; j++ {
			c.Timers = append(c.Timers, store.Timer{Action: fmt.Sprintf("t%04d", j), DueAt: far.Add(time.Duration(i*perRun+j) * time.Millisecond)})
		}
		if err := with.CreateRun(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	runs := [2]store.Run{benchCreate(b, none, "hot"), benchCreate(b, with, "hot")}
	stores := [2]store.Store{none, with}
	var spent [2]time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for k := range 2 {
			k := (k + i) % 2 // alternate which store goes first
			r := runs[k]
			c := tick(r)
			c.ReplaceTimers = true
			c.Timers = []store.Timer{{Action: "escalate", DueAt: c.Run.UpdatedAt.Add(time.Hour)}}
			start := time.Now()
			if err := stores[k].CommitRun(ctx, r.Version, c).Wait(); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(start)
			runs[k] = c.Run
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "ns/commit-none")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "ns/commit-pending")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "ratio")
	b.ReportMetric(float64(pending), "pending")
}

// benchCreateCommit is the first commit of benchCreate's run.
func benchCreateCommit(id string) store.Commit {
	r := store.Run{ID: id, WorkflowID: "loop-v1", Version: 1, CreatedAt: benchT0, UpdatedAt: benchT0}
	r.State, r.Data = "LOOP", []byte(`{"value":"x"}`)
	return store.Commit{Run: r, Event: store.Event{RunID: id, Seq: 1, Time: benchT0, Kind: store.EventCreated, To: "LOOP", Actor: "bench", Snapshot: r.Snapshot}}
}
