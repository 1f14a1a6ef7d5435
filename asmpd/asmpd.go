// Package asmpd is the whole asmp server as a library: the store, the OIP
// ledger, the engine with its task workers and retention, and the HTTP
// server with the console and /mcp, assembled from one Config. It is what
// `asmp serve` runs; the command only turns flags into a Config.
//
//	d, err := asmpd.Open(ctx, asmpd.Config{Addr: "127.0.0.1:0", DB: ":memory:"})
//	if err != nil { ... }
//	defer d.Close()
//	fmt.Println("listening on", d.URL())
//	err = d.Run(ctx) // until ctx ends (a clean stop) or the server fails
//
// Open binds the listener first, so that a busy address is reported before
// a database, a signing key or example rows are created, then opens the
// store, the ledger (checking it against its signed checkpoints), the
// engine and the HTTP server, in that order: each is built from the ones
// before it. Run serves until its context ends, then shuts down within
// Config.ShutdownGrace; it also returns when the ledger fails its
// integrity check in the background (the error says why). Close releases
// what Open opened.
//
// What the store offers (Server.Capabilities, store.Capabilities) is the
// store's own answer, never found by its type: a replicated Postgres
// ledger, a SQLite file's group commit.
package asmpd

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/bridge/mcpbridge"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/webhook"
	"github.com/asmp-dev/asmp/workflow"
)

// Defaults for Config fields left zero.
const (
	DefaultAddr          = "127.0.0.1:8000"
	DefaultWorkers       = 4
	DefaultShutdownGrace = 10 * time.Second
)

// Config is everything a server is made of. The zero value serves the
// built-in examples from memory on DefaultAddr, open (no tokens), with
// execution of directory rows off.
type Config struct {
	// Addr is the TCP address to listen on ("" = DefaultAddr); port 0
	// picks a free port, which Server.Addr tells.
	Addr string
	// DB names the store: "" or ":memory:" for one that lives as long as
	// the process, a postgres:// (or postgresql://) URL, or else the path
	// of a SQLite file (created if missing).
	DB string
	// LedgerKey is the file of the ledger's signing key ("": beside a
	// SQLite file, DB + ".key"; for Postgres, LedgerKeyPath's answer; in
	// memory, a new key per process).
	LedgerKey string
	// RotateLedgerKey starts although the signing key file is missing or
	// holds another key (oip.Options.RotateKey).
	RotateLedgerKey bool
	// ResetLedgerHead starts although the ledger's head file is missing or
	// ahead of the database (oip.Options.ResetHead).
	ResetLedgerHead bool
	// Executor runs directory rows (oip.Options.Executor); nil refuses
	// every execution (recorded as refused).
	Executor oip.Executor

	// Workflows are the workflows served, the default first unless
	// DefaultWorkflow says otherwise. nil serves the built-in examples
	// (examples.All and examples.NumberFacts) and dispatches their
	// directory rows at start.
	Workflows       []*workflow.Definition
	DefaultWorkflow string
	// MaxRunData limits a run's data and milestones in bytes (0 = MaxBody).
	MaxRunData int64
	// Workers is how many background tasks run at once (0 = DefaultWorkers).
	Workers int
	// TaskLease is how long a task stays claimed without renewal
	// (0 = engine.DefaultLease).
	TaskLease time.Duration
	// Retention deletes ended runs unchanged this long (0 keeps every run).
	Retention time.Duration
	// Clock is the engine's clock (nil = the system's): what runs and
	// events are stamped with, and what state timers, task retries and
	// schedules fall due by.
	Clock clock.Clock
	// WebhookAllow admits webhook targets that are not https:// addresses
	// on the public internet (the --webhook-allow list: hosts and CIDR
	// ranges). The zero list admits none.
	WebhookAllow webhook.AllowList
	// WebhookRetry is when a failed webhook message is tried again (the
	// zero Schedule: 5 s … 1 h with jitter, given up after 24 h).
	WebhookRetry webhook.Schedule
	// WebhookRetention deletes settled webhook deliveries (delivered, or
	// failed after their last attempt) with their attempts once their
	// last attempt is this old; pending ones are never deleted. 0 keeps
	// every delivery (asmp serve's --webhook-retention defaults to 7
	// days).
	WebhookRetention time.Duration
	// WebhookTLS configures the https connections to webhook receivers
	// (nil: the system's roots; tests trust their own receiver).
	WebhookTLS *tls.Config

	// Tokens are the bearer tokens clients authenticate with; nil or none
	// is an open server, where every caller holds every scope.
	Tokens *auth.Tokens
	// PublicURL is the base URL clients use ("": from each request's Host).
	PublicURL string
	// TrustProxy are the reverse proxies whose X-Forwarded-* headers are
	// believed.
	TrustProxy []netip.Prefix
	// AllowOrigins are browser origins besides the server's own that may
	// send unsafe requests.
	AllowOrigins []string
	// MaxBody, MaxDepth and Heartbeat are server.Options' (0: defaults).
	MaxBody   int64
	MaxDepth  int
	Heartbeat time.Duration
	// RateLimit (requests per second per client, 0 = off), RateBurst and
	// MaxStreamsPerClient are server.Options'.
	RateLimit           float64
	RateBurst           int
	MaxStreamsPerClient int
	// MCPPoll is how often /mcp sessions look for changed directory rows
	// (0 = mcpbridge.DefaultPoll); MCPRows, when set, is the glob of the
	// row keys that become their tools.
	MCPPoll time.Duration
	MCPRows string

	// ShutdownGrace is how long running requests and tasks may take to
	// finish once Run's context ends (0 = DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// Server is an opened server: listening, with its store, ledger, engine
// and HTTP handler built, serving once Run is called.
type Server struct {
	cfg      Config
	log      *slog.Logger
	ln       net.Listener
	st       store.Store
	info     StoreInfo
	ledger   *oip.Service
	eng      atomic.Pointer[engine.Engine] // set once built; read by the store's listener
	srv      *server.Server
	mcp      *mcpbridge.Handler
	hs       *http.Server
	tampered chan error
	close    sync.Once
	webhooks *webhook.Sender
}

// Open builds the server cfg describes and binds its listener; it serves
// nothing until Run. On error nothing stays open.
func Open(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	d := &Server{cfg: cfg, log: cfg.Logger, tampered: make(chan error, 1)}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	addr := cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	// Listen before anything is created, so that a busy port is reported
	// before a database, a signing key and example rows appear.
	if d.ln, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if d.st, d.info, err = openStore(ctx, cfg.DB, d.log, d.catchUp); err != nil {
		return nil, err
	}
	if cfg.LedgerKey != "" {
		d.info.KeyPath = cfg.LedgerKey
	}
	if d.ledger, err = oip.New(d.st, &oip.Options{
		KeyPath: d.info.KeyPath, Logger: d.log, MaxBody: cfg.MaxBody, Executor: cfg.Executor,
		RotateKey: cfg.RotateLedgerKey, ResetHead: cfg.ResetLedgerHead,
		SharedStore: d.st.Capabilities().Shared, // replicas share the ledger
		OnTamper:    d.onTamper,
	}); err != nil {
		return nil, fmt.Errorf("opening the OIP ledger: %w", err)
	}
	defs := cfg.Workflows
	if defs == nil {
		defs = append(examples.All(), examples.NumberFacts())
		if err := installExampleRows(ctx, d.ledger, d.log); err != nil {
			return nil, err
		}
	}
	maxRunData := cfg.MaxRunData
	if maxRunData == 0 {
		maxRunData = cfg.MaxBody
	}
	var now func() time.Time
	if cfg.Clock != nil {
		now = cfg.Clock.Now
	}
	d.webhooks = webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Allow: cfg.WebhookAllow}, TLS: cfg.WebhookTLS, Now: now})
	eng, err := engine.New(d.st, defs, &engine.Options{Default: cfg.DefaultWorkflow, Logger: d.log, Clock: cfg.Clock, Invoker: oip.NewInvoker(d.ledger), MaxRunData: maxRunData,
		Webhooks: d.webhooks})
	if err != nil {
		return nil, err
	}
	d.eng.Store(eng)
	// The served files' schedules are stored (those the files dropped
	// are deleted) before Run starts the loop that starts their runs.
	if err := eng.SyncFileSchedules(ctx); err != nil {
		return nil, fmt.Errorf("storing the workflows' schedules: %w", err)
	}
	d.srv = server.New(eng, d.serverOptions())
	d.hs = &http.Server{
		Handler:           d.srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second, // streams lift it for themselves
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    server.ServerMaxHeaderBytes, // over server.DefaultMaxHeader: a JSON 431 from the handler
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	return d, nil
}

// check refuses a Config no server can be made of.
func (cfg *Config) check() error {
	if cfg.Tokens != nil {
		for _, n := range cfg.Tokens.Names() {
			n, _, _ = strings.Cut(n, "(") // Names: NAME(SCOPES); a name has no '('
			if n == oip.ServerPrincipal || n == oip.TaskActor {
				return fmt.Errorf("token name %q is reserved: it names what the server does itself; choose another name", n)
			}
		}
	}
	if err := mcpbridge.CheckRows(cfg.MCPRows); err != nil {
		return fmt.Errorf("asmpd: MCPRows: %w", err)
	}
	for _, o := range cfg.AllowOrigins {
		if err := server.CheckOrigin(o); err != nil {
			return fmt.Errorf("asmpd: AllowOrigins %q: %w", o, err)
		}
	}
	switch {
	case cfg.MaxRunData < 0:
		return fmt.Errorf("asmpd: MaxRunData %d: use a size in bytes, or 0 for MaxBody", cfg.MaxRunData)
	case cfg.Retention < 0:
		return fmt.Errorf("asmpd: Retention %s: use a positive duration, or 0 to keep every run", cfg.Retention)
	case cfg.WebhookRetention < 0:
		return fmt.Errorf("asmpd: WebhookRetention %s: use a positive duration, or 0 to keep every webhook delivery", cfg.WebhookRetention)
	case cfg.RateLimit < 0:
		return fmt.Errorf("asmpd: RateLimit %v: use requests per second, or 0 for none", cfg.RateLimit)
	}
	return nil
}

// serverOptions are the HTTP server's options: cfg's, with the ledger's
// API, /mcp and the readiness check.
func (d *Server) serverOptions() *server.Options {
	cfg := d.cfg
	opts := &server.Options{
		PublicURL:           cfg.PublicURL,
		TrustProxy:          cfg.TrustProxy,
		AllowOrigins:        cfg.AllowOrigins,
		LocalHostsOnly:      isLoopback(d.ln.Addr()),
		Hosts:               PublicHosts(cfg.PublicURL),
		MaxBody:             cfg.MaxBody,
		MaxDepth:            cfg.MaxDepth,
		Heartbeat:           cfg.Heartbeat,
		Logger:              d.log,
		API:                 d.ledger.API(),
		RateLimit:           cfg.RateLimit,
		RateBurst:           cfg.RateBurst,
		MaxStreamsPerClient: cfg.MaxStreamsPerClient,
		Ready:               d.ledgerReady,
		AllowExec:           cfg.Executor != nil,
		MCP:                 d.newMCP,
		LedgerSize:          d.st.LedgerSize,
	}
	if cfg.Tokens != nil && cfg.Tokens.Len() > 0 {
		opts.Authenticate = cfg.Tokens.Authenticate
		opts.TokenClaim = cfg.Tokens.Claim
	}
	return opts
}

// newMCP builds the handler of /mcp for the server s (server.Options.MCP:
// the server gives itself to it once built).
func (d *Server) newMCP(s *server.Server) http.Handler {
	d.mcp = mcpbridge.NewHandler(s, mcpbridge.HTTPOptions{
		Options: mcpbridge.Options{Logger: d.log, Rows: d.cfg.MCPRows}, Base: s.BaseURL,
		Ledger: d.ledger.Handler(), Poll: d.cfg.MCPPoll, MaxBody: d.cfg.MaxBody, AllowExec: d.cfg.Executor != nil,
		Engine: s.Engine(), MaxDepth: d.cfg.MaxDepth, // run tools drive the engine in-process
	})
	return d.mcp
}

// catchUp is the store's OnListenResume: commits of other replicas made
// while its listener was down are caught up (once the engine is built:
// before, there is nothing to catch up).
func (d *Server) catchUp() {
	if e := d.eng.Load(); e != nil {
		e.CatchUp(context.Background())
	}
}

// onTamper is the ledger's OnTamper: Run stops with the error.
func (d *Server) onTamper(err error) {
	select {
	case d.tampered <- err:
	default:
	}
}

// ledgerReady is /readyz's ledger condition: ready once the full check
// of the ledger that start-up left to the background has passed.
func (d *Server) ledgerReady() error {
	if d.ledger.Ready() {
		return nil
	}
	return protocol.Errorf(protocol.EUnavailable, "The ledger's records are still being checked after start (progress in the server log).")
}

// Addr returns the address the server listens on (with the port chosen
// when Config.Addr's was 0).
func (d *Server) Addr() net.Addr { return d.ln.Addr() }

// URL returns the base URL clients use: Config.PublicURL, else
// http:// and Addr.
func (d *Server) URL() string {
	if d.cfg.PublicURL != "" {
		return d.cfg.PublicURL
	}
	return "http://" + d.ln.Addr().String()
}

// Handler returns the server's HTTP handler (the one Run serves).
func (d *Server) Handler() http.Handler { return d.srv }

// Engine returns the server's engine.
func (d *Server) Engine() *engine.Engine { return d.eng.Load() }

// Ledger returns the server's OIP ledger.
func (d *Server) Ledger() *oip.Service { return d.ledger }

// Capabilities returns what the server's store offers.
func (d *Server) Capabilities() store.Capabilities { return d.st.Capabilities() }

// StoreInfo describes the opened store (for the start-up log).
func (d *Server) StoreInfo() StoreInfo { return d.info }

// Run serves until ctx ends, then shuts down: streams send their final
// line, requests and tasks get Config.ShutdownGrace to finish. It returns
// nil after such a stop, the ledger's error when its integrity check
// failed (the server stops at once), or why serving failed. Call it once.
func (d *Server) Run(ctx context.Context) error {
	eng := d.eng.Load()
	grace := d.cfg.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	workersN := d.cfg.Workers
	if workersN <= 0 {
		workersN = DefaultWorkers
	}
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	go func() {
		if err := eng.FollowStore(bg); err != nil && bg.Err() == nil {
			d.log.Error("following other replicas' commits stopped", "err", err)
		}
	}()
	workers := eng.StartWorkers(&engine.WorkerOptions{Workers: workersN, Lease: d.cfg.TaskLease})
	// State timers fire from start: those that fell due while the server
	// was down fire at once.
	timers := eng.StartTimers(&engine.TimerOptions{Lease: d.cfg.TaskLease})
	defer timers.Stop()
	// Webhook messages go out from start: those stored before a crash (in
	// the commits that caused them) are sent now.
	deliveries := eng.StartDeliveries(&engine.DeliveryOptions{Lease: max(d.cfg.TaskLease, 2*webhook.DefaultTimeout), Retry: d.cfg.WebhookRetry})
	defer deliveries.Stop()
	defer d.webhooks.Close()
	// Schedules too: a tick missed while the server was down starts its
	// one catch-up run at once.
	schedules := eng.StartSchedules(bg, nil)
	defer schedules.Stop()
	if keep := d.cfg.Retention; keep > 0 {
		go eng.KeepRuns(bg, keep, engine.RetentionInterval(keep), func(n int, err error) {
			if err != nil {
				d.log.Error("retention: pruning ended runs failed", "err", err)
				return
			}
			d.log.Info("retention: deleted ended runs", "runs", n, "unchanged_for", keep)
		})
	}
	if keep := d.cfg.WebhookRetention; keep > 0 {
		go eng.KeepDeliveries(bg, keep, engine.RetentionInterval(keep), func(n int, err error) {
			if err != nil {
				d.log.Error("retention: pruning settled webhook deliveries failed", "err", err)
				return
			}
			d.log.Info("retention: deleted settled webhook deliveries", "deliveries", n, "settled_for", keep)
		})
	}
	errc := make(chan error, 1)
	go func() { errc <- d.hs.Serve(d.ln) }()
	go d.verifyLedger(bg)
	select {
	case err := <-errc:
		workers.Stop(0)
		return fmt.Errorf("serve: %w", err)
	case err := <-d.tampered:
		d.log.Error("stopping: the ledger failed its integrity check", "err", err)
		workers.Stop(0)
		// The request that found it (an append refused) gets its answer.
		d.srv.Shutdown()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = d.hs.Shutdown(sctx)
		cancel()
		_ = d.hs.Close()
		return err
	case <-ctx.Done():
	}
	d.log.Info("shutting down", "grace", grace)
	d.srv.Shutdown() // streams send a final line and return
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := d.hs.Shutdown(sctx); err != nil {
		d.log.Warn("requests still running at the deadline were cut off", "err", err)
	}
	schedules.Stop()
	timers.Stop()
	deliveries.Stop()
	workers.Stop(grace)
	eng.Hub().CloseAll()
	d.log.Info("stopped")
	return nil
}

// verifyLedger runs the ledger's full check in the background, logging
// its progress; a failure reaches Run through onTamper.
func (d *Server) verifyLedger(ctx context.Context) {
	last := time.Now()
	err := d.ledger.Verify(ctx, func(done, total int64) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			d.log.Info("checking the ledger", "records_checked", done, "of", total)
		}
	})
	if err != nil {
		if ctx.Err() == nil {
			d.log.Error("the ledger's full check did not finish", "err", err)
		}
		return
	}
	d.log.Info("ledger checked: every record matches its signed checkpoints")
}

// Close releases what Open opened: the listener, /mcp's sessions and the
// store. Call it after Run has returned, or instead of Run.
func (d *Server) Close() error {
	var err error
	d.close.Do(func() {
		if d.mcp != nil {
			d.mcp.Close()
		}
		if d.ln != nil {
			d.ln.Close()
		}
		if d.st != nil {
			err = d.st.Close()
		}
	})
	return err
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// StoreInfo describes an opened store.
type StoreInfo struct {
	// Description names the store for logs (never a password).
	Description string
	// KeyPath is where the ledger's signing key lives by default ("" in
	// memory: a new key per process).
	KeyPath string
}

// OpenStore opens the store db names (see Config.DB), as Open does, for
// commands that read a server's database while it is stopped.
func OpenStore(ctx context.Context, db string, log *slog.Logger) (store.Store, StoreInfo, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return openStore(ctx, db, log, nil)
}

func openStore(ctx context.Context, db string, log *slog.Logger, onResume func()) (store.Store, StoreInfo, error) {
	switch {
	case db == "" || db == ":memory:":
		return memstore.New(), StoreInfo{Description: "memory (nothing survives a restart)"}, nil
	case strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://"):
		s, err := postgres.Open(ctx, db, &postgres.Options{Logger: log, OnListenResume: onResume})
		if err != nil {
			return nil, StoreInfo{}, err // never contains the password
		}
		keyPath, err := LedgerKeyPath(os.Getenv)
		if err != nil {
			s.Close()
			return nil, StoreInfo{}, err
		}
		return s, StoreInfo{Description: s.String(), KeyPath: keyPath}, nil
	default:
		s, err := sqlite.Open(context.Background(), db, nil)
		if err != nil {
			return nil, StoreInfo{}, err
		}
		return s, StoreInfo{Description: "sqlite " + s.Path(), KeyPath: s.Path() + ".key"}, nil
	}
}

// LedgerKeyPath is where a server on Postgres keeps the ledger's signing
// key: ASMP_LEDGER_KEY, else asmp-ledger.key in the user's asmp state
// directory (ASMP_STATE_DIR, else the user config directory's asmp/),
// created 0700 if missing; never the working directory, where `git add .`
// would pick it up. Replicas of one ledger must share it (give them the
// same file).
func LedgerKeyPath(getenv func(string) string) (string, error) {
	if p := getenv("ASMP_LEDGER_KEY"); p != "" {
		return p, nil
	}
	dir, err := StateDir(getenv)
	if err != nil {
		return "", fmt.Errorf("no directory for the ledger's signing key (set ASMP_LEDGER_KEY or ASMP_STATE_DIR): %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the directory of the ledger's signing key: %w", err)
	}
	return filepath.Join(dir, "asmp-ledger.key"), nil
}

// StateDir is the user's asmp state directory: $ASMP_STATE_DIR, else
// os.UserConfigDir()/asmp. getenv nil means os.Getenv. The CLI keeps its
// run state there too.
func StateDir(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv("ASMP_STATE_DIR"); d != "" {
		return d, nil
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no user config directory (set ASMP_STATE_DIR): %w", err)
	}
	return filepath.Join(base, "asmp"), nil
}

// installExampleRows dispatches the built-in examples' directory rows,
// each only when the ledger does not hold it unchanged already.
func installExampleRows(ctx context.Context, ledger *oip.Service, log *slog.Logger) error {
	rows, err := examples.Rows()
	if err != nil {
		return err
	}
	ctx = auth.WithPrincipal(ctx, auth.Principal{Name: oip.ServerPrincipal, Scopes: auth.AllScopes})
	for _, r := range rows {
		rc, did, err := ledger.EnsureRow(ctx, r.Key, r.Body)
		if err != nil {
			return fmt.Errorf("dispatching the example row %s: %w", r.Key, err)
		}
		if did {
			log.Info("dispatched an example directory row", "key", r.Key, "inv_ID", rc.InvID)
		}
	}
	return nil
}

// PublicHosts is the host of a public URL: the one name (besides loopback
// names on a loopback listener) the server answers to when PublicURL is
// set (server.Options.Hosts; any other Host gets 421). nil when publicURL
// is empty or has no host.
func PublicHosts(publicURL string) []string {
	if u, err := url.Parse(publicURL); publicURL != "" && err == nil && u.Hostname() != "" {
		return []string{u.Hostname()}
	}
	return nil
}
