package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// Benchmarks of the engine's hot paths. Performance is never asserted here;
// bench/run runs these and publishes the figures in docs/PERFORMANCE.md.

const benchBase = "http://127.0.0.1:8000"

func benchWizard(b *testing.B) (*engine.Engine, context.Context) {
	b.Helper()
	e, err := engine.New(memstore.New(), []*workflow.Definition{examples.ConfigWizard()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return e, context.Background()
}

// wizardAt returns a config-wizard run moved through actions.
func wizardAt(b *testing.B, e *engine.Engine, ctx context.Context, actions ...string) *engine.Run {
	b.Helper()
	r, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range actions {
		var in map[string]any
		if a == "save" {
			in = map[string]any{"value": "dark mode"}
		}
		if r, err = e.Transition(ctx, r.ID, a, in, engine.TransitionOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return r
}

// BenchmarkFrame builds a State Frame from a run (build) and builds and
// encodes it as the HTTP answer does (build+encode, with AppendJSON), at
// CONFIGURE (an offered transition with expects) and at CONFIRM (two
// actions, data).
func BenchmarkFrame(b *testing.B) {
	e, ctx := benchWizard(b)
	for _, tc := range []struct {
		name    string
		actions []string
	}{{"CONFIGURE", []string{"start"}}, {"CONFIRM", []string{"start", "save"}}} {
		r := wizardAt(b, e, ctx, tc.actions...)
		b.Run(tc.name+"/build", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = e.Frame(r, benchBase)
			}
		})
		b.Run(tc.name+"/build+encode", func(b *testing.B) {
			buf := make([]byte, 0, 2048) // the server's pooled buffer
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Frame(r, benchBase).AppendJSON(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCLI builds the dynamic CLI object and encodes it (AppendJSON): from the
// state's hook (config wizard at CONFIRM), and generated from the frame
// (loop-v1's LOOP, which has no hook).
func BenchmarkCLI(b *testing.B) {
	e, ctx := benchWizard(b)
	hook := wizardAt(b, e, ctx, "start", "save")
	le := loopEngine(b, true)
	gen, err := le.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		e    *engine.Engine
		r    *engine.Run
	}{{"hook", e, hook}, {"generated", le, gen}} {
		b.Run(tc.name+"/build", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = tc.e.CLI(tc.r)
			}
		})
		b.Run(tc.name+"/build+encode", func(b *testing.B) {
			buf := make([]byte, 0, 2048)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.e.CLI(tc.r).AppendJSON(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func loopEngine(b *testing.B, expects bool) *engine.Engine {
	b.Helper()
	return loopOn(b, memstore.New(), expects)
}

// BenchmarkTransition fires a self-loop on the in-memory store: one run
// (serial), with input that is merged into the data (input), and many runs
// from parallel goroutines (parallel).
func BenchmarkTransition(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		e := loopEngine(b, false)
		r, _ := e.StartRun(ctx, "", nil, engine.StartOptions{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Transition(ctx, r.ID, "tick", nil, engine.TransitionOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("input", func(b *testing.B) {
		e := loopEngine(b, true)
		r, _ := e.StartRun(ctx, "", nil, engine.StartOptions{})
		in := map[string]any{"n": int64(7)}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Transition(ctx, r.ID, "tick", in, engine.TransitionOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		e := loopEngine(b, false)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
			if err != nil {
				b.Error(err)
				return
			}
			for pb.Next() {
				if _, err := e.Transition(ctx, r.ID, "tick", nil, engine.TransitionOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkStartRun creates config-wizard runs on the in-memory store.
func BenchmarkStartRun(b *testing.B) {
	e, ctx := benchWizard(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.StartRun(ctx, "", nil, engine.StartOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLiveHeapPerRun reports the live heap (after a full GC) that each
// stored config-wizard run costs on the in-memory store, as B/run. Run it
// with -benchtime=100000x for the 100,000-run figure of docs/PERFORMANCE.md.
func BenchmarkLiveHeapPerRun(b *testing.B) {
	for _, tc := range []struct {
		name    string
		actions []string
	}{{"created", nil}, {"completed", []string{"start", "save", "confirm"}}} {
		b.Run(tc.name, func(b *testing.B) {
			e, ctx := benchWizard(b)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			n := 0
			for b.Loop() {
				wizardAt(b, e, ctx, tc.actions...)
				n++
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/run")
			runtime.KeepAlive(e)
		})
	}
}

// BenchmarkPublish delivers one event to N in-process subscribers of a run
// and waits until every subscriber has received it.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprint(n, "subs"), func(b *testing.B) {
			e := loopEngine(b, false)
			ctx := context.Background()
			r, _ := e.StartRun(ctx, "", nil, engine.StartOptions{})
			done := make(chan struct{}, n)
			for range n {
				sub := e.Hub().Subscribe(r.ID)
				defer sub.Close()
				go func() {
					for m := range sub.C {
						if m.Event != nil {
							done <- struct{}{}
						}
					}
				}()
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := e.Transition(ctx, r.ID, "tick", nil, engine.TransitionOptions{}); err != nil {
					b.Fatal(err)
				}
				for range n {
					<-done
				}
			}
		})
	}
}
