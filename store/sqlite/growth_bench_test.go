package sqlite_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/workflow"
)

// BenchmarkTickGrowth fires `tick` transitions of bench/loop-v1.yaml
// through the engine on 64 new runs at once (group commits, as 64 HTTP
// connections do) in a copy of the database named by ASMP_BENCH_GROWTH_DB
// (e.g. a growth database of bench/bounded, holding 1,000,000 runs), or in
// a new one. Besides the time it reports counts that do not depend on the
// machine's load: the pages the writer's connection fetched from its page
// cache (hits and misses) and wrote per transition, and the bytes written
// to files (the WAL and checkpoints) per transition. Performance is not
// asserted here.
func BenchmarkTickGrowth(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "growth.db")
	if src := os.Getenv("ASMP_BENCH_GROWTH_DB"); src != "" {
		copyFile(b, src, path)
		copyFile(b, src+".key", path+".key")
	}
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	def, err := workflow.LoadFile("../../bench/loop-v1.yaml")
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(s, []*workflow.Definition{def}, nil)
	if err != nil {
		b.Fatal(err)
	}
	const conns = 64
	ids := make([]string, conns)
	for i := range ids {
		r, err := e.StartRun(ctx, "loop-v1", nil, engine.StartOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	tick := func(n int) {
		var wg sync.WaitGroup
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := i; j < n; j += conns {
					if _, err := e.Transition(ctx, ids[i], "tick", nil, engine.TransitionOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	tick(20 * conns) // warm up: the runs' pages in the cache
	st0, cpu0, w0 := sqlite.WriterStatus(b, s), cpuTime(), wchar(b)
	b.ResetTimer()
	tick(b.N)
	b.StopTimer()
	st1, cpu1, w1 := sqlite.WriterStatus(b, s), cpuTime(), wchar(b)
	n := float64(b.N)
	b.ReportMetric(float64(st1.Hit-st0.Hit)/n, "page-hits/op")
	b.ReportMetric(float64(st1.Miss-st0.Miss)/n, "page-misses/op")
	b.ReportMetric(float64(st1.Write-st0.Write)/n, "pages-written/op")
	b.ReportMetric(float64(w1-w0)/n, "file-B-written/op")
	b.ReportMetric(float64(cpu1-cpu0)/n, "cpu-ns/op")
}

func copyFile(b *testing.B, src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// wchar is the bytes the process has written with write(2) and its kind.
func wchar(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io")
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
