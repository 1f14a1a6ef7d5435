package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/asmpd"
	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/bridge/mcpbridge"
	"github.com/asmp-dev/asmp/internal/edge/gctune"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/webhook"
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
	whAllow    string
	whGiveUp   time.Duration
	whKeep     time.Duration
}

// DefaultWebhookRetention is how long asmp serve keeps a settled webhook
// delivery after its last attempt (--webhook-retention): 7 days, as
// common webhook providers keep deliveries visible.
const DefaultWebhookRetention = 7 * 24 * time.Hour

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
	fl.StringVar(&f.db, "db", "asmp.db", "database: a SQLite file path, :memory:, or a postgres:// (postgresql://) URL for several replicas")
	fl.StringVar(&f.publicURL, "public-url", "", "base URL clients use, e.g. https://asmp.example.com (default: from each request's Host)")
	fl.StringVar(&f.trustProxy, "trust-proxy", "", "CIDR,... of reverse proxies whose X-Forwarded-For/-Proto/-Host to believe, e.g. 127.0.0.1/32 (the client is the rightmost X-Forwarded-For hop outside them)")
	fl.StringArrayVar(&f.origins, "allow-origin", nil, "a browser origin (scheme://host[:port]) besides the server's own that may send POST, PUT, PATCH and DELETE requests (repeatable)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow an open server (no tokens) to listen on a non-loopback address")
	fl.IntVar(&f.workers, "workers", 4, "background tasks run at once")
	fl.StringVar(&f.whAllow, "webhook-allow", "", "webhook targets admitted although not https:// on the public internet: hosts and CIDR ranges, comma-separated (e.g. 127.0.0.1/32,hooks.internal)")
	fl.DurationVar(&f.whGiveUp, "webhook-give-up", webhook.DefaultGiveUp, "how long a webhook message is retried before it is marked failed (kept for redelivery)")
	fl.DurationVar(&f.whKeep, "webhook-retention", DefaultWebhookRetention, "delete settled webhook deliveries (delivered, or failed after their last attempt) with their attempts once their last attempt is this old (pending ones never); a failed one deleted can no longer be redelivered; 0 keeps every delivery; 168h = 7 days")
	fl.DurationVar(&f.taskLease, "task-lease", engine.DefaultLease, "how long a task stays claimed without renewal; a crashed server's tasks run again after it")
	fl.DurationVar(&f.heartbeat, "heartbeat", server.DefaultHeartbeat, "interval of heartbeat lines on idle streams")
	fl.DurationVar(&f.grace, "shutdown-grace", 10*time.Second, "on SIGINT/SIGTERM, how long running requests and tasks may take to finish")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json (logs go to stderr)")
	fl.Int64Var(&f.maxBody, "max-body", server.DefaultMaxBody, "request body limit in bytes")
	fl.Int64Var(&f.maxRunData, "max-run-data", 0, "limit in bytes of a run's data and milestones (JSON): a start or transition, a task's result included, that would exceed it gets 413 (0 = --max-body)")
	fl.StringVar(&f.defaultWF, "default-workflow", "", "workflow used when POST /runs names none (default: the first)")
	fl.StringArrayVar(&f.tokens, "token", nil, "bearer token NAME=SECRET[:SCOPE,...] (repeatable; also ASMP_TOKENS, entries separated by ';'; scopes read,runs,dispatch,exec,admin; none = all)")
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

func runServe(ctx context.Context, env *Env, f *serveFlags, files []string) error {
	log, err := newLogger(env, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	var defs []*workflow.Definition // nil: the built-in examples, with their rows
	if len(files) > 0 {
		if defs, err = loadWorkflows(files); err != nil {
			return err
		}
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
	if f.publicURL != "" && asmpd.PublicHosts(f.publicURL) == nil {
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
	if f.retention < 0 {
		return fmt.Errorf("--retention %s: use a positive duration such as 720h, or 0 to keep every run", f.retention)
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
	whAllow, err := webhook.ParseAllowList(f.whAllow)
	if err != nil {
		return err // it names the flag
	}
	if f.whAllow != "" {
		log.Info("webhook targets admitted beside public https:// ones", "webhook_allow", whAllow.String())
		if whAllow.AdmitsMetadata() {
			log.Warn("--webhook-allow admits a cloud metadata address (169.254.169.254 or fd00:ec2::254): any admin token can then make this server call it; name narrower ranges", "webhook_allow", whAllow.String())
		}
	}
	if f.taskLease <= 0 {
		return fmt.Errorf("--task-lease must be a positive duration such as %s (how long a claimed task, timer or delivery stays this server's), not %s", engine.DefaultLease, f.taskLease)
	}
	if f.whGiveUp <= 0 {
		return fmt.Errorf("--webhook-give-up must be a positive duration, not %s", f.whGiveUp)
	}
	if f.whKeep < 0 {
		return fmt.Errorf("--webhook-retention %s: use a positive duration such as 168h, or 0 to keep every webhook delivery", f.whKeep)
	}
	d, err := asmpd.Open(ctx, asmpd.Config{
		WebhookAllow: whAllow, WebhookRetry: webhook.Schedule{GiveUp: f.whGiveUp}, WebhookRetention: f.whKeep,
		Addr: f.addr, DB: f.db, RotateLedgerKey: f.rotateKey, ResetLedgerHead: f.resetHead, Executor: executor,
		Workflows: defs, DefaultWorkflow: f.defaultWF, MaxRunData: f.maxRunData,
		Workers: f.workers, TaskLease: f.taskLease, Retention: f.retention,
		Tokens: tokens, PublicURL: f.publicURL, TrustProxy: proxies, AllowOrigins: f.origins,
		MaxBody: f.maxBody, MaxDepth: f.maxDepth, Heartbeat: f.heartbeat,
		RateLimit: rateLimit, RateBurst: f.rateBurst, MaxStreamsPerClient: f.maxStreams,
		MCPPoll: f.mcpPoll, MCPRows: f.mcpRows, ShutdownGrace: f.grace, Logger: log,
	})
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: the address is in use (another asmp serve?): stop that server, or listen elsewhere with --addr, e.g. --addr 127.0.0.1:8001", f.addr)
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if d.Capabilities().GroupCommit && runtime.GOMAXPROCS(0) < 2 {
		// On one CPU Go runs one goroutine at a time, and a group commit's
		// fsync would hold it: with two, requests keep being served while
		// a group waits for the disk (3-4x the durable transition rate
		// when pinned to one core; docs/PERFORMANCE.md).
		runtime.GOMAXPROCS(2)
		log.Info("raised GOMAXPROCS to 2 so that request handling overlaps the store's fsync")
	}
	authDesc := "none (open server: every caller holds every scope)"
	if tokens.Len() > 0 {
		authDesc = "tokens " + strings.Join(tokens.Names(), " ")
	}
	eng := d.Engine()
	ids := make([]string, 0, len(eng.Workflows()))
	for _, def := range eng.Workflows() {
		ids = append(ids, def.ID)
	}
	// Catch signals before saying we listen: a SIGTERM sent on that line
	// is a clean stop.
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// One write, so that whoever reads the listening line has the rest.
	var started strings.Builder
	fmt.Fprintf(&started, "asmp %s listening on http://%s\n", version(), d.Addr())
	writeServeNext(&started, d.URL())
	io.WriteString(env.Stderr, started.String())
	log.Info("serving", "url", d.URL(), "ledger_key", d.Ledger().VerifierKey(), "workflows", strings.Join(ids, ","), "default", eng.Default().ID, "db", d.StoreInfo().Description, "auth", authDesc, "rate_limit", f.rateLimit, "exec", execDesc)
	return d.Run(sigCtx)
}
