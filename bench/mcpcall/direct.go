package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strings"
	"time"
)

// direct measures the server's cost alone: the server's handler is
// called (ServeHTTP) with pre-encoded requests and a recorder, no client
// and no connection, for both the HTTP transition and the MCP tools/call,
// rounds alternating. CPU time is the process's: only the server runs in
// it (and the recorder).
func direct(overHTTP bool, rounds, calls int, cpuprofile string) {
	h, stop := handler(!overHTTP)
	defer stop()
	do := func(method, path string, body []byte, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	// The HTTP side: a run of loop-v1, ticked.
	w := do("POST", "/runs", []byte(`{"workflow_id":"loop-v1"}`))
	var f struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &f); err != nil || w.Code != http.StatusCreated {
		log.Fatalf("POST /runs: %d %s", w.Code, w.Body)
	}
	tickPath, empty := "/runs/"+f.RunID+"/transitions/tick", []byte("{}")
	tickHTTP := func() {
		if w := do("POST", tickPath, empty); w.Code != http.StatusOK {
			log.Fatalf("transition: %d %s", w.Code, w.Body)
		}
	}

	// The MCP side: a session (initialize, initialized), whose current run
	// is another run of loop-v1.
	accept := "application/json, text/event-stream"
	w = do("POST", "/mcp", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpcall","version":"1"}}}`), "Accept", accept)
	sid := w.Header().Get("Mcp-Session-Id")
	if w.Code != http.StatusOK || sid == "" {
		log.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	hdr := []string{"Accept", accept, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"}
	if w := do("POST", "/mcp", []byte(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`), hdr...); w.Code != http.StatusAccepted {
		log.Fatalf("initialized: %d %s", w.Code, w.Body)
	}
	call := func(name, args string) func() {
		body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`)
		return func() {
			w := do("POST", "/mcp", body, hdr...)
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result"`) || strings.Contains(w.Body.String(), `"isError":true`) {
				log.Fatalf("tools/call %s: %d %s", name, w.Code, w.Body)
			}
		}
	}
	call("asmp_start_run", `{"workflow_id":"loop-v1"}`)()
	tickMCP, listMCP := call("tick", "{}"), call("asmp_list_workflows", "{}")
	if os.Getenv("MCPCALL_SHOW") != "" { // what one call answers
		for _, name := range []string{"tick", "asmp_list_workflows"} {
			w := do("POST", "/mcp", []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`), hdr...)
			fmt.Fprintf(os.Stderr, "%s: %d bytes, %s\n%s\n", name, w.Body.Len(), w.Header().Get("Content-Type"), w.Body)
		}
		w := do("POST", tickPath, empty)
		fmt.Fprintf(os.Stderr, "transition: %d bytes\n%s\n", w.Body.Len(), w.Body)
	}

	for range 200 { // warm up both paths
		tickHTTP()
		tickMCP()
		listMCP()
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
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
	for range rounds {
		httpT = append(httpT, measure(calls, tickHTTP, &httpCPU)...)
		mcpT = append(mcpT, measure(calls, tickMCP, &mcpCPU)...)
		floorT = append(floorT, measure(calls/4, listMCP, &floorCPU)...)
	}
	if p := os.Getenv("MCPCALL_MEMPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			log.Fatal(err)
		}
		_ = pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
	report("direct", rounds, calls, httpT, mcpT, floorT, httpCPU, mcpCPU, floorCPU)
}

// report prints the RESULT line.
func report(mode string, rounds, calls int, httpT, mcpT, floorT []time.Duration, httpCPU, mcpCPU, floorCPU time.Duration) {
	hp, hm := stats(httpT)
	mp, mm := stats(mcpT)
	fp, _ := stats(floorT)
	hcpu, mcu, fc := httpCPU/time.Duration(len(httpT)), mcpCPU/time.Duration(len(mcpT)), floorCPU/time.Duration(len(floorT))
	fmt.Printf("RESULT mode=%s rounds=%d calls=%d http_p50_us=%.1f http_mean_us=%.1f http_cpu_us=%.1f mcp_p50_us=%.1f mcp_mean_us=%.1f mcp_cpu_us=%.1f ratio_p50=%.2f ratio_mean=%.2f ratio_cpu=%.2f mcp_floor_p50_us=%.1f mcp_floor_cpu_us=%.1f\n",
		mode, rounds, calls, us(hp), us(hm), us(hcpu), us(mp), us(mm), us(mcu),
		float64(mp)/float64(hp), float64(mm)/float64(hm), float64(mcu)/float64(hcpu), us(fp), us(fc))
}
