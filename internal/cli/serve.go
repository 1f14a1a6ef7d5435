package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/agentstate"
	"github.com/asmp-dev/asmp/internal/gctune"
	"github.com/asmp-dev/asmp/internal/mcpbridge"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/workflow"
)

type serveFlags struct {
	addr       string
	db         string
	publicURL  string
	trustProxy string
	origins    []string
	insecure   bool
	workers    int
	taskLease  time.Duration
	heartbeat  time.Duration
	grace      time.Duration
	logLevel   string
	logFormat  string
	maxBody    int64
	maxRunData int64
	defaultWF  string
	tokens     []string
	rateLimit  string
	rateBurst  int
	maxStreams int
	maxDepth   int
	gcFloor    int64
	retention  time.Duration
	mcpPoll    time.Duration
	mcpRows    string
	exec       execFlags // --allow-exec, --exec-* (invoke.go)
	rotateKey  bool
	resetHead  bool
}

func init() { register(newServeCmd) }

func newServeCmd(env *Env) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve [WORKFLOW_FILE...]",
		Short: "Serve workflows over HTTP (no files: the built-in examples)",
		Long: `Serve workflows as an ASMP server.

With no files, serves the built-in examples: config-wizard-v1 (the default),
expense-approval-v1 and number-facts-v1 (whose directory rows run only with
--allow-exec --exec-allow factor --exec-allow expr; their rows are
dispatched at start-up). With files (YAML or JSON), serves those; the first
is the default workflow.

Execution of directory rows is off unless --allow-exec is given, and then
only the programs named by --exec-allow run; see docs/SECURITY.md.

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
	fl.StringVar(&f.trustProxy, "trust-proxy", "", "CIDR,... of reverse proxies whose X-Forwarded-For/-Proto/-Host to believe, e.g. 127.0.0.1/32 (the client is the rightmost X-Forwarded-For hop outside them)")
	fl.StringArrayVar(&f.origins, "allow-origin", nil, "a browser origin (scheme://host[:port]) besides the server's own that may send POST, PUT, PATCH and DELETE requests (repeatable)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow an open server (no tokens) to listen on a non-loopback address")
	fl.IntVar(&f.workers, "workers", 4, "background tasks run at once")
	fl.DurationVar(&f.taskLease, "task-lease", engine.DefaultLease, "how long a task stays claimed without renewal; a crashed server's tasks run again after it")
	fl.DurationVar(&f.heartbeat, "heartbeat", server.DefaultHeartbeat, "interval of heartbeat lines on idle streams")
	fl.DurationVar(&f.grace, "shutdown-grace", 10*time.Second, "on SIGINT/SIGTERM, how long running requests and tasks may take to finish")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json (logs go to stderr)")
	fl.Int64Var(&f.maxBody, "max-body", server.DefaultMaxBody, "request body limit in bytes")
	fl.Int64Var(&f.maxRunData, "max-run-data", 0, "limit in bytes of a run's data and milestones (JSON): a start or transition, a task's result included, that would exceed it gets 413 (0 = --max-body)")
	fl.StringVar(&f.defaultWF, "default-workflow", "", "workflow used when POST /runs names none (default: the first)")
	fl.StringArrayVar(&f.tokens, "token", nil, "bearer token NAME=SECRET[:SCOPE,...] (repeatable; also ASMP_TOKENS, entries separated by ';'; scopes read,runs,dispatch,exec; none = all)")
	fl.StringVar(&f.rateLimit, "rate-limit", "auto", "requests per second per client before 429; 0 = off; auto = off on loopback, 50 otherwise")
	fl.IntVar(&f.rateBurst, "rate-burst", 0, "requests a client may send at once (default: twice --rate-limit)")
	fl.IntVar(&f.maxStreams, "max-streams", 64, "open streams per client (0 = no limit)")
	fl.IntVar(&f.maxDepth, "max-depth", server.DefaultMaxDepth, "JSON nesting limit of request bodies")
	fl.DurationVar(&f.retention, "retention", 0, "delete ended runs (completed or failed) with their events and tasks once unchanged this long, e.g. 720h; 0 keeps every run (the OIP ledger is never pruned)")
	fl.Int64Var(&f.gcFloor, "gc-floor", 32<<20, "heap size in bytes below which the garbage collector waits; past it the heap grows by GOGC% of what a collection scans, at least half this (0 = Go's default: GOGC% of the live heap; ignored when GOGC is set)")
	fl.DurationVar(&f.mcpPoll, "mcp-poll", mcpbridge.DefaultPoll, "how often /mcp sessions look for changed directory rows (their row tools)")
	fl.StringVar(&f.mcpRows, "mcp-rows", "", "only directory rows whose key matches this glob become tools of /mcp sessions (default: all)")
	fl.BoolVar(&f.rotateKey, "ledger-rotate-key", false, "start although the ledger's signing key file is missing or another: create a new key and append a key-rotation record naming the old and the new key")
	fl.BoolVar(&f.resetHead, "ledger-reset-head", false, "start although the ledger head file is missing or ahead of the database (a database restored from a backup on purpose): rewrite it from the database's newest checkpoint")
	addExecFlags(cmd, &f.exec)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if strings.Contains(err.Error(), "trust-proxy") {
			return fmt.Errorf("%w: --trust-proxy takes the addresses of the proxies to trust, e.g. --trust-proxy 127.0.0.1/32", err)
		}
		return flagError(c, err)
	})
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
func openStore(ctx context.Context, db string, log *slog.Logger, onResume func()) (st store.Store, desc, keyPath string, err error) {
	switch {
	case db == ":memory:":
		return memstore.New(), "memory (nothing survives a restart)", "", nil
	case strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://"):
		s, err := postgres.Open(ctx, db, &postgres.Options{Logger: log, OnListenResume: onResume})
		if err != nil {
			return nil, "", "", err // never contains the password
		}
		keyPath, err := ledgerKeyPath(os.Getenv)
		if err != nil {
			s.Close()
			return nil, "", "", err
		}
		return s, s.String(), keyPath, nil
	default:
		s, err := sqlite.Open(context.Background(), db, nil)
		if err != nil {
			return nil, "", "", err
		}
		return s, "sqlite " + s.Path(), s.Path() + ".key", nil
	}
}

// ledgerKeyPath is where a server on Postgres keeps the ledger's signing
// key: ASMP_LEDGER_KEY, else asmp-ledger.key in the user's asmp state
// directory (ASMP_STATE_DIR, else the user config directory's asmp/),
// created 0700 if missing; never the working directory, where `git add .`
// would pick it up. Replicas of one ledger must share it (give them the
// same file).
func ledgerKeyPath(getenv func(string) string) (string, error) {
	if p := getenv("ASMP_LEDGER_KEY"); p != "" {
		return p, nil
	}
	dir, err := agentstate.Dir(getenv)
	if err != nil {
		return "", fmt.Errorf("no directory for the ledger's signing key (set ASMP_LEDGER_KEY or ASMP_STATE_DIR): %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the directory of the ledger's signing key: %w", err)
	}
	return filepath.Join(dir, "asmp-ledger.key"), nil
}

func loadWorkflows(files []string) ([]*workflow.Definition, error) {
	if len(files) == 0 {
		return append(examples.All(), examples.NumberFacts()), nil
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

// writeServeNext tells whoever started the server where to go next.
func writeServeNext(w io.Writer, url string) {
	fmt.Fprintf(w, `Next:
  %[1]s/console/    the console: list, drive and audit runs in a browser
  asmp attach %[1]s    drive a run in the terminal UI (asmp start %[1]s for agent mode)
  %[1]s/ in a browser    links to the state diagrams (%[1]s/visualize) and the API description (%[1]s/openapi.json)
  curl %[1]s/          the discovery frame: one start action per workflow
Docs: README.md (walkthrough, clients, workflow files) and docs/ in the asmp repository.
`, url)
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

// publicHosts is the host of --public-url, the one name (besides loopback
// names on loopback) the server answers to when it is given.
func publicHosts(publicURL string) []string {
	if u, err := url.Parse(publicURL); publicURL != "" && err == nil && u.Hostname() != "" {
		return []string{u.Hostname()}
	}
	return nil
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
	tokens, err := auth.NewTokens(f.tokens, env.Getenv("ASMP_TOKENS"))
	if err != nil {
		return err
	}
	for _, n := range tokens.Names() {
		if n == oip.ServerPrincipal || n == oip.TaskActor {
			return fmt.Errorf("token name %q is reserved: it names what the server does itself; choose another name", n)
		}
	}
	loopback := isLoopback(f.addr)
	if !loopback && tokens.Len() == 0 && !f.insecure {
		return fmt.Errorf("refusing to listen on %s: this server has no tokens, so anyone who can reach it could drive every run. Give it tokens (--token NAME=SECRET), listen on loopback (127.0.0.1), or pass --insecure if you really mean it", f.addr)
	}
	if err := mcpbridge.CheckRows(f.mcpRows); err != nil {
		return fmt.Errorf("--mcp-rows: %w", err)
	}
	rateLimit := 0.0
	switch f.rateLimit {
	case "auto":
		if !loopback {
			rateLimit = 50
		}
	default:
		rateLimit, err = strconv.ParseFloat(f.rateLimit, 64)
		if err != nil || rateLimit < 0 {
			return fmt.Errorf("--rate-limit %q: use auto, 0 (off) or requests per second", f.rateLimit)
		}
	}
	var proxies []netip.Prefix
	if f.trustProxy != "" {
		if proxies, err = server.ParseTrustProxy(f.trustProxy); err != nil {
			return fmt.Errorf("--trust-proxy %q: %w; it takes the proxies' addresses as CIDR ranges, e.g. --trust-proxy 127.0.0.1/32 (the bare form, which trusted every peer, is gone)", f.trustProxy, err)
		}
	}
	if f.publicURL != "" && publicHosts(f.publicURL) == nil {
		return fmt.Errorf("--public-url %q: give the base URL clients use, with scheme and host, e.g. https://asmp.example.com", f.publicURL)
	}
	for _, o := range f.origins {
		if err := server.CheckOrigin(o); err != nil {
			return fmt.Errorf("--allow-origin %q: give an origin as scheme://host[:port], e.g. https://console.example.com", o)
		}
	}
	if f.maxRunData < 0 {
		return fmt.Errorf("--max-run-data %d: use a size in bytes, or 0 for the body limit (--max-body)", f.maxRunData)
	}
	maxRunData := f.maxRunData
	if maxRunData == 0 {
		maxRunData = f.maxBody
	}
	if f.retention < 0 {
		return fmt.Errorf("--retention %s: use a positive duration such as 720h, or 0 to keep every run", f.retention)
	}
	// Listen before anything is created, so that a busy port is reported
	// before a database, a signing key and example rows appear.
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen on %s: the address is in use (another asmp serve?): stop that server, or listen elsewhere with --addr, e.g. --addr 127.0.0.1:8001", f.addr)
		}
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	defer ln.Close()
	var eng *engine.Engine
	resume := func() {
		if eng != nil {
			eng.CatchUp(context.Background())
		}
	}
	st, dbDesc, keyPath, err := openStore(ctx, f.db, log, resume)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, ok := st.(*sqlite.Store); ok && runtime.GOMAXPROCS(0) < 2 {
		// On one CPU Go runs one goroutine at a time, and the SQLite
		// writer's fsync would hold it: with two, requests keep being
		// served while a group commit waits for the disk (3-4x the durable
		// transition rate when pinned to one core; docs/PERFORMANCE.md).
		runtime.GOMAXPROCS(2)
		log.Info("raised GOMAXPROCS to 2 so that request handling overlaps SQLite's fsync")
	}
	if f.gcFloor > 0 && os.Getenv("GOGC") == "" {
		// A server with a small live heap would otherwise collect every few
		// megabytes allocated: hundreds of times a second under load.
		defer gctune.Start(uint64(f.gcFloor), 100).Stop()
	}
	executor, execDesc, err := newExecutor(f.exec, log)
	if err != nil {
		return err
	}
	tampered := make(chan error, 1)
	_, replicated := st.(*postgres.Store) // replicas share a Postgres database
	ledger, err := oip.New(st, &oip.Options{KeyPath: keyPath, Logger: log, MaxBody: f.maxBody, Executor: executor,
		RotateKey: f.rotateKey, ResetHead: f.resetHead, SharedStore: replicated,
		OnTamper: func(err error) {
			select {
			case tampered <- err:
			default:
			}
		}})
	if err != nil {
		return fmt.Errorf("opening the OIP ledger: %w", err)
	}
	if len(files) == 0 {
		if err := installExampleRows(ctx, ledger, log); err != nil {
			return err
		}
	}
	eng, err = engine.New(st, defs, &engine.Options{Default: f.defaultWF, Logger: log, Invoker: oip.NewInvoker(ledger), MaxRunData: maxRunData})
	if err != nil {
		return err
	}
	opts := &server.Options{
		PublicURL:           f.publicURL,
		TrustProxy:          proxies,
		AllowOrigins:        f.origins,
		LocalHostsOnly:      loopback,
		Hosts:               publicHosts(f.publicURL),
		MaxBody:             f.maxBody,
		MaxDepth:            f.maxDepth,
		Heartbeat:           f.heartbeat,
		Logger:              log,
		API:                 ledger.API(),
		RateLimit:           rateLimit,
		RateBurst:           f.rateBurst,
		MaxStreamsPerClient: f.maxStreams,
		Ready:               ledgerReady(ledger),
		AllowExec:           executor != nil,
		LedgerSize:          st.LedgerSize,
	}
	var mcpHandler *mcpbridge.Handler
	opts.MCP = func(s *server.Server) http.Handler {
		mcpHandler = mcpbridge.NewHandler(s, mcpbridge.HTTPOptions{
			Options: mcpbridge.Options{Logger: log, Rows: f.mcpRows}, Base: s.BaseURL,
			Ledger: ledger.Handler(), Poll: f.mcpPoll, MaxBody: f.maxBody, AllowExec: executor != nil,
			Engine: eng, MaxDepth: f.maxDepth, // run tools drive the engine in-process
		})
		return mcpHandler
	}
	authDesc := "none (open server: every caller holds every scope)"
	if tokens.Len() > 0 {
		opts.Authenticate = tokens.Authenticate
		opts.TokenClaim = tokens.Claim
		authDesc = "tokens " + strings.Join(tokens.Names(), " ")
	}
	srv := server.New(eng, opts)
	defer mcpHandler.Close()
	followCtx, stopFollow := context.WithCancel(context.Background())
	defer stopFollow()
	go func() {
		if err := eng.FollowStore(followCtx); err != nil && followCtx.Err() == nil {
			log.Error("following other replicas' commits stopped", "err", err)
		}
	}()
	workers := eng.StartWorkers(&engine.WorkerOptions{Workers: f.workers, Lease: f.taskLease})
	keepCtx, stopKeeping := context.WithCancel(context.Background())
	defer stopKeeping()
	if f.retention > 0 {
		every := min(max(f.retention/4, time.Second), 10*time.Minute)
		go eng.KeepRuns(keepCtx, f.retention, every, func(n int, err error) {
			if err != nil {
				log.Error("retention: pruning ended runs failed", "err", err)
				return
			}
			log.Info("retention: deleted ended runs", "runs", n, "unchanged_for", f.retention)
		})
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second, // streams lift it for themselves
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    server.ServerMaxHeaderBytes, // over server.DefaultMaxHeader: a JSON 431 from the handler
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
	// Catch signals before saying we listen: a SIGTERM sent on that line
	// is a clean stop.
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// One write, so that whoever reads the listening line has the rest.
	var started strings.Builder
	fmt.Fprintf(&started, "asmp %s listening on http://%s\n", version(), ln.Addr())
	writeServeNext(&started, url)
	io.WriteString(env.Stderr, started.String())
	log.Info("serving", "url", url, "ledger_key", ledger.VerifierKey(), "workflows", strings.Join(ids, ","), "default", eng.Default().ID, "db", dbDesc, "auth", authDesc, "rate_limit", f.rateLimit, "exec", execDesc)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	go verifyLedger(ledger, log)
	select {
	case err := <-errc:
		workers.Stop(0)
		return fmt.Errorf("serve: %w", err)
	case err := <-tampered:
		log.Error("stopping: the ledger failed its integrity check", "err", err)
		workers.Stop(0)
		// The request that found it (an append refused) gets its answer.
		srv.Shutdown()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = hs.Shutdown(sctx)
		cancel()
		_ = hs.Close()
		return err
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

// ledgerReady is /readyz's ledger condition: ready once the full check
// of the ledger that start-up left to the background has passed.
func ledgerReady(l *oip.Service) func() error {
	return func() error {
		if l.Ready() {
			return nil
		}
		return protocol.Errorf(protocol.EUnavailable, "The ledger's records are still being checked after start (progress in the server log).")
	}
}

// verifyLedger runs the ledger's full check in the background, logging
// its progress; a failure reaches the server through OnTamper.
func verifyLedger(l *oip.Service, log *slog.Logger) {
	last := time.Now()
	err := l.Verify(context.Background(), func(done, total int64) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			log.Info("checking the ledger", "records_checked", done, "of", total)
		}
	})
	if err != nil {
		log.Error("the ledger's full check did not finish", "err", err)
		return
	}
	log.Info("ledger checked: every record matches its signed checkpoints")
}
