// Command pprofserve is asmp serve as the asmpd package builds it (store,
// engine, HTTP API, OIP ledger under /api/, task workers, the timer,
// schedule and webhook delivery loops), in one process with net/http/pprof
// on a second, separate listener. It is bench tooling only: the asmp binary
// has no pprof endpoint.
//
//	pprofserve --addr 127.0.0.1:8000 --pprof 127.0.0.1:6060 --db :memory: [--webhook-allow 127.0.0.1/32] [WORKFLOW_FILE...]
//	curl -o cpu.pprof 'http://127.0.0.1:6060/debug/pprof/profile?seconds=10'   # while wrk runs
//	go tool pprof -top cpu.pprof
package main

import (
	"context"
	_ "expvar" // registers /debug/vars (memstats) on http.DefaultServeMux
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
	"os"
	"os/signal"
	"syscall"

	"github.com/asmp-dev/asmp/asmpd"
	"github.com/asmp-dev/asmp/webhook"
	"github.com/asmp-dev/asmp/workflow"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "API address")
	paddr := flag.String("pprof", "127.0.0.1:6060", "pprof address")
	db := flag.String("db", ":memory:", "a SQLite file path, a postgres:// URL, or :memory:")
	allow := flag.String("webhook-allow", "", "webhook targets admitted besides public https:// ones (as asmp serve --webhook-allow)")
	flag.Parse()
	if err := run(*addr, *paddr, *db, *allow, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "pprofserve:", err)
		os.Exit(1)
	}
}

func run(addr, paddr, db, allow string, files []string) error {
	cfg := asmpd.Config{Addr: addr, DB: db}
	for _, f := range files {
		d, err := workflow.LoadFile(f)
		if err != nil {
			return err
		}
		cfg.Workflows = append(cfg.Workflows, d)
	}
	if allow != "" {
		list, err := webhook.ParseAllowList(allow)
		if err != nil {
			return err
		}
		cfg.WebhookAllow = list
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := asmpd.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	pln, err := net.Listen("tcp", paddr)
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(pln, nil) }()
	fmt.Fprintf(os.Stderr, "pprofserve listening on http://%s (pprof on http://%s/debug/pprof/)\n", d.Addr(), pln.Addr())
	return d.Run(ctx)
}
