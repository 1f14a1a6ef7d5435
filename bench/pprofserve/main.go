// Command pprofserve is asmp serve wired the same way as internal/app/cli's
// serve command (engine, HTTP API, OIP ledger under /api/, task workers),
// in one process with net/http/pprof on a second, separate listener. It is
// bench tooling only: the asmp binary has no pprof endpoint.
//
//	pprofserve --addr 127.0.0.1:8000 --pprof 127.0.0.1:6060 --db :memory: [WORKFLOW_FILE...]
//	curl -o cpu.pprof 'http://127.0.0.1:6060/debug/pprof/profile?seconds=10'   # while wrk runs
//	go tool pprof -top cpu.pprof
package main

import (
	"context"
	"errors"
	_ "expvar" // registers /debug/vars (memstats) on http.DefaultServeMux
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
	"os"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/workflow"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "API address")
	paddr := flag.String("pprof", "127.0.0.1:6060", "pprof address")
	db := flag.String("db", ":memory:", "a SQLite file path, or :memory:")
	flag.Parse()
	if err := run(*addr, *paddr, *db, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "pprofserve:", err)
		os.Exit(1)
	}
}

func run(addr, paddr, db string, files []string) error {
	defs := examples.All()
	if len(files) > 0 {
		defs = nil
		for _, f := range files {
			d, err := workflow.LoadFile(f)
			if err != nil {
				return err
			}
			defs = append(defs, d)
		}
	}
	var st store.Store
	keyPath := ""
	if db == ":memory:" {
		st = memstore.New()
	} else {
		s, err := sqlite.Open(context.Background(), db, nil)
		if err != nil {
			return err
		}
		st, keyPath = s, s.Path()+".key"
	}
	defer st.Close()
	ledger, err := oip.New(st, &oip.Options{KeyPath: keyPath})
	if err != nil {
		return err
	}
	eng, err := engine.New(st, defs, nil)
	if err != nil {
		return err
	}
	workers := eng.StartWorkers(nil)
	defer workers.Stop(time.Second)
	srv := server.New(eng, &server.Options{API: ledger.API()})
	pln, err := net.Listen("tcp", paddr)
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(pln, nil) }()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "pprofserve listening on http://%s (pprof on http://%s/debug/pprof/)\n", ln.Addr(), pln.Addr())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
