// Command report turns the results bench/run collected into
// docs/PERFORMANCE.md: the machine, the commands, the date, medians of the
// repeated measurements, every asmp figure as a ratio of the no-op baseline
// measured in the same run, the targets (met or missed, with the numbers),
// and the optimisation log (bench/OPTIMISATION_LOG.md, included verbatim).
//
//	report -results results.tsv -log bench/OPTIMISATION_LOG.md -out docs/PERFORMANCE.md [-check]
//	report -results bounded.tsv -section bounded -out docs/PERFORMANCE.md
//
// With -section bounded it rewrites only the bounded-cost section of -out
// and that section's rows of the targets table, keeping the rest (the
// figures of an earlier full run).
//
// It also prints the targets table on stdout. It exits 1 when a request
// failed (non-2xx or socket errors, a fan-out delivery missed) and, with
// -check, when a target is missed.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/asmp-dev/asmp/bench/internal/stats"
)

func main() {
	results := flag.String("results", "", "results file written by bench/run")
	logFile := flag.String("log", "", "optimisation log to include")
	out := flag.String("out", "docs/PERFORMANCE.md", "report to write")
	quick := flag.Bool("quick", false, "the results come from bench/run --quick")
	check := flag.Bool("check", false, "exit 1 when a target is missed")
	section := flag.String("section", "", "rewrite only this section of -out (bounded), keeping the rest")
	flag.Parse()
	r, err := load(*results)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if *section != "" {
		if err := rewriteSection(*out, *section, r, *check); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		return
	}
	var log []byte
	if *logFile != "" {
		if log, err = os.ReadFile(*logFile); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
	var b strings.Builder
	targets := r.targets()
	// Sections written by hand (their first line after the heading says
	// so: the timers' and webhooks' benchmarks, which bench/run does not
	// run) are kept from the report being replaced, before the commands.
	kept := ""
	if old, err := os.ReadFile(*out); err == nil {
		kept = handWritten(string(old))
	}
	r.write(&b, targets, string(log), *quick)
	doc := b.String()
	if kept != "" {
		if i := strings.Index(doc, "\n## Commands\n"); i >= 0 {
			doc = doc[:i+1] + kept + doc[i+1:]
		}
	}
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	writeTargets(os.Stdout, targets)
	failed := r.failures()
	for _, f := range failed {
		fmt.Fprintln(os.Stderr, "report: FAILED:", f)
	}
	missed := 0
	for _, t := range targets {
		if t.known && !t.met {
			missed++
		}
	}
	if len(failed) > 0 || (*check && missed > 0) {
		os.Exit(1)
	}
}

// ---- results -------------------------------------------------------------

type httpResult struct {
	workload, target                 string
	rep                              int
	rps                              float64
	p50, p90, p99, max, non2xx, errs float64
}

type gobench struct {
	pkg, name string
	metrics   map[string][]float64 // unit -> values over -count
	order     []string
}

type results struct {
	meta    map[string]string
	metaKey []string
	http    []httpResult
	fanout  []map[string]float64
	floor   map[string]float64
	mem     map[string]map[string]float64
	memKeys []string
	bench   []*gobench
	bounded *boundedResults
	// backlog: the webhook deliveries not yet sent when wrk ended, by
	// "target rep" (transition_webhook).
	backlog map[string]float64
	// sectionOnly: the results are those of one section, written into a
	// report of an earlier full run (-section).
	sectionOnly bool
}

func load(path string) (*results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &results{meta: map[string]string{}, mem: map[string]map[string]float64{}, backlog: map[string]float64{}}
	byName := map[string]*gobench{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), "\t")
		switch fs[0] {
		case "meta":
			if _, ok := r.meta[fs[1]]; !ok {
				r.metaKey = append(r.metaKey, fs[1])
			}
			r.meta[fs[1]] = fs[2]
		case "http":
			h := httpResult{workload: fs[1], target: fs[2]}
			h.rep, _ = strconv.Atoi(fs[3])
			nums := make([]float64, 7)
			for i := range nums {
				nums[i], _ = strconv.ParseFloat(fs[4+i], 64)
			}
			h.rps, h.p50, h.p90, h.p99, h.max, h.non2xx, h.errs = nums[0], nums[1], nums[2], nums[3], nums[4], nums[5], nums[6]
			r.http = append(r.http, h)
		case "webhook":
			if len(fs) >= 5 {
				r.backlog[fs[2]+" "+fs[3]] = kv(fs[4])["backlog"]
			}
		case "fanout":
			r.fanout = append(r.fanout, kv(fs[2]))
		case "floor":
			r.floor = kv(fs[1])
		case "mem":
			if _, ok := r.mem[fs[1]]; !ok {
				r.memKeys = append(r.memKeys, fs[1])
			}
			r.mem[fs[1]] = kv(fs[2])
		case "growth", "list", "metrics", "bigrun", "loadavg", "startup":
			r.addBounded(fs)
		case "gobench":
			pkg := fs[1]
			line := strings.Fields(strings.Join(fs[2:], " "))
			if len(line) < 4 {
				continue
			}
			name := line[0]
			if i := strings.LastIndex(name, "-"); i > 0 {
				name = name[:i] // drop the -GOMAXPROCS suffix
			}
			key := pkg + " " + name
			g := byName[key]
			if g == nil {
				g = &gobench{pkg: pkg, name: name, metrics: map[string][]float64{}}
				byName[key] = g
				r.bench = append(r.bench, g)
			}
			for i := 2; i+1 < len(line); i += 2 {
				v, err := strconv.ParseFloat(line[i], 64)
				if err != nil {
					continue
				}
				unit := line[i+1]
				if _, ok := g.metrics[unit]; !ok {
					g.order = append(g.order, unit)
				}
				g.metrics[unit] = append(g.metrics[unit], v)
			}
		}
	}
	return r, sc.Err()
}

func kv(s string) map[string]float64 {
	m := map[string]float64{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err == nil {
			m[k] = n
		}
	}
	return m
}

// agg is the medians of one (workload, target) over the repetitions, and
// the median of its per-repetition ratios to the no-op baseline.
type agg struct {
	n                    int
	rps, p50, p99, ratio float64
	ratioMin, ratioMax   float64
	rpsMin, rpsMax       float64
	non2xx, errs         float64
	hasRatio             bool
}

func (r *results) agg(workload, target string) (agg, bool) {
	var rps, p50, p99, ratios []float64
	var a agg
	for _, h := range r.http {
		if h.workload != workload || h.target != target {
			continue
		}
		rps = append(rps, h.rps)
		p50 = append(p50, h.p50/1000)
		p99 = append(p99, h.p99/1000)
		a.non2xx += h.non2xx
		a.errs += h.errs
		if target != "noop" {
			for _, b := range r.http {
				if b.target == "noop" && b.workload == stats.NoopWorkload(workload) && b.rep == h.rep && b.rps > 0 {
					ratios = append(ratios, h.rps/b.rps)
				}
			}
		}
	}
	if len(rps) == 0 {
		return a, false
	}
	a.n = len(rps)
	a.rps, a.p50, a.p99 = stats.Median(rps), stats.Median(p50), stats.Median(p99)
	a.rpsMin, a.rpsMax = slices.Min(rps), slices.Max(rps)
	if len(ratios) > 0 {
		a.hasRatio = true
		a.ratio = stats.Median(ratios)
		a.ratioMin, a.ratioMax = slices.Min(ratios), slices.Max(ratios)
	}
	return a, true
}

// fanoutMedian is the median of key over the fan-out runs whose client
// slept between reads (the default); busy-polling runs are context.
func (r *results) fanoutMedian(key string) float64 {
	var xs []float64
	for _, f := range r.fanout {
		if f["busy_poll"] == 0 {
			xs = append(xs, f[key])
		}
	}
	return stats.Median(xs)
}

func (r *results) bench1(pkg, name, unit string) (float64, bool) {
	for _, g := range r.bench {
		if (pkg == "" || g.pkg == pkg) && g.name == name {
			if v, ok := g.metrics[unit]; ok {
				return stats.Median(v), true
			}
		}
	}
	return 0, false
}

func (r *results) failures() []string {
	var out []string
	for _, h := range r.http {
		if h.non2xx > 0 || h.errs > 0 {
			out = append(out, fmt.Sprintf("%s on %s (repetition %d): %.0f non-2xx answers, %.0f socket errors", h.workload, h.target, h.rep, h.non2xx, h.errs))
		}
	}
	for i, f := range r.fanout {
		if f["missed"] > 0 {
			out = append(out, fmt.Sprintf("fan-out run %d: %.0f deliveries missed", i+1, f["missed"]))
		}
	}
	return out
}

// ---- targets -------------------------------------------------------------

type target struct {
	name     string
	measured string
	known    bool // measured in this run
	met      bool
}

func (r *results) targets() []target {
	var ts []target
	noop99 := func(wl string) string {
		if a, ok := r.agg(wl, "noop"); ok {
			return fmt.Sprintf(" (no-op: %.1f ms)", a.p99)
		}
		return ""
	}
	ratioTarget := func(label, wl, tgt string, min float64) {
		t := target{name: fmt.Sprintf("%s ≥ %.0f%% of no-op rps", label, min*100)}
		if a, ok := r.agg(wl, tgt); ok && a.hasRatio {
			b, _ := r.agg(stats.NoopWorkload(wl), "noop")
			t.known, t.met = true, a.ratio >= min
			t.measured = fmt.Sprintf("%.0f%% (%s vs %s rps; per-repetition %.0f–%.0f%%)", a.ratio*100, thousands(a.rps), thousands(b.rps), a.ratioMin*100, a.ratioMax*100)
		}
		ts = append(ts, t)
	}
	p99Target := func(label, wl, tgt string, max float64) {
		t := target{name: fmt.Sprintf("%s: p99 < %.0f ms at 64 connections", label, max)}
		if a, ok := r.agg(wl, tgt); ok {
			t.known, t.met = true, a.p99 < max
			t.measured = fmt.Sprintf("%.1f ms%s", a.p99, noop99(stats.NoopWorkload(wl)))
		}
		ts = append(ts, t)
	}
	// The targets of issue 29 (the hot path won back): transitions on one
	// run and on 64, GET cli, the in-memory tail, durable SQLite.
	ratioTarget("Transition, :memory: (64 runs)", "transition", "memory", 0.65)
	p99Target("Transition, :memory: (64 runs)", "transition", "memory", 5)
	ratioTarget("Transition, :memory: (1 run)", "transition_1run", "memory", 0.65)
	p99Target("Transition, :memory: (1 run)", "transition_1run", "memory", 5)
	ratioTarget("GET frame, :memory:", "get_frame", "memory", 0.75)
	p99Target("GET frame, :memory:", "get_frame", "memory", 10)
	ratioTarget("GET cli, :memory:", "get_cli", "memory", 0.85)
	p99Target("GET cli, :memory:", "get_cli", "memory", 10)
	ratioTarget("Durable transition, SQLite (64 runs)", "transition", "sqlite", 0.25)
	if a, ok := r.agg("transition", "sqlite-gmp2"); ok && a.hasRatio {
		t := &ts[len(ts)-1]
		t.measured += fmt.Sprintf("; with GOMAXPROCS=2 (c′) %.0f%% (%s rps)", a.ratio*100, thousands(a.rps))
	}
	// Postgres (bench/run --postgres): as fast as SQLite on the same box,
	// with a bounded tail.
	if pg, ok := r.agg("transition", "postgres"); ok {
		t := target{name: "Durable transition, PostgreSQL (64 runs) ≥ SQLite's rps, p99 < 20 ms", known: true}
		if sq, ok := r.agg("transition", "sqlite"); ok && sq.rps > 0 {
			t.met = pg.rps >= sq.rps && pg.p99 < 20
			t.measured = fmt.Sprintf("%.2f of SQLite (%s vs %s rps), p99 %.1f ms", pg.rps/sq.rps, thousands(pg.rps), thousands(sq.rps), pg.p99)
		} else {
			t.known = false
		}
		ts = append(ts, t)
	}

	// Webhooks (issue 28): one subscription wanting every transition costs
	// the transitions at most a tenth, each repetition's ratio taken
	// against the same store's transitions of that repetition.
	for _, st := range []string{"memory", "sqlite", "postgres"} {
		var ratios, backlogs []float64
		for _, h := range r.http {
			if h.workload != "transition_webhook" || h.target != st {
				continue
			}
			for _, b := range r.http {
				if b.workload == "transition" && b.target == st && b.rep == h.rep && b.rps > 0 {
					ratios = append(ratios, h.rps/b.rps)
				}
			}
			backlogs = append(backlogs, r.backlog[st+" "+strconv.Itoa(h.rep)])
		}
		if len(ratios) == 0 {
			continue
		}
		t := target{name: fmt.Sprintf("Transition with one webhook subscription on every transition, %s (64 runs) ≥ 0.9 of the same store without", targetNames[st]), known: true}
		m := stats.Median(ratios)
		t.met = m >= 0.9
		t.measured = fmt.Sprintf("%.2f (per-repetition %.2f–%.2f); deliveries not yet sent when the load stopped: median %s", m, slices.Min(ratios), slices.Max(ratios), thousands(stats.Median(backlogs)))
		ts = append(ts, t)
	}

	f := target{name: "10,000 subscribers: p99 delivery < 100 ms (all deliveries, and at the last subscriber)"}
	if len(r.fanout) > 0 {
		subs := r.fanoutMedian("subs")
		all, last := r.fanoutMedian("all_p99_ms"), r.fanoutMedian("last_p99_ms")
		f.known = subs >= 10000
		f.met = f.known && all < 100 && last < 100
		f.measured = fmt.Sprintf("all %.1f ms, last subscriber %.1f ms (%s subscribers)", all, last, thousands(subs))
		if r.floor != nil {
			f.measured += fmt.Sprintf("; the bare writes alone take %.0f ms for 10,000 here", r.floor["us_per_write"]*10)
		}
		if !f.known {
			f.measured += " — not the target's 10,000"
		}
	}
	ts = append(ts, f)

	m := target{name: "Config-wizard run in memory < 1 KB (RSS per stored run, :memory:, at 100,000 runs)"}
	// Judged at 100,000 runs, as the issue sets it: with fewer, the GC's
	// heap floor (asmp serve --gc-floor, 32 MiB) dominates RSS per run.
	if mm, ok := r.mem["memory"]; ok && mm["runs"] >= 100000 {
		m.known = true
		m.met = mm["bytes_per_run"] < 1024
		m.measured = fmt.Sprintf("%.0f B at %s runs", mm["bytes_per_run"], thousands(mm["runs"]))
		if v, ok := r.bench1("./engine/", "BenchmarkLiveHeapPerRun/created", "B/run"); ok {
			m.measured += fmt.Sprintf(" (live heap after GC: %.0f B)", v)
		}
	}
	ts = append(ts, m)

	c := target{name: "Command construction < 2 µs (oip/command BenchmarkBuild)"}
	if v, ok := r.bench1("./oip/command/", "BenchmarkBuild", "ns/op"); ok {
		c.known, c.met = true, v < 2000
		c.measured = fmt.Sprintf("%.0f ns", v)
	}
	ts = append(ts, c)
	return append(ts, r.boundedTargets()...)
}

func verdict(t target) string {
	switch {
	case !t.known:
		return "not measured"
	case t.met:
		return "met"
	}
	return "**missed**"
}

func writeTargets(w io.Writer, ts []target) {
	fmt.Fprintln(w, "| Target | Measured | Verdict |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, t := range ts {
		m := t.measured
		if m == "" {
			m = "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.name, m, verdict(t))
	}
}

// ---- the document --------------------------------------------------------

var workloadNames = map[string]string{
	"post_runs":       "POST /runs",
	"get_frame":       "GET /runs/{id} (frame)",
	"get_cli":         "GET /runs/{id}/cli",
	"transition":      "POST transition, 64 runs",
	"transition_1run": "POST transition, 1 run",
	// transition_webhook: the 64-run transitions with one webhook
	// subscription wanting each of them (a second no-op server receives).
	"transition_webhook": "POST transition, 64 runs, one webhook subscription",
}

var targetNames = map[string]string{
	"noop":        "no-op (a)",
	"memory":      "asmp :memory: (b)",
	"sqlite":      "asmp SQLite (c)",
	"sqlite-gmp2": "asmp SQLite, GOMAXPROCS=2 (c′)",
	"postgres":    "asmp PostgreSQL, same machine (d)",
}

func thousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func (r *results) write(w *strings.Builder, ts []target, log string, quick bool) {
	m := r.meta
	fmt.Fprintf(w, "# Performance\n\n")
	fmt.Fprintf(w, "Generated by `bench/run` on %s. Do not edit by hand: the figures are rewritten by every run; the optimisation log below comes from `bench/OPTIMISATION_LOG.md`.\n\n", m["date"])
	if quick {
		fmt.Fprintf(w, "> **Smoke run (`bench/run --quick`)**: one short repetition, fewer subscribers and runs, no Go benchmarks. Not for quoting.\n\n")
	}
	fmt.Fprintf(w, "Every asmp rate is also given as a ratio of the no-op baseline (a Go `net/http` server answering a fixed 600-byte JSON, `bench/noop`) for the same workload, measured in the same run, on the same core, interleaved with the asmp measurements; the ratio is the median of the per-repetition ratios. This machine is shared with other work: absolute figures drift between runs, ratios much less.\n\n")

	fmt.Fprintf(w, "## Machine\n\n| | |\n|---|---|\n")
	for _, k := range []struct{ key, label string }{
		{"cpu", "CPU"}, {"cores", "Cores"}, {"kernel", "Kernel"}, {"go", "Go"}, {"wrk", "wrk"}, {"commit", "Commit"},
		{"pin", "Pinning"}, {"dbfs", "SQLite files on"}, {"params", "Parameters"}, {"elapsed", "Run time"},
	} {
		if v, ok := m[k.key]; ok {
			fmt.Fprintf(w, "| %s | %s |\n", k.label, v)
		}
	}
	if m["load_start"] != "" {
		fmt.Fprintf(w, "| Load average (1, 5, 15 min) | %s at the start, %s at the end |\n", m["load_start"], m["load_end"])
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "## Targets\n\n")
	writeTargets(w, ts)
	fmt.Fprintln(w)

	if len(r.http) > 0 {
		reps := 0
		for _, h := range r.http {
			reps = max(reps, h.rep)
		}
		fmt.Fprintf(w, "## HTTP: throughput and latency\n\n64 connections, `wrk -t1`; medians of %d repetition(s). rps range = lowest–highest repetition.\n\n", reps)
		fmt.Fprintln(w, "| Workload | Server | rps | rps range | × no-op | p50 ms | p99 ms | failed |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|")
		for _, wl := range []string{"post_runs", "get_frame", "get_cli", "transition", "transition_1run", "transition_webhook"} {
			for _, tg := range []string{"noop", "memory", "sqlite", "sqlite-gmp2", "postgres"} {
				a, ok := r.agg(wl, tg)
				if !ok {
					continue
				}
				ratio := "1 (baseline)"
				if tg != "noop" {
					ratio = "—"
					if a.hasRatio {
						ratio = fmt.Sprintf("%.2f", a.ratio)
					}
				}
				if (wl == "transition_1run" || wl == "transition_webhook") && tg == "noop" {
					continue
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s–%s | %s | %.2f | %.2f | %.0f |\n", workloadNames[wl], targetNames[tg],
					thousands(a.rps), thousands(a.rpsMin), thousands(a.rpsMax), ratio, a.p50, a.p99, a.non2xx+a.errs)
			}
		}
		fmt.Fprintf(w, "\n\"64 runs\": each request ticks the next of 64 runs, round-robin. \"1 run\": all 64 connections tick the same run, whose transitions are validated one after the other (SPEC §6); on SQLite they are queued behind each other and share group commits (optimisation log, step 5). \"one webhook subscription\": the 64-run transitions on a server with one subscription wanting every transition (`run.state_changed`), sent to a second no-op server pinned to the load generator's CPU; the server's delivery loop runs beside the transitions on the server's core. All three are compared with the same no-op workload. \"(c′)\": the same SQLite server with GOMAXPROCS=2 on its one core (optimisation log, after step 5).\n\n")
	}

	if len(r.fanout) > 0 {
		fmt.Fprintf(w, "## Stream fan-out\n\nOne run, N subscribers on `GET /runs/{id}/stream`, transitions fired one at a time from another connection. Delivery latency = kernel receive timestamp of the line at the subscriber's socket (SO_TIMESTAMPNS) − the moment before the transition's POST was written. \"all\": every (subscriber, transition) pair; \"last\": per transition, the last subscriber to get it; \"last-connected\": the subscriber that connected last. RSS per subscriber = growth of the server's VmRSS from before the subscribers connected to 2 s after all had their first line, divided by N.\n\n")
		fmt.Fprintln(w, "| Run | Subscribers | Transitions | Connect s | p50 all ms | p99 all ms | p50 last ms | p99 last ms | p99 last-connected ms | RSS per subscriber | missed |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		busy := false
		for i, f := range r.fanout {
			name := strconv.Itoa(i + 1)
			if f["busy_poll"] == 1 {
				name += " (client busy-polling)"
				busy = true
			}
			fmt.Fprintf(w, "| %s | %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s B | %.0f |\n", name, thousands(f["subs"]), f["transitions"], f["connect_s"],
				f["all_p50_ms"], f["all_p99_ms"], f["last_p50_ms"], f["last_p99_ms"], f["lastconn_p99_ms"], thousands(f["bytes_per_sub"]), f["missed"])
		}
		if len(r.fanout) > 1 {
			fmt.Fprintf(w, "| median (client sleeping) | %s | | | %.1f | %.1f | %.1f | %.1f | %.1f | %s B | |\n", thousands(r.fanoutMedian("subs")),
				r.fanoutMedian("all_p50_ms"), r.fanoutMedian("all_p99_ms"), r.fanoutMedian("last_p50_ms"), r.fanoutMedian("last_p99_ms"), r.fanoutMedian("lastconn_p99_ms"), thousands(r.fanoutMedian("bytes_per_sub")))
		}
		if r.floor != nil {
			fmt.Fprintf(w, "\n**The floor** (`bench/writefloor`): one `write(2)` of a %.0f-byte line to each of %s loopback sockets from one thread in a tight loop, no HTTP and no Go scheduling, the reader on the other core: %.1f µs per write (median of 5 rounds, %.1f–%.1f), so **%.0f ms for 10,000 subscribers** on one core before any server work. On loopback the sender's write also carries the receiver's TCP processing and wake-up.\n",
				r.floor["size"], thousands(r.floor["n"]), r.floor["us_per_write"], r.floor["min_us"], r.floor["max_us"], r.floor["us_per_write"]*10)
		}
		if busy {
			fmt.Fprintf(w, "\nThe busy-polling run: the client reads its sockets without sleeping in between, so the server's writes do not pay to wake it on the other core (on loopback the sender's write carries the receiver's wake-up; a remote subscriber's would not). The target is judged on the default runs.\n")
		}
		fmt.Fprintln(w)
	}

	if len(r.memKeys) > 0 {
		fmt.Fprintf(w, "## Memory per stored run\n\nConfig-wizard runs created with `POST /runs` (64 connections); VmRSS of the server from `/proc/PID/status` before, and 3 s after the last run. RSS includes garbage the Go runtime has not yet returned to the OS (GOGC=100, and `asmp serve`'s heap floor: below ~16 MB of live data the heap may grow to 32 MiB before a collection, so RSS per run is only meaningful with many runs), so it is an upper bound of the live data; the live heap after a full GC is the `BenchmarkLiveHeapPerRun` row of the Go benchmarks.\n\n")
		fmt.Fprintln(w, "| Store | Runs | RSS before | RSS after | RSS per run | Database file bytes per run | Runs created per s |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|")
		for _, k := range r.memKeys {
			mm := r.mem[k]
			disk := "—"
			if v, ok := mm["disk_bytes_per_run"]; ok {
				disk = fmt.Sprintf("%.0f B", v)
			}
			fmt.Fprintf(w, "| %s | %s | %s kB | %s kB | %.0f B | %s | %s |\n", k, thousands(mm["runs"]), thousands(mm["rss_before_kb"]), thousands(mm["rss_after_kb"]), mm["bytes_per_run"], disk, thousands(mm["rps"]))
		}
		fmt.Fprintln(w)
	}

	r.writeBounded(w)

	if len(r.bench) > 0 {
		fmt.Fprintf(w, "## Go benchmarks\n\n`go test -bench` (medians over `-count`; GOMAXPROCS = 2, unpinned). Command construction and the ledger's are the existing benchmarks of `oip/command` and `oip`.\n\n")
		fmt.Fprintln(w, "| Package | Benchmark | ns/op | B/op | allocs/op | other |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|---|")
		for _, g := range r.bench {
			cell := func(unit string) string {
				if v, ok := g.metrics[unit]; ok {
					if unit == "allocs/op" || unit == "B/op" {
						return thousands(stats.Median(v))
					}
					return fmtNum(stats.Median(v))
				}
				return ""
			}
			var other []string
			for _, u := range g.order {
				if u != "ns/op" && u != "B/op" && u != "allocs/op" {
					other = append(other, fmtNum(stats.Median(g.metrics[u]))+" "+u)
				}
			}
			fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s |\n", strings.TrimSuffix(strings.TrimPrefix(g.pkg, "./"), "/"), g.name, cell("ns/op"), cell("B/op"), cell("allocs/op"), strings.Join(other, ", "))
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "## Commands\n\n")
	fmt.Fprintf(w, "- Everything: `bench/run` (this report), `bench/run --quick` (smoke check). Tools: `bench/noop`, `bench/fanout`, `bench/rss`, `bench/wrk/*.lua`, `bench/loop-v1.yaml`.\n")
	for _, k := range r.metaKey {
		if strings.HasPrefix(k, "cmd_") {
			fmt.Fprintf(w, "- `%s`\n", m[k])
		}
	}
	fmt.Fprintf(w, "- Profiles: `bench/profile WORKLOAD` (an in-process server with pprof, `bench/pprofserve`, under the same wrk load), or `go test -run '^$' -bench BenchmarkAPI -cpuprofile cpu.pprof ./server/`.\n\n")

	if len(r.http) > 0 {
		fmt.Fprintf(w, "<details><summary>Every HTTP measurement</summary>\n\n| Rep | Workload | Server | rps | p50 ms | p90 ms | p99 ms | max ms | non-2xx | errors |\n|--:|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, h := range r.http {
			fmt.Fprintf(w, "| %d | %s | %s | %s | %.2f | %.2f | %.2f | %.1f | %.0f | %.0f |\n", h.rep, workloadNames[h.workload], targetNames[h.target], thousands(h.rps), h.p50/1000, h.p90/1000, h.p99/1000, h.max/1000, h.non2xx, h.errs)
		}
		fmt.Fprintf(w, "\n</details>\n\n")
	}

	if strings.TrimSpace(log) != "" {
		fmt.Fprintf(w, "%s\n", strings.TrimSpace(log))
	}
}

// handWritten returns the "## " sections of doc whose text begins with
// "Written by hand", in their order, each ending with a blank line.
func handWritten(doc string) string {
	var out strings.Builder
	parts := strings.Split(doc, "\n## ")
	for _, p := range parts[1:] {
		_, body, _ := strings.Cut(p, "\n")
		if strings.HasPrefix(strings.TrimLeft(body, "\n"), "Written by hand") {
			out.WriteString("## " + strings.TrimRight(p, "\n") + "\n\n")
		}
	}
	return out.String()
}

func fmtNum(v float64) string {
	switch {
	case v >= 1000:
		return thousands(v)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
