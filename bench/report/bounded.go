package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/asmp-dev/asmp/bench/internal/stats"
)

// The bounded-cost figures (bench/bounded, issue 15): the growth table,
// /metrics with many runs, the large run and the large row.

type growthRow struct {
	target, workload string // workload: "tick", or a GET /runs page (listNames)
	runs, conns      int
	rps, p50, p99    float64 // p50 and p99 in ms
	errs             float64
	other            float64 // cores other processes used meanwhile
	hasOther         bool
}

// listNames are the GET /runs workloads of bench/bounded.
var listNames = map[string]string{
	"list":          "GET /runs?limit=50",
	"list_filtered": "GET /runs?limit=50&workflow_id=loop-v1&status=active",
}

func (g growthRow) label() string {
	if n, ok := listNames[g.workload]; ok {
		return n
	}
	return "POST …/transitions/tick"
}

// maxOther is the CPU, in cores, other processes may use during a
// measured window of the growth table before its targets are left
// unjudged.
const maxOther = 0.25

type boundedResults struct {
	growth  []growthRow
	metrics map[string]float64 // "target runs" -> median µs
	bigrun  map[string]float64
	load    []float64 // 1-minute load averages around the growth table
	startup startupResults
}

// startupResults are the starts of asmp serve on a database of many
// ledger records (bench/bounded -part startup).
type startupResults struct {
	records          float64
	listen, ready    []float64 // µs from exec, one per start
	rss, hwm         []float64 // bytes once ready, one per start
	check            float64   // µs of asmp ledger check
	hasCheck, hasAny bool
}

// noisy reports whether other work on the machine took more than
// maxOther cores during the measured window of any of rows (for results
// without that figure: whether the load average exceeded the cores
// during the growth table), and why: their rps and latencies then
// measure that work too.
func (r *results) noisy(rows ...growthRow) (string, bool) {
	worst, measured := 0.0, false
	for _, g := range rows {
		if g.hasOther {
			worst, measured = max(worst, g.other), true
		}
	}
	if measured {
		return fmt.Sprintf("other processes used %.2f cores during a measured window", worst), worst > maxOther
	}
	cores, _ := strconv.ParseFloat(r.meta["cores"], 64)
	if cores == 0 {
		cores = 2
	}
	load := slices.Max(append([]float64{0}, r.bounded.load...))
	return fmt.Sprintf("the machine's load average reached %.1f while it ran", load), load > cores
}

// unjudged leaves t unjudged when other work disturbed rows.
func (r *results) unjudged(t *target, rows ...growthRow) {
	if why, bad := r.noisy(rows...); bad && t.measured != "" {
		t.known = false
		t.measured += " — not judged: " + why
	}
}

// addBounded reads one result line of bench/bounded; it reports whether
// the line was one.
func (r *results) addBounded(fs []string) bool {
	if r.bounded == nil {
		r.bounded = &boundedResults{metrics: map[string]float64{}, bigrun: map[string]float64{}}
	}
	b := r.bounded
	num := func(i int) float64 {
		if i >= len(fs) {
			return 0
		}
		v, _ := strconv.ParseFloat(fs[i], 64)
		return v
	}
	switch fs[0] {
	case "growth":
		if len(fs) < 8 {
			return true
		}
		b.growth = append(b.growth, growthRow{target: fs[1], workload: "tick", runs: int(num(2)), conns: int(num(3)), rps: num(4), p50: num(5) / 1000, p99: num(6) / 1000, errs: num(7),
			other: num(8), hasOther: len(fs) > 8})
	case "list":
		if len(fs) < 10 {
			return true
		}
		b.growth = append(b.growth, growthRow{target: fs[1], workload: fs[3], runs: int(num(2)), conns: int(num(4)), rps: num(5), p50: num(6) / 1000, p99: num(7) / 1000, errs: num(8),
			other: num(9), hasOther: true})
	case "metrics":
		if len(fs) >= 4 {
			b.metrics[fs[1]+" "+fs[2]] = num(3)
		}
	case "bigrun":
		if len(fs) >= 3 {
			b.bigrun[fs[1]] = num(2)
		}
	case "loadavg":
		b.load = append(b.load, num(2))
	case "startup":
		st := &b.startup
		st.hasAny = true
		switch fs[1] {
		case "records":
			st.records = num(2)
		case "check_us":
			st.check, st.hasCheck = num(2), true
		case "listen_us":
			st.listen = append(st.listen, num(3))
		case "ready_us":
			st.ready = append(st.ready, num(3))
		case "rss":
			st.rss = append(st.rss, num(3))
		case "hwm":
			st.hwm = append(st.hwm, num(3))
		}
	default:
		return false
	}
	return true
}

func (b *boundedResults) find(workload, target string, runs, conns int) (growthRow, bool) {
	for _, g := range b.growth {
		if g.workload == workload && g.target == target && g.runs == runs && g.conns == conns {
			return g, true
		}
	}
	return growthRow{}, false
}

// listTargets are the stores whose GET /runs pages are judged: memory and
// SQLite always, Postgres when the growth table measured it.
func (b *boundedResults) listTargets() []string {
	ts := []string{"memory", "sqlite"}
	for _, g := range b.growth {
		if g.target == "postgres" {
			return append(ts, "postgres")
		}
	}
	return ts
}

// largest is the most runs the growth table measured for target.
func (b *boundedResults) largest(target string) int {
	n := 0
	for _, g := range b.growth {
		if g.target == target && g.runs > n {
			n = g.runs
		}
	}
	return n
}

func (r *results) boundedTargets() []target {
	b := r.bounded
	if b == nil {
		return nil
	}
	var ts []target
	for _, tg := range []struct {
		target string
		p99    float64
	}{{"memory", 5}, {"sqlite", 15}} {
		n := b.largest(tg.target)
		t := target{name: fmt.Sprintf("Transitions, %s, at 1,000,000 stored runs ≥ 0.9 of the empty store's rps", tg.target)}
		if empty, ok := b.find("tick", tg.target, 0, 64); ok && n > 0 {
			if full, ok := b.find("tick", tg.target, n, 64); ok && empty.rps > 0 {
				t.known, t.met = n >= 1_000_000, full.rps/empty.rps >= 0.9
				t.measured = fmt.Sprintf("%.2f at %s runs (%s vs %s rps)%s", full.rps/empty.rps, thousands(float64(n)), thousands(full.rps), thousands(empty.rps), sizeNote(n))
				r.unjudged(&t, empty, full)
			}
		}
		ts = append(ts, t)
		t = target{name: fmt.Sprintf("Transitions, %s, at 1,000,000 stored runs: p99 < %.0f ms at 64 connections, < 5 ms at 16", tg.target, tg.p99)}
		if c64, ok := b.find("tick", tg.target, n, 64); ok {
			c16, ok16 := b.find("tick", tg.target, n, 16)
			t.known = n >= 1_000_000
			t.met = c64.p99 < tg.p99 && (!ok16 || c16.p99 < 5)
			t.measured = fmt.Sprintf("%.1f ms at 64", c64.p99)
			if ok16 {
				t.measured += fmt.Sprintf(", %.1f ms at 16", c16.p99)
			}
			t.measured += fmt.Sprintf(" (%s runs)%s", thousands(float64(n)), sizeNote(n))
			r.unjudged(&t, c64, c16)
		}
		ts = append(ts, t)
	}
	for _, tg := range b.listTargets() {
		n := b.largest(tg)
		t := target{name: fmt.Sprintf("GET /runs first page (limit=50; unfiltered and filtered), %s, at 1,000,000 stored runs ≥ 0.9 of the rps at 0", tg)}
		var parts []string
		for _, wl := range []string{"list", "list_filtered"} {
			for _, full := range b.growth {
				empty, ok := b.find(wl, tg, 0, full.conns)
				if full.workload != wl || full.target != tg || full.runs != n || n == 0 || !ok || empty.rps == 0 {
					continue
				}
				ratio := full.rps / empty.rps
				part := fmt.Sprintf("%s %.2f (%s vs %s rps, p50 %s vs %s, %d connection(s))", strings.TrimPrefix(wl, "list_"), ratio, thousands(full.rps), thousands(empty.rps), ms(full.p50), ms(empty.p50), full.conns)
				// A page disturbed by other work is shown, not judged;
				// the target is judged on the others.
				if why, bad := r.noisy(empty, full); bad {
					part += " (not judged: " + why + ")"
				} else {
					if !t.known {
						t.known, t.met = n >= 1_000_000, true
					}
					t.met = t.met && ratio >= 0.9
				}
				parts = append(parts, part)
			}
		}
		if len(parts) > 0 {
			t.measured = strings.Join(parts, "; ") + fmt.Sprintf(" at %s runs%s", thousands(float64(n)), sizeNote(n))
		}
		ts = append(ts, t)
	}
	t := target{name: "GET /metrics at 1,000,000 runs < 10 ms"}
	for _, tg := range []string{"memory", "sqlite"} {
		n := b.largest(tg)
		if v, ok := b.metrics[fmt.Sprintf("%s %d", tg, n)]; ok {
			first := t.measured == ""
			t.known = (first || t.known) && n >= 1_000_000
			t.met = (first || t.met) && v < 10_000
			if !first {
				t.measured += "; "
			}
			t.measured += fmt.Sprintf("%s %.2f ms at %s runs%s", tg, v/1000, thousands(float64(n)), sizeNote(n))
		}
	}
	ts = append(ts, t)
	if st := b.startup; len(st.listen) > 0 {
		worst := slices.Max(st.listen)
		ts = append(ts, target{name: "Start-up with 1,000,000 ledger records < 1 s (exec to /healthz answering, the worst start)", known: st.records >= 1_000_000, met: worst < 1e6,
			measured: fmt.Sprintf("%s (median %s of %d starts) with %s records%s", ms(worst/1000), ms(stats.Median(st.listen)/1000), len(st.listen), thousands(st.records), sizeNote(int(st.records)))})
	}
	g := b.bigrun
	if v, ok := g["db_used_per_tick"]; ok {
		ts = append(ts, target{name: "A run with 1 MB of data ticked 300 times: < 2 KB stored per tick (SQLite, after a clean shutdown)", known: true, met: v < 2048,
			measured: fmt.Sprintf("%.0f B per tick (pages in use; the file grew %.0f B per tick) over %.0f ticks of %s bytes", v, g["db_file_per_tick"], g["ticks"], thousands(g["data_bytes"]))})
	}
	for _, k := range []struct{ key, label string }{{"rss_events_default", "GET .../events (default page)"}, {"rss_stream_from_0", "a stream resumed from 0"}} {
		if v, ok := g[k.key]; ok {
			ts = append(ts, target{name: "That run: peak RSS of " + k.label + " < 64 MB above idle", known: true, met: v < 64<<20, measured: mb(v)})
		}
	}
	if v, ok := g["command_big-row_read_bytes"]; ok {
		ts = append(ts, target{name: fmt.Sprintf("POST /api/commands/{key}, %.0f versions of 1 MB: reads < 8 MB", g["versions"]), known: true, met: v < 8<<20, measured: mb(v) + " read (rchar)"})
		rss := g["command_big-row_rss"]
		ts = append(ts, target{name: "… peak RSS < 32 MB above idle", known: true, met: rss < 32<<20, measured: mb(rss)})
		one, many := g["command_one-row_median_us"], g["command_big-row_median_us"]
		ts = append(ts, target{name: "… latency like a key with one version (within 1.5×)", known: true, met: one > 0 && many < 1.5*one,
			measured: fmt.Sprintf("%.2f ms vs %.2f ms", many/1000, one/1000)})
	}
	return ts
}

func sizeNote(n int) string {
	if n < 1_000_000 {
		return " — smaller than the target's size: not a verdict on it"
	}
	return ""
}

// ms formats a latency given in ms.
func ms(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1f s", v/1000)
	}
	return fmt.Sprintf("%.2f ms", v)
}

func mb(v float64) string { return fmt.Sprintf("%.1f MB", v/(1<<20)) }

func (r *results) writeBounded(w *strings.Builder) {
	b := r.bounded
	if b == nil || (len(b.growth) == 0 && len(b.bigrun) == 0 && !b.startup.hasAny) {
		return
	}
	fmt.Fprintf(w, "## Bounded cost: growth with stored runs and history\n\n")
	if r.sectionOnly {
		fmt.Fprintf(w, "Measured on %s at commit %s (%s, %s cores) by `bench/run` with only this part (raw results: `bench/results/bounded.tsv`), apart from the tables above, which come from the last full run.\n\n", r.meta["date"], r.meta["commit"], r.meta["cpu"], r.meta["cores"])
	}
	if len(b.growth) > 0 || len(b.bigrun) > 0 {
		fmt.Fprintf(w, "`bench/bounded` (%s). Each row: a server already holding RUNS runs (created with `POST /runs` before, on the same server; SQLite databases built once under BENCH_TMP and reused), plus the runs the rows tick; then the workload from as many connections as the row says for the measured time after a warm-up (`wrk -t1`, as in the HTTP table; a Go client, each connection on its own run, when wrk is missing): `POST /runs/{id}/transitions/tick` round-robin over as many new runs, or the first page of `GET /runs` (every stored run is a loop-v1 run in LOOP, so the filter matches them all and the page is full). \"Other CPU\": the CPU time, in cores, that processes other than the server and the load generator (and the hypervisor, as steal time) used during the measured window (user, system and steal time in `/proc/stat` less theirs); the growth targets are judged only when it stays under %.2f cores. GET /metrics: median of 21 requests on that server.\n\n", r.meta["cmd_bounded"], maxOther)
	}
	if len(b.load) > 0 {
		fmt.Fprintf(w, "Load during the growth table: 1-minute load average %.2f at the start, %.2f at most, %.2f at the end (read before each server's workloads). It counts the benchmark's own two busy threads, the server on one core and wrk on the other, so it is about 2 on an otherwise idle machine.\n\n", b.load[0], slices.Max(b.load), b.load[len(b.load)-1])
	}
	if len(b.growth) > 0 {
		fmt.Fprintln(w, "| Store | Workload | Stored runs | Connections | rps | vs empty store | p50 | p99 | errors | other CPU | GET /metrics |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		rows := slices.Clone(b.growth)
		order := map[string]int{"tick": 0, "list": 1, "list_filtered": 2}
		slices.SortStableFunc(rows, func(x, y growthRow) int {
			if c := strings.Compare(x.target, y.target); c != 0 {
				return c
			}
			if x.workload != y.workload {
				return order[x.workload] - order[y.workload]
			}
			if x.conns != y.conns {
				return y.conns - x.conns
			}
			return x.runs - y.runs
		})
		for _, g := range rows {
			rel := "—"
			if e, ok := b.find(g.workload, g.target, 0, g.conns); ok && e.rps > 0 {
				rel = fmt.Sprintf("%.2f", g.rps/e.rps)
			}
			met := "—"
			if v, ok := b.metrics[fmt.Sprintf("%s %d", g.target, g.runs)]; ok {
				met = fmt.Sprintf("%.2f ms", v/1000)
			}
			other := "—"
			if g.hasOther {
				other = fmt.Sprintf("%.2f", g.other)
			}
			fmt.Fprintf(w, "| %s | `%s` | %s | %d | %s | %s | %.2f ms | %.2f ms | %.0f | %s | %s |\n", g.target, g.label(), thousands(float64(g.runs)), g.conns, thousands(g.rps), rel, g.p50, g.p99, g.errs, other, met)
		}
		fmt.Fprintln(w)
	}
	if g := b.bigrun; len(g) > 0 {
		fmt.Fprintf(w, "A run of `bench/bigrun-v1.yaml` with %s bytes of data, ticked %.0f times (each tick writes `n`), on SQLite; a key with %.0f versions of a %s-byte directory row and a key with one. Stored bytes: the database's pages in use (page_count − freelist_count) after a clean shutdown, before and after the ticks. Peak RSS: VmHWM after resetting it (`/proc/PID/clear_refs`), minus VmRSS before. Bytes read: `rchar` of `/proc/PID/io` (every read(2)/pread(2) of the server, the request included); the worst of 21 requests.\n\n", thousands(g["data_bytes"]), g["ticks"], g["versions"], thousands(g["data_bytes"]))
		fmt.Fprintln(w, "| Figure | Value |")
		fmt.Fprintln(w, "|---|--:|")
		for _, row := range []struct{ key, label, unit string }{
			{"db_bytes_run", "Database with the run created (file bytes)", "B"},
			{"db_used_per_tick", "Stored per tick (pages in use)", "B"},
			{"db_file_per_tick", "File growth per tick", "B"},
			{"rss_events_default", "GET .../events (default page of 100): peak RSS above idle", "MB"},
			{"rss_events_1000", "GET .../events?limit=1000: peak RSS above idle", "MB"},
			{"rss_stream_from_0", "Stream resumed from 0 to the last event: peak RSS above idle", "MB"},
			{"command_big-row_read_bytes", "POST /api/commands/{key}, many versions: bytes read", "MB"},
			{"command_big-row_rss", "… peak RSS above idle", "MB"},
			{"command_big-row_median_us", "… median latency", "ms"},
			{"command_one-row_read_bytes", "POST /api/commands/{key}, one version: bytes read", "MB"},
			{"command_one-row_rss", "… peak RSS above idle", "MB"},
			{"command_one-row_median_us", "… median latency", "ms"},
		} {
			v, ok := g[row.key]
			if !ok {
				continue
			}
			s := ""
			switch row.unit {
			case "B":
				s = thousands(v) + " B"
			case "MB":
				s = mb(v)
			case "ms":
				s = fmt.Sprintf("%.2f ms", v/1000)
			}
			fmt.Fprintf(w, "| %s | %s |\n", row.label, s)
		}
		fmt.Fprintln(w)
	}
	if st := b.startup; st.hasAny {
		fmt.Fprintf(w, "Start-up (%s): `asmp serve --db FILE` started %d times on a SQLite database of %s ledger records (directory rows and their versions, invocations, executed ones with their results; written by the `oip` package over the SQLite store with 128 concurrent dispatchers, so one signed checkpoint per group commit, as a server under load writes them; built once under BENCH_TMP and reused). Listening: from exec until `GET /healthz` answers 200 (start-up checks the records after the last verified point, the head file and the newest checkpoint); ready: until `GET /readyz` answers 200 (the full pass over every record, in the background). The first start after the database was built also checks the records its writer left unchecked (up to about 1,024) and dispatches the example rows. RSS: VmRSS once ready, and VmHWM. `asmp ledger check`: the full pass offline, wall time.\n\n", r.meta["cmd_startup"], len(st.listen), thousands(st.records))
		fmt.Fprintln(w, "| Figure | Median | Worst |")
		fmt.Fprintln(w, "|---|--:|--:|")
		for _, row := range []struct {
			label string
			v     []float64
			unit  string
		}{
			{"exec → `/healthz` answering (listening and serving)", st.listen, "us"},
			{"exec → `/readyz` ready (background full pass done)", st.ready, "us"},
			{"RSS once ready", st.rss, "MB"},
			{"Peak RSS (VmHWM)", st.hwm, "MB"},
		} {
			if len(row.v) == 0 {
				continue
			}
			f := func(v float64) string {
				if row.unit == "MB" {
					return mb(v)
				}
				return ms(v / 1000)
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", row.label, f(stats.Median(row.v)), f(slices.Max(row.v)))
		}
		if st.hasCheck {
			fmt.Fprintf(w, "| `asmp ledger check --db FILE` (full pass, offline) | %s | |\n", ms(st.check/1000))
		}
		fmt.Fprintln(w)
	}
}

// boundedPrefixes start the names of the targets boundedTargets writes,
// now and in earlier reports.
var boundedPrefixes = []string{"Start-up with ", "Transitions, ", "GET /metrics at ", "GET /runs first page", "A run with 1 MB", "That run: ", "POST /api/commands/", "… "}

// rewriteSection rewrites the bounded-cost section of the report at path,
// and that section's rows of its targets table, from r; the rest of the
// report is kept. With check, a missed target is an error.
func rewriteSection(path, section string, r *results, check bool) error {
	if section != "bounded" {
		return fmt.Errorf("-section %q: only bounded can be rewritten alone", section)
	}
	if r.bounded == nil {
		return fmt.Errorf("%s: no bounded-cost results to write", path)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-section needs the report to rewrite: %w", err)
	}
	doc := string(old)
	r.sectionOnly = true
	var sec strings.Builder
	r.writeBounded(&sec)
	start := strings.Index(doc, "\n## Bounded cost")
	if start < 0 {
		if start = strings.Index(doc, "\n## Go benchmarks"); start < 0 {
			start = strings.Index(doc, "\n## Commands")
		}
		if start < 0 {
			return fmt.Errorf("%s: no place for the bounded-cost section", path)
		}
		doc = doc[:start+1] + sec.String() + doc[start+1:]
	} else {
		end := strings.Index(doc[start+1:], "\n## ")
		if end < 0 {
			return fmt.Errorf("%s: the bounded-cost section has no end", path)
		}
		doc = doc[:start+1] + sec.String() + doc[start+1+end+1:]
	}
	ts := r.boundedTargets()
	var rows strings.Builder
	writeTargets(&rows, ts)
	newRows := strings.SplitAfter(rows.String(), "\n")[2:] // below the header
	head := strings.Index(doc, "## Targets\n\n")
	if head < 0 {
		return fmt.Errorf("%s: no targets table", path)
	}
	tableStart := head + len("## Targets\n\n")
	tableEnd := strings.Index(doc[tableStart:], "\n\n")
	if tableEnd < 0 {
		return fmt.Errorf("%s: the targets table has no end", path)
	}
	var table []string
	at := -1
	for _, line := range strings.SplitAfter(doc[tableStart:tableStart+tableEnd+1], "\n") {
		name := strings.TrimPrefix(strings.SplitN(line, " | ", 2)[0], "| ")
		if slices.ContainsFunc(boundedPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			if at < 0 {
				at = len(table)
			}
			continue
		}
		table = append(table, line)
	}
	if at < 0 {
		at = len(table) - 1 // before the empty string after the last newline
	}
	table = slices.Insert(table, at, newRows[:len(newRows)-1]...)
	doc = doc[:tableStart] + strings.Join(table, "") + doc[tableStart+tableEnd+1:]
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return err
	}
	writeTargets(os.Stdout, ts)
	if check {
		for _, t := range ts {
			if t.known && !t.met {
				return fmt.Errorf("target missed: %s (%s)", t.name, t.measured)
			}
		}
	}
	return nil
}
