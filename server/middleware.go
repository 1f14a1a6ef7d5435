package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// requestInfo travels from the outermost middleware, which logs and
// measures, to the inner ones that learn the route pattern and the
// principal. It lives in the statusWriter observe hands down, found again
// through the writer (and its Unwrap chain); only when user middleware
// runs in between, which may wrap the writer without an Unwrap method, is
// it also put in the request's context (copying the request costs an
// allocation of ~600 bytes per request, avoided otherwise).
type requestInfo struct {
	id      string
	pattern string
	actor   string
}

type infoKey struct{}

func infoOf(w http.ResponseWriter, r *http.Request) *requestInfo {
	for range 32 { // a writer chain deeper than this is not one observe made
		if sw, ok := w.(*statusWriter); ok {
			return &sw.info
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	ri, _ := r.Context().Value(infoKey{}).(*requestInfo)
	return ri
}

// statusWriter records the status code written; it also carries the
// request's info, so that one allocation serves both.
type statusWriter struct {
	http.ResponseWriter
	status int
	info   requestInfo
	idHdr  [1]string // the X-Request-Id header's value slice, without an allocation of its own
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe is the outermost middleware: it gives every request an id
// (X-Request-Id, reused from the client when it is sane), logs it when it
// ends (never a header or body), and records metrics by route pattern.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		ri := &sw.info
		ri.id = requestID(r.Header.Get("X-Request-Id"))
		sw.idHdr[0] = ri.id
		h := w.Header()
		h["X-Request-Id"] = sw.idHdr[:]
		h["X-Content-Type-Options"] = noSniff // no answer is sniffed into another type (an HTML page)
		inner := r
		if len(s.opts.Middleware) > 0 {
			inner = r.WithContext(context.WithValue(r.Context(), infoKey{}, ri))
		}
		next.ServeHTTP(sw, inner)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		s.noteWrite(r, status)
		route := ri.pattern
		if route == "" {
			route = "unmatched"
		}
		elapsed := time.Since(start)
		if s.metrics != nil {
			s.metrics.observe(route, methodLabel(r.Method), status, elapsed)
		}
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelError
		}
		if !s.log.Enabled(r.Context(), level) {
			return
		}
		s.log.LogAttrs(r.Context(), level, "request",
			slog.String("request_id", ri.id), slog.String("method", r.Method), slog.String("route", route),
			slog.String("path", r.URL.Path), slog.Int("status", status), slog.Duration("duration", elapsed),
			slog.String("principal", ri.actor), slog.String("remote", r.RemoteAddr))
	})
}

// noSniff is the shared value of X-Content-Type-Options on every answer
// (net/http never modifies header value slices).
var noSniff = []string{"nosniff"}

// methodLabel bounds the method label of metrics: any method outside the
// standard ones is OTHER, so that clients cannot invent label values.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// routed is the innermost middleware: it passes the pattern the edge's
// mux chose back to observe.
func routed(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		if ri := infoOf(w, r); ri != nil {
			ri.pattern = r.Pattern
		}
	})
}

// idPrefix makes request ids unique across processes; idSeq within one.
var (
	idPrefix = func() string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	idSeq atomic.Uint64
)

func requestID(given string) string {
	if given != "" && len(given) <= 64 {
		ok := true
		for _, c := range given {
			if !(c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				ok = false
				break
			}
		}
		if ok {
			return given
		}
	}
	var b [32]byte // 8 hex digits, '-', at most 13 base-36 digits
	id := append(b[:0], idPrefix...)
	id = append(id, '-')
	id = strconv.AppendUint(id, idSeq.Add(1), 36)
	return string(id)
}

// clientKey names the client for limits: the principal when a token was
// given, else its address (clientAddr: behind a trusted proxy, the
// rightmost X-Forwarded-For hop that is not a trusted proxy).
func (s *Server) clientKey(r *http.Request) string {
	if p := auth.FromContext(r.Context()); p.Name != auth.Anonymous {
		return "token:" + p.Name
	}
	return "ip:" + s.clientAddr(r)
}

// limiter is a token bucket per client.
type limiter struct {
	rate  float64 // tokens per second
	burst float64
	mu    sync.Mutex
	b     map[string]*bucket
	last  time.Time // last sweep of idle buckets
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	if burst <= 0 {
		burst = int(math.Ceil(rate * 2))
	}
	return &limiter{rate: rate, burst: float64(burst), b: map[string]*bucket{}}
}

// take spends one token of key; when none is left it returns how long until one is.
func (l *limiter) take(key string, now time.Time) (ok bool, wait time.Duration) {
	return l.use(key, now, true)
}

// peek reports whether key has a token left, without spending it, and if
// not how long until it has.
func (l *limiter) peek(key string, now time.Time) (ok bool, wait time.Duration) {
	return l.use(key, now, false)
}

func (l *limiter) use(key string, now time.Time, spend bool) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) > time.Minute {
		for k, b := range l.b {
			if now.Sub(b.at) > time.Minute {
				delete(l.b, k)
			}
		}
		l.last = now
	}
	b := l.b[key]
	if b == nil {
		if !spend {
			return true, 0 // an unknown client has its whole burst
		}
		if len(l.b) >= maxClients {
			for k := range l.b { // bounded: forget one client (a full bucket again)
				delete(l.b, k)
				break
			}
		}
		b = &bucket{tokens: l.burst, at: now}
		l.b[key] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens >= 1 {
		if spend {
			b.tokens--
		}
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// limit applies the per-client rate limit (429 with Retry-After).
func (s *Server) limit(next http.Handler) http.Handler {
	if s.opts.RateLimit <= 0 {
		return next
	}
	l := newLimiter(s.opts.RateLimit, s.opts.RateBurst)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		ok, wait := l.take(s.clientKey(r), time.Now())
		if !ok {
			secs := retrySeconds(wait)
			httpx.WriteError(w, nil, protocol.Errorf(protocol.ERateLimited, "Too many requests from this client (limit %g per second); retry after %d s.", s.opts.RateLimit, secs).
				With("retry_after", secs))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// retrySeconds is wait in whole seconds for Retry-After, at least 1.
func retrySeconds(wait time.Duration) int {
	return max(int(math.Ceil(wait.Seconds())), 1)
}

// streamSlots counts open streams per client.
type streamSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// acquireStream reserves a stream slot for r's client, or returns a 429.
func (s *Server) acquireStream(r *http.Request) (release func(), err error) {
	if s.opts.MaxStreamsPerClient <= 0 {
		return func() {}, nil
	}
	key := s.clientKey(r)
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	if _, ok := s.slots.n[key]; !ok && len(s.slots.n) >= maxClients {
		return nil, protocol.Errorf(protocol.ERateLimited, "The server has open streams of %d clients, its limit; retry later.", maxClients).
			With("retry_after", 1)
	}
	if s.slots.n[key] >= s.opts.MaxStreamsPerClient {
		return nil, protocol.Errorf(protocol.ERateLimited, "This client already has %d open streams, the limit; close one first.", s.opts.MaxStreamsPerClient).
			With("retry_after", 1)
	}
	s.slots.n[key]++
	return func() {
		s.slots.mu.Lock()
		if s.slots.n[key]--; s.slots.n[key] <= 0 {
			delete(s.slots.n, key)
		}
		s.slots.mu.Unlock()
	}, nil
}
