package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The bounded-cost figures (bench/bounded, issue 15): the growth table,
// /metrics with many runs, the large run and the large row.

type growthRow struct {
	target        string
	runs, conns   int
	rps, p50, p99 float64 // p50 and p99 in ms
	errs          float64
}

type boundedResults struct {
	growth  []growthRow
	metrics map[string]float64 // "target runs" -> median µs
	bigrun  map[string]float64
	load    []float64 // 1-minute load averages around the growth table
}

// overloaded reports whether the machine was busier than its cores while
// the growth table ran: its rps and latencies then measure the load.
func (r *results) overloaded() (float64, bool) {
	cores, _ := strconv.ParseFloat(r.meta["cores"], 64)
	if cores == 0 {
		cores = 2
	}
	worst := 0.0
	for _, l := range r.bounded.load {
		worst = max(worst, l)
	}
	return worst, worst > cores
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
		b.growth = append(b.growth, growthRow{target: fs[1], runs: int(num(2)), conns: int(num(3)), rps: num(4), p50: num(5) / 1000, p99: num(6) / 1000, errs: num(7)})
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
	default:
		return false
	}
	return true
}

func (b *boundedResults) find(target string, runs, conns int) (growthRow, bool) {
	for _, g := range b.growth {
		if g.target == target && g.runs == runs && g.conns == conns {
			return g, true
		}
	}
	return growthRow{}, false
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
	}{{"memory", 5}, {"sqlite", 10}} {
		n := b.largest(tg.target)
		t := target{name: fmt.Sprintf("Transitions, %s, at 1,000,000 stored runs ≥ 0.9 of the empty store's rps", tg.target)}
		if empty, ok := b.find(tg.target, 0, 64); ok && n > 0 {
			if full, ok := b.find(tg.target, n, 64); ok && empty.rps > 0 {
				t.known, t.met = true, full.rps/empty.rps >= 0.9 && n >= 1_000_000
				t.measured = fmt.Sprintf("%.2f at %s runs (%s vs %s rps)%s", full.rps/empty.rps, thousands(float64(n)), thousands(full.rps), thousands(empty.rps), sizeNote(n))
			}
		}
		ts = append(ts, t)
		t = target{name: fmt.Sprintf("Transitions, %s, at 1,000,000 stored runs: p99 < %.0f ms at 64 connections, < 5 ms at 16", tg.target, tg.p99)}
		if c64, ok := b.find(tg.target, n, 64); ok {
			c16, ok16 := b.find(tg.target, n, 16)
			t.known = true
			t.met = c64.p99 < tg.p99 && (!ok16 || c16.p99 < 5) && n >= 1_000_000
			t.measured = fmt.Sprintf("%.1f ms at 64", c64.p99)
			if ok16 {
				t.measured += fmt.Sprintf(", %.1f ms at 16", c16.p99)
			}
			t.measured += fmt.Sprintf(" (%s runs)%s", thousands(float64(n)), sizeNote(n))
		}
		ts = append(ts, t)
	}
	if load, bad := r.overloaded(); bad {
		for i := range ts {
			if ts[i].known {
				ts[i].known = false
				ts[i].measured += fmt.Sprintf(" — not judged: the machine's load average reached %.1f while it ran", load)
			}
		}
	}
	t := target{name: "GET /metrics at 1,000,000 runs < 10 ms"}
	for _, tg := range []string{"memory", "sqlite"} {
		n := b.largest(tg)
		if v, ok := b.metrics[fmt.Sprintf("%s %d", tg, n)]; ok {
			t.known = true
			t.met = (t.met || t.measured == "") && v < 10_000 && n >= 1_000_000
			if t.measured != "" {
				t.measured += "; "
			}
			t.measured += fmt.Sprintf("%s %.2f ms at %s runs%s", tg, v/1000, thousands(float64(n)), sizeNote(n))
		}
	}
	ts = append(ts, t)
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

func mb(v float64) string { return fmt.Sprintf("%.1f MB", v/(1<<20)) }

func (r *results) writeBounded(w *strings.Builder) {
	b := r.bounded
	if b == nil || (len(b.growth) == 0 && len(b.bigrun) == 0) {
		return
	}
	fmt.Fprintf(w, "## Bounded cost: growth with stored runs and history\n\n")
	fmt.Fprintf(w, "`bench/bounded` (%s). Each row: a server already holding RUNS runs (created with `POST /runs` before, on the same server; SQLite databases built once under BENCH_TMP and reused), then `POST /runs/{id}/transitions/tick` from as many connections as the row says, round-robin over as many new runs (`wrk -t1`, as in the HTTP table; a Go client, each connection on its own run, when wrk is missing) for the measured time after a warm-up. GET /metrics: median of 21 requests on that server.\n\n", r.meta["cmd_bounded"])
	if len(b.growth) > 0 {
		fmt.Fprintln(w, "| Store | Stored runs | Connections | rps | vs empty store | p50 | p99 | errors | GET /metrics |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
		rows := slices.Clone(b.growth)
		slices.SortStableFunc(rows, func(x, y growthRow) int {
			if c := strings.Compare(x.target, y.target); c != 0 {
				return c
			}
			if x.conns != y.conns {
				return y.conns - x.conns
			}
			return x.runs - y.runs
		})
		for _, g := range rows {
			rel := "—"
			if e, ok := b.find(g.target, 0, g.conns); ok && e.rps > 0 {
				rel = fmt.Sprintf("%.2f", g.rps/e.rps)
			}
			met := "—"
			if v, ok := b.metrics[fmt.Sprintf("%s %d", g.target, g.runs)]; ok {
				met = fmt.Sprintf("%.2f ms", v/1000)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %.2f ms | %.2f ms | %.0f | %s |\n", g.target, thousands(float64(g.runs)), g.conns, thousands(g.rps), rel, g.p50, g.p99, g.errs, met)
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
}
