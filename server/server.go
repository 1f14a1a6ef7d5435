// Package server exposes an engine over HTTP as the ASMP API: discovery,
// the workflow catalog, runs and their State Frames, the dynamic CLI
// endpoint, transitions, stage tools and resources, event logs, NDJSON
// streams, skills, the OpenAPI document, the workflow-scoped API under
// /w/{workflow_id}/, and (when given) the OIP ledger under /api/.
//
// A *Server is an http.Handler: mount it in your own mux, or run it with
// cmd/asmp. It never writes to stdout; it logs to the slog.Logger it is
// given, or nowhere.
package server

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/httpx"
	"github.com/asmp-dev/asmp/protocol"
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
	// TrustProxy makes the server believe X-Forwarded-Proto/-Host headers.
	TrustProxy bool
	// MaxBody limits request bodies in bytes (0 = DefaultMaxBody); larger → 413.
	MaxBody int64
	// MaxDepth limits JSON nesting (0 = DefaultMaxDepth); deeper → 400.
	MaxDepth int
	// Heartbeat is the interval of heartbeat lines on idle streams
	// (0 = DefaultHeartbeat).
	Heartbeat time.Duration
	// Logger receives request failures (5xx); nil discards.
	Logger *slog.Logger
	// API, when set, serves every path under /api/ (the OIP ledger).
	API http.Handler
	// Authenticate maps a request to its principal. nil means an open
	// server: every caller is auth.Open (anonymous, all scopes). A returned
	// *protocol.Error (EUnauthorized) is written as is.
	Authenticate func(r *http.Request) (auth.Principal, error)
	// RateLimit is the per-client request rate (requests per second) beyond
	// which requests get 429 with Retry-After; 0 means no limit. A client
	// is its token name, or its IP address without a token.
	RateLimit float64
	// RateBurst is how many requests a client may send at once
	// (0 = twice RateLimit).
	RateBurst int
	// MaxStreamsPerClient bounds the open NDJSON streams of one client
	// (0 = no limit); more get 429.
	MaxStreamsPerClient int
	// DisableMetrics turns GET /metrics off.
	DisableMetrics bool
	// Middleware wraps the API handler (outermost first), inside request
	// logging and panic recovery and outside authentication.
	Middleware []func(http.Handler) http.Handler
	// Ready, when set, is asked by GET /readyz: a non-nil error (whose
	// protocol hint is shown) answers 503 (the ledger's full check at
	// start has not finished).
	Ready func() error
}

// Server is the ASMP HTTP API for one engine.
type Server struct {
	e       *engine.Engine
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler
	done    chan struct{}
	allowed map[string][]string // path pattern -> methods, for 405 answers
	metrics *metrics
	slots   streamSlots
	bases   sync.Map // baseKey -> base URL, so that a request's is not rebuilt
	nbases  atomic.Int64
}

// New returns the HTTP API of e.
func New(e *engine.Engine, opts *Options) *Server {
	s := &Server{e: e, mux: http.NewServeMux(), done: make(chan struct{})}
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
	if !s.opts.DisableMetrics {
		s.metrics = newMetrics(e)
	}
	s.routes()
	// observe → recover → user middleware → authenticate → rate limit → mux
	h := s.limit(routed(s.mux))
	h = s.authenticate(h)
	for i := len(s.opts.Middleware) - 1; i >= 0; i-- {
		h = s.opts.Middleware[i](h)
	}
	s.handler = s.observe(recoverer(s.log, h))
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
	if s.opts.TrustProxy {
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

func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.opts.Authenticate == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		p, err := s.opts.Authenticate(r)
		if err != nil {
			if protocol.ErrorCode(err) == protocol.EUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="asmp"`)
			}
			httpx.WriteError(w, s.log, err)
			return
		}
		if ri := infoOf(w, r); ri != nil {
			ri.actor = p.Name
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
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
