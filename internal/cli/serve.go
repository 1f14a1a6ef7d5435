package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/workflow"
)

type serveFlags struct {
	addr       string
	db         string
	publicURL  string
	trustProxy bool
	insecure   bool
	workers    int
	taskLease  time.Duration
	heartbeat  time.Duration
	grace      time.Duration
	logLevel   string
	logFormat  string
	maxBody    int64
	defaultWF  string
}

func init() { register(newServeCmd) }

func newServeCmd(env *Env) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve [WORKFLOW_FILE...]",
		Short: "Serve workflows over HTTP (no files: the built-in examples)",
		Long: `Serve workflows as an ASMP server.

With no files, serves the built-in examples: config-wizard-v1 (the default)
and expense-approval-v1. With files (YAML or JSON), serves those; the first
is the default workflow.

--db takes a SQLite file path (default asmp.db, created if missing),
:memory: for a store that lives as long as the process.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServe(cmd.Context(), env, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8000", "address to listen on (loopback by default)")
	fl.StringVar(&f.db, "db", "asmp.db", "database: a SQLite file path, or :memory:")
	fl.StringVar(&f.publicURL, "public-url", "", "base URL clients use, e.g. https://asmp.example.com (default: from each request's Host)")
	fl.BoolVar(&f.trustProxy, "trust-proxy", false, "trust X-Forwarded-Proto/X-Forwarded-Host from a reverse proxy")
	fl.BoolVar(&f.insecure, "insecure", false, "allow an open server (no tokens) to listen on a non-loopback address")
	fl.IntVar(&f.workers, "workers", 4, "background tasks run at once")
	fl.DurationVar(&f.taskLease, "task-lease", engine.DefaultLease, "how long a task stays claimed without renewal; a crashed server's tasks run again after it")
	fl.DurationVar(&f.heartbeat, "heartbeat", server.DefaultHeartbeat, "interval of heartbeat lines on idle streams")
	fl.DurationVar(&f.grace, "shutdown-grace", 10*time.Second, "on SIGINT/SIGTERM, how long running requests and tasks may take to finish")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json (logs go to stderr)")
	fl.Int64Var(&f.maxBody, "max-body", server.DefaultMaxBody, "request body limit in bytes")
	fl.StringVar(&f.defaultWF, "default-workflow", "", "workflow used when POST /runs names none (default: the first)")
	return cmd
}

func newLogger(env *Env, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(env.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(env.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// openStore opens the store named by --db. keyPath is where the ledger's
// signing key lives ("" for an in-memory store: a new key per process).
func openStore(db string) (st store.Store, desc, keyPath string, err error) {
	switch {
	case db == ":memory:":
		return memstore.New(), "memory (nothing survives a restart)", "", nil
	case strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://"):
		return nil, "", "", errors.New("--db postgres://…: Postgres is not built into this binary yet; use a SQLite path or :memory:")
	default:
		s, err := sqlite.Open(db)
		if err != nil {
			return nil, "", "", err
		}
		return s, "sqlite " + s.Path(), s.Path() + ".key", nil
	}
}

func loadWorkflows(files []string) ([]*workflow.Definition, error) {
	if len(files) == 0 {
		return examples.All(), nil
	}
	var defs []*workflow.Definition
	var errs []error
	for _, f := range files {
		d, err := workflow.LoadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defs = append(defs, d)
	}
	return defs, errors.Join(errs...)
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServe(ctx context.Context, env *Env, f *serveFlags, files []string) error {
	log, err := newLogger(env, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	defs, err := loadWorkflows(files)
	if err != nil {
		return err
	}
	for _, d := range defs {
		for _, w := range d.Warnings {
			log.Warn("workflow warning", "workflow", d.ID, "source", d.Source, "problem", w.String())
		}
	}
	if !isLoopback(f.addr) && !f.insecure {
		return fmt.Errorf("refusing to listen on %s: this server has no tokens, so anyone who can reach it could drive every run. Listen on loopback (127.0.0.1), or pass --insecure if you really mean it", f.addr)
	}
	st, dbDesc, keyPath, err := openStore(f.db)
	if err != nil {
		return err
	}
	defer st.Close()
	ledger, err := oip.New(st, &oip.Options{KeyPath: keyPath, Logger: log, MaxBody: f.maxBody})
	if err != nil {
		return fmt.Errorf("opening the OIP ledger: %w", err)
	}
	eng, err := engine.New(st, defs, &engine.Options{Default: f.defaultWF, Logger: log})
	if err != nil {
		return err
	}
	srv := server.New(eng, &server.Options{
		PublicURL:  f.publicURL,
		TrustProxy: f.trustProxy,
		MaxBody:    f.maxBody,
		Heartbeat:  f.heartbeat,
		Logger:     log,
		API:        ledger.Handler(),
	})
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	workers := eng.StartWorkers(&engine.WorkerOptions{Workers: f.workers, Lease: f.taskLease})
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second, // streams lift it for themselves
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ids := make([]string, len(defs))
	for i, d := range defs {
		ids[i] = d.ID
	}
	url := "http://" + ln.Addr().String()
	if f.publicURL != "" {
		url = f.publicURL
	}
	fmt.Fprintf(env.Stderr, "asmp %s listening on http://%s\n", version(), ln.Addr())
	log.Info("serving", "url", url, "ledger_key", ledger.VerifierKey(), "workflows", strings.Join(ids, ","), "default", eng.Default().ID, "db", dbDesc, "auth", "none (open server: every caller holds every scope)")

	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		workers.Stop(0)
		return fmt.Errorf("serve: %w", err)
	case <-sigCtx.Done():
	}
	log.Info("shutting down", "grace", f.grace)
	srv.Shutdown() // streams send a final line and return
	sctx, cancel := context.WithTimeout(context.Background(), f.grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("requests still running at the deadline were cut off", "err", err)
	}
	workers.Stop(f.grace)
	eng.Hub().CloseAll()
	log.Info("stopped")
	return nil
}
