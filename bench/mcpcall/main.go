// Command mcpcall measures what an MCP tool call costs against a plain
// HTTP transition, both on one server in one run: the same self-loop
// action (LOOP --tick--> LOOP) fired by POST
// /runs/{run_id}/transitions/tick, and by an MCP tools/call of the
// session's dynamic tool "tick" at /mcp (streamable HTTP). Rounds
// alternate between the two so that drift of the machine hits both alike.
//
// By default the server's cost alone is measured: the server's handler is
// called directly (ServeHTTP) with pre-encoded requests (the JSON-RPC
// tools/call of an initialized session, the transition's POST) and a
// recorder, so the process's CPU time is the server's. -loopback serves on
// a loopback port instead and calls with the official Go SDK's MCP client
// and net/http, one call at a time over keep-alive connections: the CPU
// time is then client and server together. As asmp serve does, the
// in-process server's collections are sized by gctune (-gc-floor).
//
//	go run ./bench/mcpcall                    # the server's cost, /mcp through the engine
//	go run ./bench/mcpcall -mcp-over-http     # /mcp as before: its own handler, per tool call
//	go run ./bench/mcpcall -loopback          # over loopback with the SDK's client
//	go run ./bench/mcpcall -url http://127.0.0.1:8000   # a running asmp serve --workflow bench/loop-v1.yaml
//
// Printed (one line):
//
//	RESULT mode=direct|loopback rounds=R calls=N http_p50_us=F http_mean_us=F http_cpu_us=F mcp_p50_us=F mcp_mean_us=F mcp_cpu_us=F
//	  ratio_p50=F ratio_mean=F ratio_cpu=F mcp_floor_p50_us=F mcp_floor_cpu_us=F
//
// ratio = MCP tool call / HTTP transition (the target is at most 1.5), by
// median and mean wall time per call and by CPU time per call (the figure
// that a loaded machine disturbs least); mcp_floor is a tools/call of
// asmp_list_workflows, which reads no run: what the MCP protocol and its
// SDK cost by themselves. -cpuprofile writes a CPU profile of the measured
// rounds; MCPCALL_SHOW=1 prints one answer of each kind (direct mode),
// MCPCALL_MEMPROFILE=FILE an allocation profile.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/bridge/mcpbridge"
	"github.com/asmp-dev/asmp/internal/edge/gctune"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

func main() {
	url := flag.String("url", "", "a running asmp server serving loop-v1 (default: start one in-process)")
	overHTTP := flag.Bool("mcp-over-http", false, "in-process server: /mcp calls the server's handler per request (the previous design)")
	rounds := flag.Int("rounds", 10, "rounds, alternating HTTP and MCP")
	calls := flag.Int("calls", 300, "calls of each kind per round")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured rounds to this file")
	loopback := flag.Bool("loopback", false, "in-process server: call over loopback with the SDK's client (client and server CPU together) instead of the server's handler directly")
	gcFloor := flag.Int64("gc-floor", 32<<20, "in-process server: the GC floor of asmp serve's --gc-floor (0 = Go's default GOGC behaviour)")
	flag.Parse()
	if *url == "" && *gcFloor > 0 && os.Getenv("GOGC") == "" {
		// As asmp serve runs: collections sized by what they scan.
		defer gctune.Start(uint64(*gcFloor), 100).Stop()
	}
	if *url == "" && !*loopback {
		direct(*overHTTP, *rounds, *calls, *cpuprofile)
		return
	}
	if *url == "" {
		u, stop := serve(!*overHTTP)
		defer stop()
		*url = u
	}
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	// The HTTP side: a run of loop-v1, ticked.
	runID := startRun(hc, *url)
	tickHTTP := func() {
		res, err := hc.Post(*url+"/runs/"+runID+"/transitions/tick", "application/json", bytes.NewReader([]byte("{}")))
		if err != nil {
			log.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			log.Fatalf("transition: %d", res.StatusCode)
		}
	}

	// The MCP side: a session whose current run is another run of loop-v1.
	mc := mcp.NewClient(&mcp.Implementation{Name: "mcpcall", Version: "1"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: *url + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "asmp_start_run", Arguments: map[string]any{"workflow_id": "loop-v1"}}); err != nil || res.IsError {
		log.Fatalf("asmp_start_run: %v %v", err, res)
	}
	tickMCP := func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tick", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			log.Fatalf("tools/call tick: %v %+v", err, res)
		}
	}

	listMCP := func() { // the SDK's floor: a static tool that reads nothing of a run
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "asmp_list_workflows", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			log.Fatalf("tools/call asmp_list_workflows: %v %+v", err, res)
		}
	}
	for range 200 { // warm up both paths
		tickHTTP()
		tickMCP()
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var httpT, mcpT, floorT []time.Duration
	var httpCPU, mcpCPU, floorCPU time.Duration
	for range *rounds {
		httpT = append(httpT, measure(*calls, tickHTTP, &httpCPU)...)
		mcpT = append(mcpT, measure(*calls, tickMCP, &mcpCPU)...)
		floorT = append(floorT, measure(*calls/4, listMCP, &floorCPU)...)
	}
	report("loopback", *rounds, *calls, httpT, mcpT, floorT, httpCPU, mcpCPU, floorCPU)
}

// measure calls f n times and returns the wall time of each call, and
// adds the process's CPU time (user and system, client and server alike:
// they share the process) over the n calls to *cpu.
func measure(n int, f func(), cpu *time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	before := cpuTime()
	for i := range out {
		t := time.Now()
		f()
		out[i] = time.Since(t)
	}
	*cpu += cpuTime() - before
	return out
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func stats(ds []time.Duration) (p50, mean time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return s[len(s)/2], sum / time.Duration(len(s))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func startRun(hc *http.Client, url string) string {
	res, err := hc.Post(url+"/runs", "application/json", bytes.NewReader([]byte(`{"workflow_id":"loop-v1"}`)))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	var f struct {
		RunID string `json:"run_id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&f); err != nil || res.StatusCode != http.StatusCreated {
		log.Fatalf("POST /runs: %d %v", res.StatusCode, err)
	}
	return f.RunID
}

// handler builds an open server of loop-v1, with /mcp driving the engine
// in-process (inProcess) or calling the server's own handler.
func handler(inProcess bool) (h http.Handler, stop func()) {
	w := workflow.New("loop-v1", "LOOP")
	w.State("LOOP").Hint("Tick as often as you like.")
	w.Transition("LOOP", "tick", "LOOP")
	eng, err := engine.New(memstore.New(), []*workflow.Definition{w.MustBuild()}, nil)
	if err != nil {
		log.Fatal(err)
	}
	var mh *mcpbridge.Handler
	srv := server.New(eng, &server.Options{MCP: func(s *server.Server) http.Handler {
		o := mcpbridge.HTTPOptions{Base: s.BaseURL}
		if inProcess {
			o.Engine = eng
		}
		mh = mcpbridge.NewHandler(s, o)
		return mh
	}})
	mode := "in-process through the engine"
	if !inProcess {
		mode = "over the server's handler"
	}
	fmt.Fprintf(os.Stderr, "loop-v1, /mcp %s\n", mode)
	return srv, func() { mh.Close(); srv.Shutdown() }
}

// serve starts the server of handler on a loopback port.
func serve(inProcess bool) (url string, stop func()) {
	h, stopH := handler(inProcess)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	hs := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { hs.Close(); stopH() }
}
