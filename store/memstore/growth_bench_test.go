package memstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

// The growth benchmarks measure what the store costs as the number of
// stored runs grows, in figures the shared CPU does not blur: the heap the
// garbage collector must scan, and the scan work per commit.
//
//	go test ./store/memstore -run '^$' -bench 'Growth/runs=(0|100000)$'
//	go test ./store/memstore -run '^$' -bench 'Growth/runs=1000000$' -benchtime 2000000x
//
// Every size is a sub-benchmark; a plain `go test` builds none of them.
var growthSizes = []int{0, 100_000, 1_000_000}

var growthT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// growthID is a run id shaped like the engine's (36 characters).
func growthID(i int) string { return fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", i) }

// growthCreate stores run id: a loop-v1 run in LOOP, as bench/bounded
// creates them.
func growthCreate(b *testing.B, s *memstore.Store, id, wf string, at time.Time) store.Run {
	snap := store.Snapshot{State: "LOOP", Data: json.RawMessage(`{"value":"x"}`)}
	c := store.Commit{
		Run:   store.Run{ID: id, WorkflowID: wf, Snapshot: snap, Version: 1, CreatedAt: at, UpdatedAt: at},
		Event: store.Event{RunID: id, Seq: 1, Time: at, Kind: store.EventCreated, To: "LOOP", Actor: "bench", Snapshot: snap},
	}
	if err := s.CreateRun(context.Background(), c); err != nil {
		b.Fatal(err)
	}
	return c.Run
}

// growthFill returns a store holding n loop-v1 runs, each updated at its
// own time.
func growthFill(b *testing.B, n int) *memstore.Store {
	s := memstore.New()
	for i := range n {
		growthCreate(b, s, growthID(i), "loop-v1", growthT0.Add(time.Duration(i)*time.Microsecond))
	}
	return s
}

var growthMetrics = []string{
	"/gc/heap/live:bytes",
	"/gc/scan/heap:bytes",
	"/gc/heap/objects:objects",
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds",
}

// readGrowth reads growthMetrics, in that order, as float64s.
func readGrowth() []float64 {
	ss := make([]metrics.Sample, len(growthMetrics))
	for i, n := range growthMetrics {
		ss[i].Name = n
	}
	metrics.Read(ss)
	out := make([]float64, len(ss))
	for i, s := range ss {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			out[i] = float64(s.Value.Uint64())
		case metrics.KindFloat64:
			out[i] = s.Value.Float64()
		}
	}
	return out
}

// heapOf returns, after a full collection, the live heap, the part of it
// the collector scans and the objects it marks, per stored run (totals
// for an empty store), and the scannable heap.
func heapOf(n int, base []float64) [4]float64 {
	runtime.GC()
	m := readGrowth()
	per := float64(max(n, 1))
	return [4]float64{(m[0] - base[0]) / per, (m[1] - base[1]) / per, (m[2] - base[2]) / per, m[1]}
}

// reportHeap reports heapOf's figures (after the timer's last reset,
// which deletes reported metrics).
func reportHeap(b *testing.B, h [4]float64) {
	for i, unit := range [...]string{"live-B/run", "scan-B/run", "objects/run", "scan-heap-B"} {
		b.ReportMetric(h[i], unit)
	}
}

// BenchmarkGrowthCommit commits self-loops round robin on eight runs of a
// store that already holds N runs, with the collector at its own pace
// (GOGC), as on a server. Per commit: ns/op, gc-scan-B/op (the scannable
// heap times the collections run, over the commits) and gc-cpu-ns/op (the
// runtime's estimate of the collector's CPU time); per stored run: the
// live heap, its scannable part and its objects after a full collection.
func BenchmarkGrowthCommit(b *testing.B) {
	for _, n := range growthSizes {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			runtime.GC()
			base := readGrowth()
			s := growthFill(b, n)
			heap := heapOf(n, base)
			ctx := context.Background()
			hot := make([]store.Run, 8)
			for i := range hot {
				hot[i] = growthCreate(b, s, fmt.Sprintf("hot-%d", i), "loop-v1", growthT0.Add(time.Hour+time.Duration(i)))
			}
			runtime.GC()
			before := readGrowth()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := &hot[i%len(hot)]
				n := *r
				n.Version++
				n.UpdatedAt = r.UpdatedAt.Add(time.Millisecond)
				c := store.Commit{Run: n, Event: store.Event{RunID: r.ID, Seq: n.Version, Time: n.UpdatedAt,
					Kind: store.EventTransition, Action: "tick", From: "LOOP", To: "LOOP", Actor: "bench",
					Patch: json.RawMessage(`{}`), Snapshot: n.Snapshot}}
				if err := s.CommitRun(ctx, r.Version, c).Wait(); err != nil {
					b.Fatal(err)
				}
				*r = n
			}
			b.StopTimer()
			after := readGrowth()
			cycles := after[3] - before[3]
			b.ReportMetric(cycles*after[1]/float64(b.N), "gc-scan-B/op")
			b.ReportMetric((after[4]-before[4])*1e9/float64(b.N), "gc-cpu-ns/op")
			b.ReportMetric(cycles, "gc-cycles")
			reportHeap(b, heap)
			runtime.KeepAlive(s)
		})
	}
}

// BenchmarkGrowthListRuns reads a page of 50 runs of a store that holds N
// runs and 64 more (so that every page is full, as on a server that ticks
// runs): unfiltered, filtered on what every run matches, on a workflow of
// ten runs among them, and a page from the middle of the list.
func BenchmarkGrowthListRuns(b *testing.B) {
	for _, n := range growthSizes {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			s := growthFill(b, n)
			for i := range 64 {
				growthCreate(b, s, fmt.Sprintf("hot-%d", i), "loop-v1", growthT0.Add(time.Hour+time.Duration(i)))
			}
			for i := range 10 {
				growthCreate(b, s, fmt.Sprintf("rare-%d", i), "rare-v1", growthT0.Add(time.Duration(i)*time.Second))
			}
			active := ""
			ctx := context.Background()
			for _, f := range []struct {
				name string
				f    store.RunFilter
			}{
				{"all", store.RunFilter{Limit: 50}},
				{"workflow+status", store.RunFilter{WorkflowID: "loop-v1", Override: &active, Limit: 50}},
				{"rare workflow", store.RunFilter{WorkflowID: "rare-v1", Limit: 50}},
				{"next page", store.RunFilter{Before: store.RunCursor{UpdatedAt: growthT0.Add(time.Duration(n/2) * time.Microsecond), ID: growthID(n / 2)}, Limit: 50}},
			} {
				b.Run(f.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := s.ListRuns(ctx, f.f); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
