// Command abreport turns the results of `bench/run --baseline REF` into a
// Markdown A/B table: for each HTTP workload and store, the new binary's
// and the baseline's throughput, new/old and each/no-op (medians of the
// per-repetition ratios, with their range), and p50, p99 and mean latency
// (medians over the repetitions).
//
//	abreport -results results.tsv -out ab.md
//
// It exits 1 when a request failed (non-2xx or socket errors).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/asmp-dev/asmp/bench/internal/stats"
)

type result struct {
	workload, store, bin string // bin: "new", "old" or "" (the no-op server)
	rep                  int
	rps, p50, p99, mean  float64 // latencies in µs
	failed               float64 // non-2xx and socket errors
}

func main() {
	in := flag.String("results", "", "results TSV written by bench/run --baseline")
	out := flag.String("out", "", "Markdown file to write (default stdout)")
	flag.Parse()
	meta, rs, err := load(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "abreport:", err)
		os.Exit(2)
	}
	var b strings.Builder
	failed := write(&b, meta, rs)
	if *out == "" {
		fmt.Print(b.String())
	} else if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "abreport:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

type metaList struct {
	keys []string
	vals map[string]string
}

func load(path string) (metaList, []result, error) {
	m := metaList{vals: map[string]string{}}
	f, err := os.Open(path)
	if err != nil {
		return m, nil, err
	}
	defer f.Close()
	var rs []result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), "\t")
		switch {
		case fs[0] == "meta" && len(fs) >= 3:
			if _, ok := m.vals[fs[1]]; !ok {
				m.keys = append(m.keys, fs[1])
			}
			m.vals[fs[1]] = fs[2]
		case fs[0] == "http" && len(fs) >= 11:
			r := result{workload: fs[1]}
			r.store, r.bin, _ = strings.Cut(fs[2], "@")
			r.rep, _ = strconv.Atoi(fs[3])
			num := func(i int) float64 {
				if i >= len(fs) {
					return 0
				}
				v, _ := strconv.ParseFloat(fs[i], 64)
				return v
			}
			r.rps, r.p50, r.p99, r.mean = num(4), num(5), num(7), num(11)
			r.failed = num(9) + num(10)
			rs = append(rs, r)
		}
	}
	return m, rs, sc.Err()
}

func find(rs []result, wl, store, bin string, rep int) (result, bool) {
	for _, r := range rs {
		if r.workload == wl && r.store == store && r.bin == bin && r.rep == rep {
			return r, true
		}
	}
	return result{}, false
}

// ratio formats the median of xs with its range when there is more than one.
func ratio(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	s := fmt.Sprintf("%.2f", stats.Median(xs))
	if len(xs) > 1 {
		s += fmt.Sprintf(" (%.2f–%.2f)", slices.Min(xs), slices.Max(xs))
	}
	return s
}

func ms(us []float64) string {
	if len(us) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", stats.Median(us)/1000)
}

func write(b *strings.Builder, m metaList, rs []result) (failed bool) {
	fmt.Fprintf(b, "# A/B: today's code against %s\n\n", m.vals["baseline"])
	for _, k := range m.keys {
		fmt.Fprintf(b, "- %s: %s\n", k, m.vals[k])
	}
	b.WriteString("\nEach figure is the median over the repetitions; new/old and ×no-op are medians of the per-repetition ratios (range in brackets). Latencies in ms at the load's connections; \"mean\" is wrk's mean latency.\n\n")
	b.WriteString("| workload | store | new rps | old rps | new/old | new ×no-op | old ×no-op | p50 new / old | p99 new / old | mean new / old |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var wls, stores []string
	for _, r := range rs {
		if r.failed > 0 {
			failed = true
		}
		if r.bin == "" {
			continue
		}
		if !slices.Contains(wls, r.workload) {
			wls = append(wls, r.workload)
		}
		if !slices.Contains(stores, r.store) {
			stores = append(stores, r.store)
		}
	}
	for _, wl := range wls {
		for _, st := range stores {
			var newRPS, oldRPS, newOld, newNoop, oldNoop []float64
			lat := map[string][]float64{}
			seen := false
			for _, r := range rs {
				if r.workload != wl || r.store != st || r.bin != "new" {
					continue
				}
				seen = true
				newRPS = append(newRPS, r.rps)
				lat["p50new"], lat["p99new"], lat["meannew"] = append(lat["p50new"], r.p50), append(lat["p99new"], r.p99), append(lat["meannew"], r.mean)
				noop, hasNoop := find(rs, stats.NoopWorkload(wl), "noop", "", r.rep)
				if hasNoop && noop.rps > 0 {
					newNoop = append(newNoop, r.rps/noop.rps)
				}
				if o, ok := find(rs, wl, st, "old", r.rep); ok {
					if o.rps > 0 {
						newOld = append(newOld, r.rps/o.rps)
					}
				}
			}
			for _, o := range rs {
				if o.workload != wl || o.store != st || o.bin != "old" {
					continue
				}
				seen = true
				oldRPS = append(oldRPS, o.rps)
				lat["p50old"], lat["p99old"], lat["meanold"] = append(lat["p50old"], o.p50), append(lat["p99old"], o.p99), append(lat["meanold"], o.mean)
				if noop, ok := find(rs, stats.NoopWorkload(wl), "noop", "", o.rep); ok && noop.rps > 0 {
					oldNoop = append(oldNoop, o.rps/noop.rps)
				}
			}
			if !seen {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %.0f | %.0f | %s | %s | %s | %s / %s | %s / %s | %s / %s |\n", wl, st,
				stats.Median(newRPS), stats.Median(oldRPS), ratio(newOld), ratio(newNoop), ratio(oldNoop),
				ms(lat["p50new"]), ms(lat["p50old"]), ms(lat["p99new"]), ms(lat["p99old"]), ms(lat["meannew"]), ms(lat["meanold"]))
		}
	}
	var noop []string
	for _, r := range rs {
		if r.store == "noop" && !slices.Contains(noop, r.workload) {
			noop = append(noop, r.workload)
		}
	}
	if len(noop) > 0 {
		b.WriteString("\nNo-op server (the ceiling):")
		for _, wl := range noop {
			var x []float64
			for _, r := range rs {
				if r.store == "noop" && r.workload == wl {
					x = append(x, r.rps)
				}
			}
			fmt.Fprintf(b, " %s %.0f rps;", wl, stats.Median(x))
		}
		b.WriteString("\n")
	}
	if failed {
		b.WriteString("\n**Some requests failed** (non-2xx or socket errors): see the raw results.\n")
	}
	return failed
}
