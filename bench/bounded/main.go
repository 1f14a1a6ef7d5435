// Command bounded measures how asmp's costs grow with stored data and
// history (issue 15, SPEC section 16 "Bounded cost"). It starts the asmp
// binary itself and prints one tab-separated result line per figure, for
// bench/run and bench/report:
//
//	growth   TARGET RUNS CONNS rps p50_us p99_us errors other_cpu        transitions on a server holding RUNS runs
//	list     TARGET RUNS NAME CONNS rps p50_us p99_us errors other_cpu   GET /runs pages (NAME: list, list_filtered) there
//	metrics  TARGET RUNS median_us                                      GET /metrics on that server
//	loadavg  growth_start|TARGET-RUNS|growth_end LOAD1                  the machine's 1-minute load average
//	bigrun   NAME VALUE                                                 the 1 MB run and the 200-version row
//
// other_cpu is the CPU time, in cores, that processes other than the
// server and the load generator used during the measured window (busy
// time from /proc/stat less theirs): what the machine's other work took
// from the measurement.
//
// Usage:
//
//	bounded -asmp bin/asmp -part growth -sizes 0,100000,1000000 -duration 10s -warmup 2s
//	bounded -asmp bin/asmp -part bigrun -ticks 300 -data-mb 1 -versions 200
//
// growth preloads RUNS runs of bench/loop-v1.yaml over HTTP, then ticks 64
// (and 16) further runs from as many connections for -duration after a
// -warmup, on the same server, then reads the first page of GET /runs
// (unfiltered, and filtered by workflow and status) from -list-conns
// connections for as long. SQLite databases are kept under -tmp
// (asmp-growth-RUNS.db) and reused by later runs. bigrun gives one run of
// bench/bigrun-v1.yaml -data-mb MB of data, ticks it -ticks times, and
// reports the database bytes per tick after a clean shutdown (the WAL
// folded back), the peak RSS above idle of GET .../events and of a stream
// resumed from 0, and POST /api/commands/{key} on a key with -versions
// versions of a 1 MB row against a key with one (bytes read by the
// server, peak RSS above idle, median latency). Peak RSS is VmHWM after
// resetting it (/proc/PID/clear_refs), so Linux only.
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // to read the database's page counts
)

var (
	asmpBin   = flag.String("asmp", "bin/asmp", "the asmp binary")
	part      = flag.String("part", "all", "growth, bigrun, startup or all")
	sizes     = flag.String("sizes", "0,100000,1000000", "stored runs for the growth table")
	targets   = flag.String("targets", "memory,sqlite", "stores for the growth table (memory, sqlite, postgres)")
	pgURL     = flag.String("postgres", "", "a PostgreSQL server for the postgres target: one database per size (asmp_growth_RUNS) is made there and reused")
	conns     = flag.String("conns", "64,16", "connections for the growth table")
	listConns = flag.Int("list-conns", 1, "connections for the GET /runs workloads of the growth table")
	duration  = flag.Duration("duration", 10*time.Second, "measured time of each growth workload")
	warmup    = flag.Duration("warmup", 2*time.Second, "warm-up before each growth workload")
	tmp       = flag.String("tmp", "/var/tmp", "directory for SQLite databases (a disk, not tmpfs)")
	serverCPU = flag.String("server-cpu", "", "pin the server to this CPU with taskset")
	ticks     = flag.Int("ticks", 300, "ticks of the large run")
	dataMB    = flag.Float64("data-mb", 1, "data of the large run, and size of each row version, in MB")
	versions  = flag.Int("versions", 200, "versions of the large row")
	loopFile  = flag.String("loop", "bench/loop-v1.yaml", "the loop workflow")
	bigFile   = flag.String("bigrun", "bench/bigrun-v1.yaml", "the large-run workflow")
	wrkDir    = flag.String("wrk-dir", "bench/wrk", "the wrk scripts (transition.lua); the load is generated with wrk when it is on PATH")
	records   = flag.Int("records", 1_000_000, "ledger records of the start-up database")
	starts    = flag.Int("starts", 5, "starts of the server measured on it")
)

func main() {
	flag.Parse()
	var err error
	switch *part {
	case "growth":
		err = growth()
	case "bigrun":
		err = bigrun()
	case "startup":
		err = startup()
	case "all":
		if err = growth(); err == nil {
			err = bigrun()
		}
		if err == nil {
			err = startup()
		}
	default:
		err = fmt.Errorf("unknown -part %q", *part)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bounded:", err)
		os.Exit(1)
	}
}

func say(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s bounded: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
}

// ---- server --------------------------------------------------------------

type server struct {
	cmd *exec.Cmd
	url string
	pid int
	out *bytes.Buffer
}

var listening = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

func startServer(db string, args ...string) (*server, error) {
	argv := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--rate-limit", "0", "--max-streams", "0", "--log-level", "warn"}, args...)
	name := *asmpBin
	if *serverCPU != "" {
		argv = append([]string{"-c", *serverCPU, name}, argv...)
		name = "taskset"
	}
	cmd := exec.Command(name, argv...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, pid: cmd.Process.Pid, out: &bytes.Buffer{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
			if s.out.Len() < 1<<16 {
				s.out.WriteString(sc.Text() + "\n")
			}
		}
	}()
	select {
	case s.url = <-found:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("server did not start: %s", s.out)
	}
	if *serverCPU != "" {
		// taskset execs asmp: same pid.
		s.pid = cmd.Process.Pid
	}
	return s, nil
}

// stop shuts the server down cleanly (SIGTERM) and waits.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}, Timeout: 120 * time.Second}

func call(method, url string, body []byte, header ...string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// createRuns creates n runs with body, 64 at a time, and returns the ids
// (only when keep).
func createRuns(url string, n int, body []byte, keep bool) ([]string, error) {
	var ids []string
	var mu sync.Mutex
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				code, b, err := call("POST", url+"/runs", body)
				if err != nil || code != 201 {
					firstErr.CompareAndSwap(nil, fmt.Errorf("POST /runs: %d %v %.200s", code, err, b))
					return
				}
				if keep {
					var f struct {
						RunID string `json:"run_id"`
					}
					json.Unmarshal(b, &f)
					mu.Lock()
					ids = append(ids, f.RunID)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	return ids, nil
}

// ---- /proc ---------------------------------------------------------------

func procField(pid int, file, field string) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), file))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/%s", field, pid, file)
}

// peakAbove runs fn and returns the process's peak RSS during it above
// its RSS before, in bytes, and the bytes it read (rchar).
func peakAbove(pid int, fn func() error) (peak, read int64, err error) {
	if err := os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0); err != nil {
		return 0, 0, fmt.Errorf("resetting the peak RSS: %w", err)
	}
	idle, err := procField(pid, "status", "VmRSS")
	if err != nil {
		return 0, 0, err
	}
	r0, err := procField(pid, "io", "rchar")
	if err != nil {
		return 0, 0, err
	}
	if err := fn(); err != nil {
		return 0, 0, err
	}
	hwm, err := procField(pid, "status", "VmHWM")
	if err != nil {
		return 0, 0, err
	}
	r1, _ := procField(pid, "io", "rchar")
	return (hwm - idle) * 1024, r1 - r0, nil
}

// dbUsed returns the bytes of the database's pages in use (the file's
// pages less its free list), read after the server closed it.
func dbUsed(path string) (int64, error) {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var pages, size, free int64
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		return 0, err
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil {
		return 0, err
	}
	if err := db.QueryRow(`PRAGMA freelist_count`).Scan(&free); err != nil {
		return 0, err
	}
	return (pages - free) * size, nil
}

// pgDatabase returns the URL of the database of the growth table's
// postgres target for n stored runs (asmp_growth_N on the -postgres
// server), and whether it already holds them (built by an earlier run);
// otherwise it is made anew, empty.
func pgDatabase(n int) (string, bool, error) {
	if *pgURL == "" {
		return "", false, errors.New("the postgres target needs -postgres URL")
	}
	base, err := url.Parse(*pgURL)
	if err != nil {
		return "", false, fmt.Errorf("-postgres: %w", err)
	}
	name := fmt.Sprintf("asmp_growth_%d", n)
	u := *base
	u.Path = "/" + name
	ctx := context.Background()
	if n > 0 {
		if conn, err := pgx.Connect(ctx, u.String()); err == nil {
			var stored int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&stored)
			_ = conn.Close(ctx)
			if err == nil && stored >= n {
				return u.String(), true, nil
			}
		}
	}
	conn, err := pgx.Connect(ctx, base.String())
	if err != nil {
		return "", false, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`DROP DATABASE IF EXISTS ` + name, `CREATE DATABASE ` + name} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", false, fmt.Errorf("postgres: %s: %w", q, err)
		}
	}
	return u.String(), false, nil
}

// removeDB removes a database file and the files beside it.
func removeDB(db string) {
	for _, p := range []string{db, db + "-wal", db + "-shm", db + "-lock", db + ".key", db + ".key.pub"} {
		os.Remove(p)
	}
}

func dbSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// ---- growth --------------------------------------------------------------

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// lists are the GET /runs workloads of the growth table: the first page
// a console asks for, unfiltered and filtered (every stored run of the
// growth table is a loop-v1 run in LOOP, which is active).
var lists = []struct{ name, path string }{
	{"list", "/runs?limit=50"},
	{"list_filtered", "/runs?limit=50&workflow_id=loop-v1&status=active"},
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "0"
	}
	return f[0]
}

func growth() error {
	ns, err := ints(*sizes)
	if err != nil {
		return err
	}
	cs, err := ints(*conns)
	if err != nil {
		return err
	}
	defer func() { fmt.Printf("loadavg\tgrowth_end\t%s\n", loadavg()) }()
	fmt.Printf("loadavg\tgrowth_start\t%s\n", loadavg())
	for _, target := range strings.Split(*targets, ",") {
		for _, n := range ns {
			db := ":memory:"
			preload := n
			if target == "sqlite" {
				db = filepath.Join(*tmp, fmt.Sprintf("asmp-growth-%d.db", n))
				if n == 0 {
					removeDB(db) // the empty store is always a new one
				} else if fi, err := os.Stat(db); err == nil && fi.Size() > 0 {
					preload = 0 // built by an earlier run: reused
					say("sqlite: reusing %s", db)
				}
			}
			if target == "postgres" {
				var reused bool
				if db, reused, err = pgDatabase(n); err != nil {
					return err
				}
				if reused {
					preload = 0
					say("postgres: reusing %s", db)
				}
			}
			s, err := startServer(db, *loopFile)
			if err != nil {
				return err
			}
			if preload > 0 {
				t0 := time.Now()
				if _, err := createRuns(s.url, preload, []byte(`{"workflow_id":"loop-v1"}`), false); err != nil {
					s.stop()
					return err
				}
				say("%s: %d runs stored in %.1f s", target, preload, time.Since(t0).Seconds())
			}
			ids, err := createRuns(s.url, slices.Max(cs), []byte(`{"workflow_id":"loop-v1"}`), true)
			if err != nil {
				s.stop()
				return err
			}
			fmt.Printf("loadavg\t%s-%d\t%s\n", target, n, loadavg())
			for _, c := range cs {
				m := s.measure(tick(s.url, ids[:c]))
				fmt.Printf("growth\t%s\t%d\t%d\t%.0f\t%d\t%d\t%d\t%.2f\n", target, n, c, m.rps, m.p50.Microseconds(), m.p99.Microseconds(), m.errs, m.other)
				say("%s at %d runs, %d connections: %.0f rps, p50 %v, p99 %v, %d errors; other processes %.2f cores", target, n, c, m.rps, m.p50, m.p99, m.errs, m.other)
			}
			for _, l := range lists {
				m := s.measure(get(s.url+l.path, *listConns))
				fmt.Printf("list\t%s\t%d\t%s\t%d\t%.1f\t%d\t%d\t%d\t%.2f\n", target, n, l.name, *listConns, m.rps, m.p50.Microseconds(), m.p99.Microseconds(), m.errs, m.other)
				say("%s at %d runs, GET %s, %d connections: %.1f rps, p50 %v, p99 %v, %d errors; other processes %.2f cores", target, n, l.path, *listConns, m.rps, m.p50, m.p99, m.errs, m.other)
			}
			s.waitIdle()
			var ms []time.Duration
			for i := 0; i < 21; i++ {
				t0 := time.Now()
				if code, _, err := call("GET", s.url+"/metrics", nil); err != nil || code != 200 {
					s.stop()
					return fmt.Errorf("/metrics: %d %v", code, err)
				}
				ms = append(ms, time.Since(t0))
			}
			slices.Sort(ms)
			fmt.Printf("metrics\t%s\t%d\t%d\n", target, n, ms[len(ms)/2].Microseconds())
			say("%s at %d runs: GET /metrics median %v", target, n, ms[len(ms)/2])
			s.stop()
		}
	}
	return nil
}

// ---- load ------------------------------------------------------------------

// workload is what one measurement sends: with wrk, script (under
// -wrk-dir) on url with env; else, from a Go client, req on each of conns
// connections.
type workload struct {
	conns  int
	script string
	url    string
	env    []string
	req    func(ctx context.Context, conn int) *http.Request
}

// tick is the transition workload: POST .../transitions/tick on the runs
// of ids from as many connections.
func tick(url string, ids []string) workload {
	return workload{conns: len(ids), script: "transition.lua", url: url, env: []string{"RUN_IDS=" + strings.Join(ids, ",")},
		req: func(ctx context.Context, i int) *http.Request {
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/runs/"+ids[i]+"/transitions/tick", strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			return req
		}}
}

// get is GET url from conns connections.
func get(url string, conns int) workload {
	return workload{conns: conns, script: "get.lua", url: url,
		req: func(ctx context.Context, _ int) *http.Request {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			return req
		}}
}

// measured is one measurement: the rate, the median and 99th percentile
// latencies, the failures, and the cores other processes used meanwhile.
type measured struct {
	rps      float64
	p50, p99 time.Duration
	errs     int64
	other    float64
}

// measure waits for the server to be idle, warms w up for -warmup and
// measures it for -duration.
func (s *server) measure(w workload) measured {
	s.waitIdle()
	run(w, *warmup)
	s.waitIdle()
	busy0, srv0, self0 := machineTicks(), procTicks(s.pid), procTicks(os.Getpid())
	t0 := time.Now()
	m, loadTicks := run(w, *duration)
	el := time.Since(t0).Seconds()
	others := machineTicks() - busy0 - (procTicks(s.pid) - srv0) - (procTicks(os.Getpid()) - self0) - loadTicks
	m.other = max(0, float64(others)/clkTck/el)
	return m
}

// clkTck is USER_HZ, the unit of /proc/stat and /proc/PID/stat times.
const clkTck = 100

// machineTicks is the busy time of all CPUs (user, nice, system, steal)
// from /proc/stat. Interrupts are left out: the kernel may not charge
// the loopback traffic's softirq time to the processes it serves.
func machineTicks() int64 {
	b, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var n int64
	for _, i := range []int{1, 2, 3, 8} {
		if i < len(f) {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v
		}
	}
	return n
}

// procTicks is the CPU time (utime + stime) of process pid, all threads.
func procTicks(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	st := string(b)
	f := strings.Fields(st[strings.LastIndex(st, ")")+1:]) // after the command's name: state ppid ... utime stime
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// waitIdle waits (at most a minute) until the server has used less than
// 10% of a core for a quarter of a second: requests left over from a
// workload the load generator gave up on are not counted in the next.
func (s *server) waitIdle() {
	t := procTicks(s.pid)
	for i := 0; i < 240; i++ {
		time.Sleep(250 * time.Millisecond)
		n := procTicks(s.pid)
		if n-t <= 2 {
			return
		}
		t = n
	}
}

var resultLine = regexp.MustCompile(`RESULT requests=\d+ duration_us=\d+ rps=([0-9.]+) p50_us=(\d+) p90_us=\d+ p99_us=(\d+) max_us=\d+ non2xx=(\d+) errors=(\d+)`)

// run sends w for d (with wrk, one thread, when it is on PATH; else from
// a Go client, one connection per goroutine); it returns the measurement
// and the CPU time of the wrk process, if any.
func run(w workload, d time.Duration) (measured, int64) {
	if d <= 0 {
		return measured{}, 0
	}
	if bin, err := exec.LookPath("wrk"); err == nil {
		cmd := exec.Command(bin, "-t1", fmt.Sprintf("-c%d", w.conns), fmt.Sprintf("-d%ds", max(1, int(d.Seconds()))), "--timeout", "10s",
			"-s", filepath.Join(*wrkDir, w.script), w.url)
		cmd.Env = append(os.Environ(), append(w.env, "BENCH_WRK_DIR="+*wrkDir)...)
		out, err := cmd.CombinedOutput()
		var ticks int64
		if cmd.ProcessState != nil {
			ticks = int64((cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()) * clkTck / time.Second)
		}
		m := resultLine.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			say("wrk failed: %v %s", err, out)
			return measured{errs: 1}, ticks
		}
		rps, _ := strconv.ParseFloat(m[1], 64)
		p50, _ := strconv.ParseInt(m[2], 10, 64)
		p99, _ := strconv.ParseInt(m[3], 10, 64)
		n1, _ := strconv.ParseInt(m[4], 10, 64)
		n2, _ := strconv.ParseInt(m[5], 10, 64)
		return measured{rps: rps, p50: time.Duration(p50) * time.Microsecond, p99: time.Duration(p99) * time.Microsecond, errs: n1 + n2}, ticks
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	lat := make([][]time.Duration, w.conns)
	var errs atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range w.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			c := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			for ctx.Err() == nil {
				s := time.Now()
				res, err := c.Do(w.req(ctx, i))
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					errs.Add(1)
					continue
				}
				lat[i] = append(lat[i], time.Since(s))
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return measured{errs: errs.Load()}, 0
	}
	slices.Sort(all)
	return measured{rps: float64(len(all)) / el.Seconds(), p50: all[len(all)/2], p99: all[len(all)*99/100], errs: errs.Load()}, 0
}

// ---- the large run and the large row ----------------------------------------

func bigrun() error {
	size := int(*dataMB * 1e6)
	db := filepath.Join(*tmp, fmt.Sprintf("asmp-bigrun-%d.db", os.Getpid()))
	defer removeDB(db)
	maxBody := strconv.Itoa(size + 1<<20)
	// 1. The run with its data, alone: the database after a clean shutdown.
	s, err := startServer(db, "--max-body", maxBody, *bigFile)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"workflow_id": "bigrun-v1", "data": map[string]any{"blob": strings.Repeat("d", size-20)}})
	ids, err := createRuns(s.url, 1, body, true)
	if err != nil {
		s.stop()
		return err
	}
	id := ids[0]
	s.stop()
	before := dbSize(db)
	usedBefore, err := dbUsed(db)
	if err != nil {
		return err
	}
	// 2. Ticks, then a clean shutdown again.
	if s, err = startServer(db, "--max-body", maxBody, *bigFile); err != nil {
		return err
	}
	for i := 1; i <= *ticks; i++ {
		if code, b, err := call("POST", s.url+"/runs/"+id+"/transitions/tick", []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil || code != 200 {
			s.stop()
			return fmt.Errorf("tick %d: %d %v %.200s", i, code, err, b)
		}
	}
	s.stop()
	after := dbSize(db)
	usedAfter, err := dbUsed(db)
	if err != nil {
		return err
	}
	fmt.Printf("bigrun\tdata_bytes\t%d\n", size)
	fmt.Printf("bigrun\tticks\t%d\n", *ticks)
	fmt.Printf("bigrun\tdb_bytes_run\t%d\n", before)
	fmt.Printf("bigrun\tdb_used_per_tick\t%d\n", (usedAfter-usedBefore)/int64(*ticks))
	fmt.Printf("bigrun\tdb_file_per_tick\t%d\n", (after-before)/int64(*ticks))
	say("%d ticks of a %d-byte run: %d bytes stored per tick (the file grew %d bytes per tick)", *ticks, size,
		(usedAfter-usedBefore)/int64(*ticks), (after-before)/int64(*ticks))
	// 3. Reading the log back: GET events (the default page and a page of
	// 1000) and a stream resumed from 0, on a server restarted on it.
	if s, err = startServer(db, "--max-body", maxBody, *bigFile); err != nil {
		return err
	}
	defer s.stop()
	time.Sleep(time.Second)
	for _, q := range []string{"", "?limit=1000"} {
		peak, _, err := peakAbove(s.pid, func() error {
			code, b, err := call("GET", s.url+"/runs/"+id+"/events"+q, nil)
			if err == nil && code != 200 {
				err = fmt.Errorf("GET events: %d %.200s", code, b)
			}
			return err
		})
		if err != nil {
			return err
		}
		name := "rss_events_default"
		if q != "" {
			name = "rss_events_1000"
		}
		fmt.Printf("bigrun\t%s\t%d\n", name, peak)
		say("GET events%s: peak %d MB above idle", q, peak>>20)
	}
	var lines int
	peak, _, err := peakAbove(s.pid, func() error {
		lines, err = readStream(s.url+"/runs/"+id+"/stream", int64(*ticks+1))
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("bigrun\trss_stream_from_0\t%d\n", peak)
	say("stream from 0 (%d lines): peak %d MB above idle", lines, peak>>20)
	// 4. A key with many versions of a large row, and a key with one.
	row := func(i int) []byte {
		b, _ := json.Marshal(map[string]any{"key": "", "body": map[string]any{"type": "directory_row", "command": "echo",
			"description": fmt.Sprintf("v%d ", i) + strings.Repeat("r", size-100),
			"args":        []any{map[string]any{"name": "word", "type": "string", "required": true}}}})
		return b
	}
	dispatch := func(key string, i int) error {
		var env map[string]any
		json.Unmarshal(row(i), &env)
		env["key"] = key
		b, _ := json.Marshal(env)
		code, out, err := call("POST", s.url+"/api/dispatch", b)
		if err == nil && code != 201 {
			err = fmt.Errorf("dispatch %s v%d: %d %.300s", key, i, code, out)
		}
		return err
	}
	for i := 0; i < *versions; i++ {
		if err := dispatch("big-row", i); err != nil {
			return err
		}
	}
	if err := dispatch("one-row", 0); err != nil {
		return err
	}
	for _, key := range []string{"big-row", "one-row"} {
		var lat []time.Duration
		var peak, read int64
		for i := 0; i < 21; i++ {
			p, r, err := peakAbove(s.pid, func() error {
				t0 := time.Now()
				code, b, err := call("POST", s.url+"/api/commands/"+key, []byte(`{"input":{"word":"hi"}}`))
				lat = append(lat, time.Since(t0))
				if err == nil && code != 200 {
					err = fmt.Errorf("command %s: %d %.200s", key, code, b)
				}
				return err
			})
			if err != nil {
				return err
			}
			peak, read = max(peak, p), max(read, r)
		}
		slices.Sort(lat)
		fmt.Printf("bigrun\tcommand_%s_read_bytes\t%d\n", key, read)
		fmt.Printf("bigrun\tcommand_%s_rss\t%d\n", key, peak)
		fmt.Printf("bigrun\tcommand_%s_median_us\t%d\n", key, lat[len(lat)/2].Microseconds())
		say("POST /api/commands/%s: read %d KB, peak %d MB above idle, median %v", key, read>>10, peak>>20, lat[len(lat)/2])
	}
	fmt.Printf("bigrun\tversions\t%d\n", *versions)
	return nil
}

// readStream reads a stream resumed from 0 until the line with id last.
func readStream(url string, last int64) (int, error) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Last-Event-ID", "0")
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 4<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		var l struct {
			ID int64 `json:"id"`
		}
		json.Unmarshal(sc.Bytes(), &l)
		if l.ID >= last {
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return n, err
	}
	return n, errors.New("the stream ended before the last event")
}
