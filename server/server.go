// Package server exposes an engine over HTTP as the ASMP API: discovery,
// the workflow catalog, runs and their State Frames, the dynamic CLI
// endpoint, transitions, stage tools and resources, event logs, NDJSON
// streams, skills, the OpenAPI document, the workflow-scoped API under
// /w/{workflow_id}/, and (when given) the OIP ledger under /api/.
//
// A *Server is an http.Handler: mount it in your own mux, or run it with
// cmd/asmp. It never writes to stdout; it logs to the slog.Logger it is
// given, or nowhere.
//
// # The edge
//
// Every request, to the ASMP API or to the API of Options.API (the OIP
// ledger), passes one chain, built in New: the access log and metrics
// (observe, middleware.go: one line per request, with its status, route
// and principal), panic recovery, the user's Options.Middleware,
// authentication (token → principal, 401), the rate limit (429), and the
// edge (httpx.Edge, mounted in routes.go): routing, the 405 of every served
// path, the route's checks (servedWorkflow for /w/{workflow_id}), the one
// scope check (httpx.RequireScope, 403) and the handler. Every error answer
// is rendered by httpx.ErrorStyle.Write; the OIP API's style adds its
// "status": "error". A check every request
// must pass (Origin, Host, Content-Type) is one more httpx.Check given to
// httpx.NewEdge in New.
package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server/internal/encoded"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxBody   = httpx.DefaultMaxBody
	DefaultMaxDepth  = protocol.DefaultMaxDepth
	DefaultHeartbeat = 15 * time.Second
)

// Options configure a Server. A nil *Options means all defaults.
type Options struct {
	// PublicURL is the base URL clients use (e.g. https://asmp.example.com/x).
	// "" means: derive it from each request's Host (and X-Forwarded-Proto /
	// X-Forwarded-Host when TrustProxy is set).
	PublicURL string
	// TrustProxy are the addresses of reverse proxies whose
	// X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host headers the
	// server believes; nil trusts none (see clientAddr).
	TrustProxy []netip.Prefix
	// AllowOrigins are the browser origins (scheme://host[:port]) besides
	// the server's own that may send unsafe requests (POST, PUT, PATCH,
	// DELETE); others get 403. See CheckOrigin.
	AllowOrigins []string
	// LocalHostsOnly refuses (421) a request whose Host is not localhost,
	// 127.0.0.1 or [::1] (any port), nor one of Hosts: set it for a server
	// on loopback, against DNS rebinding.
	LocalHostsOnly bool
	// Hosts, when not empty, are the only host names (without port,
	// case-insensitive) the server answers to besides, with
	// LocalHostsOnly, the loopback names; any other Host gets 421. Set it
	// to the public URL's host (`asmp serve --public-url` does). Behind a
	// proxy of TrustProxy the host checked is its X-Forwarded-Host when it
	// sends one (only with Hosts: without, a loopback server checks its
	// peer's Host). /healthz and /readyz answer any Host.
	Hosts []string
	// MaxBody limits request bodies in bytes (0 = DefaultMaxBody); larger → 413.
	MaxBody int64
	// MaxHeader limits the request line and headers in bytes
	// (0 = DefaultMaxHeader); larger → 431. Run the http.Server with
	// MaxHeaderBytes ServerMaxHeaderBytes, so that such requests reach it.
	MaxHeader int
	// MaxDepth limits JSON nesting (0 = DefaultMaxDepth); deeper → 400.
	MaxDepth int
	// Heartbeat is the interval of heartbeat lines on idle streams
	// (0 = DefaultHeartbeat).
	Heartbeat time.Duration
	// Logger receives request failures (5xx); nil discards.
	Logger *slog.Logger
	// API is served beside the ASMP API, through the same edge
	// (authentication, limits, scope checks, error bodies, access log):
	// the OIP ledger's oip.Service.API(), on paths under /api/.
	API httpx.API
	// Authenticate maps a request to its principal. nil means an open
	// server: every caller is auth.Open (anonymous, all scopes). A returned
	// *protocol.Error (EUnauthorized) is written as is.
	Authenticate func(r *http.Request) (auth.Principal, error)
	// TokenClaim, when set, names the token a request claims to hold
	// before it is authenticated ("" for none: auth.Tokens.Claim, the
	// NAME:SECRET form): such a request has a failure budget of its own
	// per token and address (see AuthFailuresPerMinute), which failures
	// of other requests from the address do not spend.
	TokenClaim func(r *http.Request) string
	// RateLimit is the per-client request rate (requests per second) beyond
	// which requests get 429 with Retry-After; 0 means no limit. A client
	// is its token name, or its IP address without a token.
	RateLimit float64
	// RateBurst is how many requests a client may send at once
	// (0 = twice RateLimit).
	RateBurst int
	// AuthFailures is the failure budget of authentication: requests with
	// a missing or unknown token a client address may send per minute
	// before it gets 429 (0 = AuthFailuresPerMinute). It applies whatever
	// RateLimit is.
	AuthFailures int
	// MaxStreamsPerClient bounds the open NDJSON streams of one client
	// (0 = no limit); more get 429.
	MaxStreamsPerClient int
	// DisableMetrics turns GET /metrics off.
	DisableMetrics bool
	// Middleware wraps the API handler (outermost first), inside request
	// logging and panic recovery and outside authentication.
	Middleware []func(http.Handler) http.Handler
	// MCP, when set, returns the handler of MCP's streamable HTTP
	// transport, served at /mcp (GET, POST, DELETE) through the edge like
	// every route (authentication, limits, checks, the read scope; the
	// handler's own tools need their scopes). It is given the server, to
	// reach it in-process. Its answers are MCP's, not JSON error bodies.
	MCP func(s *Server) http.Handler
	// AllowExec says the OIP ledger of Options.API executes invocations
	// (`asmp serve --allow-exec`): GET /whoami answers exec true only
	// then, for a principal holding the exec scope.
	AllowExec bool

	// LedgerSize, when set, reports the records of the OIP ledger for
	// GET /metrics (asmp_ledger_records; store.LedgerStore's LedgerSize):
	// the server reads the ledger through nothing else. nil reports 0.
	LedgerSize func(ctx context.Context) (int64, error)

	// Ready, when set, is asked by GET /readyz: a non-nil error (whose
	// protocol hint is shown) answers 503 (the ledger's full check at
	// start has not finished).
	Ready func() error
}

// Server is the ASMP HTTP API for one engine.
type Server struct {
	e            *engine.Engine
	opts         Options
	log          *slog.Logger
	edge         *httpx.Edge // routing, checks and error answers (see routes)
	handler      http.Handler
	done         chan struct{}
	metrics      *metrics
	answers      *encoded.Cache // encoded frames and CLI objects of recently read runs
	lines        encoded.Lines  // stream lines of published events, shared by subscribers
	slots        streamSlots
	now          func() time.Time // the clock of limits (tests set it)
	authFailures *limiter         // the failure budget of authentication, per client address
	full         atomic.Bool      // the last write failed on a full disk (see noteWrite)
	bases        sync.Map         // baseKey -> base URL, so that a request's is not rebuilt
	nbases       atomic.Int64
}

// New returns the HTTP API of e. The server observes e (engine.Observe):
// its metrics count what e commits and prunes from then on.
func New(e *engine.Engine, opts *Options) *Server {
	s := &Server{e: e, done: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.MaxBody <= 0 {
		s.opts.MaxBody = DefaultMaxBody
	}
	if s.opts.MaxDepth <= 0 {
		s.opts.MaxDepth = DefaultMaxDepth
	}
	if s.opts.Heartbeat <= 0 {
		s.opts.Heartbeat = DefaultHeartbeat
	}
	s.opts.PublicURL = strings.TrimRight(s.opts.PublicURL, "/")
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.slots.n = map[string]int{}
	s.now = time.Now
	if s.opts.AuthFailures <= 0 {
		s.opts.AuthFailures = AuthFailuresPerMinute
	}
	s.authFailures = newLimiter(float64(s.opts.AuthFailures)/60, s.opts.AuthFailures)
	s.answers = encoded.New(e)
	obs := &observer{answers: s.answers}
	if !s.opts.DisableMetrics {
		s.metrics = newMetrics(e, s.opts.LedgerSize)
		obs.metrics = s.metrics.engine
	}
	e.Observe(obs)
	s.edge = httpx.NewEdge(s.log, s.edgeChecks()...)
	s.routes()
	// observe → recover → user middleware → authenticate → rate limit → edge
	h := s.limit(routed(s.edge))
	h = s.authenticate(h)
	for i := len(s.opts.Middleware) - 1; i >= 0; i-- {
		h = s.opts.Middleware[i](h)
	}
	s.handler = s.observe(recoverer(s.log, s.preflight(h)))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// Engine returns the engine the server exposes.
func (s *Server) Engine() *engine.Engine { return s.e }

// Shutdown tells open streams to end: each sends a final line and returns.
// Call it before http.Server.Shutdown, which waits for handlers to return.
func (s *Server) Shutdown() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}

// BaseURL returns the root URL of the API the server answers r with (the
// base of its frames' hrefs), without a trailing slash.
func (s *Server) BaseURL(r *http.Request) string { return s.baseURL(r) }

// baseURL is the root URL of the API for r, without a trailing slash.
func (s *Server) baseURL(r *http.Request) string {
	if s.opts.PublicURL != "" {
		return s.opts.PublicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if s.peerTrusted(r) {
		if p := firstValue(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
			scheme = p
		}
		if h := firstValue(r.Header.Get("X-Forwarded-Host")); h != "" && validHost(h) {
			host = h
		}
	}
	if host == "" || !validHost(host) {
		host = "localhost"
	}
	k := baseKey{scheme, host}
	if b, ok := s.bases.Load(k); ok {
		return b.(string)
	}
	b := scheme + "://" + host
	if s.nbases.Add(1) <= maxBases {
		s.bases.Store(k, b)
	}
	return b
}

// maxBases bounds the base URLs remembered (one per scheme and Host a
// client sent: clients choose them, so the bound matters).
const maxBases = 256

type baseKey struct{ scheme, host string }

func firstValue(v string) string {
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// validHost accepts host[:port] made of safe characters only, so a hostile
// Host header cannot inject anything into the URLs we build.
func validHost(h string) bool {
	if len(h) > 255 {
		return false
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']', c == '_':
		default:
			return false
		}
	}
	return true
}

func recoverer(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
				httpx.WriteError(w, nil, protocol.Errorf(protocol.EInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
