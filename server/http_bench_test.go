package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/workflow"
)

// Benchmarks of whole API requests, in-process (no network): the handler
// chain with its middleware, routing, engine, store and JSON. They are the
// place to profile the request path:
//
//	go test -run '^$' -bench BenchmarkAPI -cpuprofile cpu.pprof ./server/
//
// Performance is never asserted here; bench/run measures the real binary
// over loopback and publishes the figures in docs/PERFORMANCE.md.

func benchServer(b *testing.B, st store.Store) http.Handler {
	b.Helper()
	w := workflow.New("loop-v1", "LOOP")
	w.State("LOOP").Hint("Tick as often as you like.")
	w.Transition("LOOP", "tick", "LOOP")
	e, err := engine.New(st, []*workflow.Definition{examples.ConfigWizard(), w.MustBuild()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := server.New(e, nil)
	b.Cleanup(func() { srv.Shutdown(); st.Close() })
	return srv
}

func benchDo(b *testing.B, h http.Handler, method, path, body string, want int) *httptest.ResponseRecorder {
	var rd *bytes.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, "http://127.0.0.1:8000"+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	return rec
}

func benchRun(b *testing.B, h http.Handler, workflowID string, actions ...string) string {
	rec := benchDo(b, h, "POST", "/runs", `{"workflow_id":"`+workflowID+`"}`, http.StatusCreated)
	var f struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil {
		b.Fatal(err)
	}
	for _, a := range actions {
		benchDo(b, h, "POST", "/runs/"+f.RunID+"/transitions/"+a, "{}", http.StatusOK)
	}
	return f.RunID
}

// BenchmarkAPI runs the bench/run workloads in-process on each store.
func BenchmarkAPI(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memory", func(b *testing.B) store.Store { return memstore.New() }},
		{"sqlite", func(b *testing.B) store.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	// The floor: the same requests and recorder, a handler that only
	// writes a fixed 600-byte JSON (what bench/noop does over the network).
	b.Run("noop/GET", func(b *testing.B) {
		body := bytes.Repeat([]byte("x"), 600)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(body)
		})
		b.ReportAllocs()
		for b.Loop() {
			benchDo(b, h, "GET", "/runs/x", "", http.StatusOK)
		}
	})
	for _, sc := range stores {
		b.Run(sc.name+"/POST-runs", func(b *testing.B) {
			h := benchServer(b, sc.open(b))
			b.ReportAllocs()
			for b.Loop() {
				benchDo(b, h, "POST", "/runs", "{}", http.StatusCreated)
			}
		})
		b.Run(sc.name+"/GET-frame", func(b *testing.B) {
			h := benchServer(b, sc.open(b))
			id := benchRun(b, h, "config-wizard-v1", "start")
			b.ReportAllocs()
			for b.Loop() {
				benchDo(b, h, "GET", "/runs/"+id, "", http.StatusOK)
			}
		})
		b.Run(sc.name+"/GET-cli", func(b *testing.B) {
			h := benchServer(b, sc.open(b))
			id := benchRun(b, h, "config-wizard-v1", "start")
			b.ReportAllocs()
			for b.Loop() {
				benchDo(b, h, "GET", "/runs/"+id+"/cli", "", http.StatusOK)
			}
		})
		b.Run(sc.name+"/POST-transition", func(b *testing.B) {
			h := benchServer(b, sc.open(b))
			id := benchRun(b, h, "loop-v1")
			path := "/runs/" + id + "/transitions/tick"
			b.ReportAllocs()
			for b.Loop() {
				benchDo(b, h, "POST", path, "{}", http.StatusOK)
			}
		})
		b.Run(sc.name+"/POST-transition-parallel", func(b *testing.B) {
			h := benchServer(b, sc.open(b))
			b.ReportAllocs()
			b.SetParallelism(32) // many concurrent requests, as under load
			b.RunParallel(func(pb *testing.PB) {
				path := "/runs/" + benchRun(b, h, "loop-v1") + "/transitions/tick"
				for pb.Next() {
					benchDo(b, h, "POST", path, "{}", http.StatusOK)
				}
			})
		})
	}
}
