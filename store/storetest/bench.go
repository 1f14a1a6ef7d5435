package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// The compare-and-set benchmarks (CommitRun, the core of every transition)
// every backend runs, like the conformance suite:
//
//	func BenchmarkCommitRun(b *testing.B) { storetest.BenchmarkCommitRun(b, open) }
//
// Performance is never asserted here; bench/run publishes the figures.

var benchT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func benchCreate(b *testing.B, s store.Store, id string) store.Run {
	snap := store.Snapshot{State: "LOOP", Data: json.RawMessage(`{"value":"x"}`)}
	c := store.Commit{
		Run:   store.Run{ID: id, WorkflowID: "loop-v1", Snapshot: snap, Version: 1, CreatedAt: benchT0, UpdatedAt: benchT0},
		Event: store.Event{RunID: id, Seq: 1, Time: benchT0, Kind: store.EventCreated, To: "LOOP", Actor: "bench", Snapshot: snap},
	}
	if err := s.CreateRun(context.Background(), c); err != nil {
		b.Fatal(err)
	}
	return c.Run
}

// tick is the commit of a self-loop on r.
func tick(r store.Run) store.Commit {
	n := r
	n.Version++
	n.UpdatedAt = r.UpdatedAt.Add(time.Millisecond)
	return store.Commit{Run: n, Event: store.Event{RunID: r.ID, Seq: n.Version, Time: n.UpdatedAt,
		Kind: store.EventTransition, Action: "tick", From: "LOOP", To: "LOOP", Actor: "bench", Snapshot: n.Snapshot}}
}

// BenchmarkCommitRun measures CommitRun on stores made by openBench: serial commits on one run; parallel goroutines each
// committing on their own run (what group commit batches); and contended,
// every goroutine on the same run with read, compare-and-set and retry on
// conflict, as the engine does.
func BenchmarkCommitRun(b *testing.B, openBench func(*testing.B) store.Store) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		s := openBench(b)
		defer s.Close()
		r := benchCreate(b, s, "serial")
		b.ReportAllocs()
		for b.Loop() {
			c := tick(r)
			if err := s.CommitRun(ctx, r.Version, c).Wait(); err != nil {
				b.Fatal(err)
			}
			r = c.Run
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := openBench(b)
		defer s.Close()
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			r := benchCreate(b, s, fmt.Sprint("p", n.Add(1)))
			for pb.Next() {
				c := tick(r)
				if err := s.CommitRun(ctx, r.Version, c).Wait(); err != nil {
					b.Error(err)
					return
				}
				r = c.Run
			}
		})
	})
	b.Run("contended", func(b *testing.B) {
		s := openBench(b)
		defer s.Close()
		benchCreate(b, s, "hot")
		var conflicts atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for {
					r, err := s.GetRun(ctx, "hot")
					if err != nil {
						b.Error(err)
						return
					}
					err = s.CommitRun(ctx, r.Version, tick(r)).Wait()
					if errors.Is(err, store.ErrConflict) {
						conflicts.Add(1)
						continue
					}
					if err != nil {
						b.Error(err)
						return
					}
					break
				}
			}
		})
		b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
	})
}

// BenchmarkGetRun reads one run.
func BenchmarkGetRun(b *testing.B, openBench func(*testing.B) store.Store) {
	s := openBench(b)
	defer s.Close()
	benchCreate(b, s, "r")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetRun(ctx, "r"); err != nil {
			b.Fatal(err)
		}
	}
}
