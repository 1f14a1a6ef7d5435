package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// BenchmarkClaimTask measures what tasks waiting out a retry's backoff
// cost a claim: two stores made by openBench, one holding waiting tasks
// (each of its own run, pending with a NotBefore far ahead, created before
// every other task), one holding none. Each iteration, on each store in
// turn, commits a new run with a fresh task, claims it (the one claimable
// task) and finishes it. It reports each store's nanoseconds per claim and
// ratio, the claim throughput of the store with the waiting tasks over that
// of the store without (1 when they cost a claim nothing). A claim that
// walks the open tasks in creation order reads every waiting task first.
//
// settle, when given, is called on each store once loaded (see
// BenchmarkCommitWithTimers). Each backend calls it with the number of waiting tasks from its
// -waiting-tasks flag:
//
//	go test -run '^$' -bench ClaimTask -waiting-tasks 100000 ./store/sqlite/
func BenchmarkClaimTask(b *testing.B, openBench func(*testing.B) store.Store, waiting int, settle ...func(*testing.B, store.Store)) {
	ctx := context.Background()
	stores := [2]store.Store{openBench(b), openBench(b)} // none, waiting
	for _, s := range stores {
		defer s.Close()
	}
	far := benchT0.Add(365 * 24 * time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	const writers = 64 // concurrent commits share a store's group commits
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < waiting; i += writers {
				c := benchCreateCommit(fmt.Sprintf("waiting-%07d", i))
				c.Enqueue = &store.Task{ID: c.Run.ID + ".2", RunID: c.Run.ID, State: "LOOP", Version: 1, Status: store.TaskPending,
					CreatedAt: benchT0, UpdatedAt: benchT0, Attempt: 2, NotBefore: far}
				if err := stores[1].CreateRun(ctx, c); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	for _, fn := range settle { // as BenchmarkCommitWithTimers' settle
		for _, s := range stores {
			fn(b, s)
		}
	}
	now := benchT0.Add(2 * time.Hour)
	var spent [2]time.Duration
	for i := 0; b.Loop(); i++ {
		for k := range 2 {
			k := (k + i) % 2 // alternate which store goes first
			s := stores[k]
			c := benchCreateCommit(fmt.Sprintf("hot-%07d", i))
			c.Run.CreatedAt, c.Run.UpdatedAt, c.Event.Time = benchT0.Add(time.Hour), benchT0.Add(time.Hour), benchT0.Add(time.Hour)
			c.Enqueue = &store.Task{ID: c.Run.ID + ".1", RunID: c.Run.ID, State: "LOOP", Version: 1, Status: store.TaskPending,
				CreatedAt: benchT0.Add(time.Hour), UpdatedAt: benchT0.Add(time.Hour), Attempt: 1}
			if err := s.CreateRun(ctx, c); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			t, ok, err := s.ClaimTask(ctx, "bench", now, time.Minute, nil)
			spent[k] += time.Since(start)
			if err != nil || !ok || t.ID != c.Enqueue.ID {
				b.Fatalf("ClaimTask = %+v, %v, %v; want %s", t, ok, err, c.Enqueue.ID)
			}
			if err := s.FinishTask(ctx, t.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "ns/claim-none")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "ns/claim-waiting")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "ratio")
	b.ReportMetric(float64(waiting), "waiting")
}
