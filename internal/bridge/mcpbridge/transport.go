package mcpbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// Serve runs one MCP session over t (for `asmp mcp`: &mcp.StdioTransport{})
// with c as the asmp server, until the client disconnects or ctx ends.
// Row tools follow the directory, read through c every poll (0 =
// DefaultPoll).
func Serve(ctx context.Context, c *client.Client, opts *Options, poll time.Duration, t mcp.Transport) error {
	o := opts.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := newWatcher(c, poll, o.Logger)
	w.start(ctx)
	s := newSession(c, c, o, w)
	defer s.close()
	if o.Execute == nil {
		s.gate = &execGate{c: c, log: o.Logger}
		s.gate.read(ctx)
	}
	return s.srv.Run(ctx, t)
}

// callerKey carries the Authorization header of the MCP request a tool
// call came in, for the in-process transport.
type callerKey struct{}

// withCaller puts the Authorization header of the MCP request (streamable
// HTTP only) into ctx, so that the in-process transport forwards it.
func withCaller(ctx context.Context, extra *mcp.RequestExtra) context.Context {
	if extra == nil || extra.Header == nil {
		return ctx
	}
	if a := extra.Header.Get("Authorization"); a != "" {
		return context.WithValue(ctx, callerKey{}, a)
	}
	return ctx
}

// HTTPOptions configure the streamable HTTP handler of `asmp serve`.
type HTTPOptions struct {
	Options
	// Base returns the API base URL the server answers r with (the base
	// of its frames' hrefs): server.(*Server).BaseURL.
	Base func(r *http.Request) string
	// Ledger, when set, is the OIP API's own handler
	// (oip.(*Service).Handler(), which serves its caller without
	// authentication): one watch of the directory through it serves every
	// session. nil means each session watches GET /api/directory with its
	// token.
	Ledger http.Handler
	// Poll is how often Rows is read for changes (0 = DefaultPoll).
	Poll time.Duration
	// SessionTimeout closes sessions idle this long (0 = 30 minutes).
	SessionTimeout time.Duration
	// MaxBody bounds an MCP request body in bytes (0 = the SDK's 4 MiB).
	MaxBody int64
	// AllowExec says the server executes invocations (--allow-exec): row
	// tools then ask to execute for a session whose principal may
	// (auth.MayExecute), unless Options.Execute decides otherwise.
	AllowExec bool
	// Engine, when set, is the server's engine: the sessions' run tools
	// drive it in-process through the SDK's in-process backend
	// (client/embedded), with the principal of the MCP request, which the
	// edge authenticated and limited once; each write is checked against
	// its scope as the edge checks it. With Ledger set too, the ledger
	// tools call Ledger as that principal (its routes check their scopes),
	// not the server's handler. nil: both call the server's handler with
	// the request's token.
	Engine *engine.Engine
	// MaxDepth bounds the nesting of run inputs, as the server's does.
	MaxDepth int
}

// Handler answers MCP's streamable HTTP transport for an asmp server:
// each session gets its own MCP server (its own current run and tool
// list), and every request it makes goes into target (the server's own
// handler) with the Authorization header of the MCP request being served,
// so the caller's token and scopes apply exactly. A session belongs to
// the principal that created it: requests of another are refused.
type Handler struct {
	target http.Handler
	o      HTTPOptions
	sdk    *mcp.StreamableHTTPHandler
	proto  *mcp.Server // answers the SDK's version checks of known sessions
	rows   *watcher
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	owners map[string]string // session id -> principal name
}

type sessionKey struct{}

// NewHandler returns the /mcp handler of target. Call Close when the
// server stops.
func NewHandler(target http.Handler, o HTTPOptions) *Handler {
	o.Options = o.Options.withDefaults()
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	h := &Handler{target: target, o: o, owners: map[string]string{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.proto = mcp.NewServer(implementation, &mcp.ServerOptions{SupportedProtocolVersions: protocolVersions})
	if o.Ledger != nil {
		c, err := client.New("http://localhost", &client.Options{HTTPClient: &http.Client{Transport: &inproc{h: o.Ledger, host: "localhost"}}, UserAgent: "asmp-mcp"})
		if err == nil {
			h.rows = newWatcher(c, o.Poll, o.Logger)
		}
	}
	h.sdk = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if s, ok := r.Context().Value(sessionKey{}).(*session); ok {
			return s.srv
		}
		return h.proto
	}, &mcp.StreamableHTTPOptions{SessionTimeout: o.SessionTimeout, MaxRequestBodyBytes: o.MaxBody})
	return h
}

// Close ends the directory watch. Sessions end with the server.
func (h *Handler) Close() { h.cancel() }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Tool calls wait for runs to settle and GET holds the notification
	// stream open: beyond the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	p := auth.FromContext(r.Context())
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		h.mu.Lock()
		owner, known := h.owners[id]
		h.mu.Unlock()
		if known && owner != p.Name {
			httpx.WriteError(w, nil, protocol.Errorf(protocol.EForbidden,
				"This MCP session belongs to another principal: send no Mcp-Session-Id and initialize a session of your own."))
			return
		}
		h.sdk.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		h.sdk.ServeHTTP(w, r)
		return
	}
	s := h.newSession(r, p)
	rec := &ownerWriter{ResponseWriter: w, onHeader: func(hdr http.Header) {
		if id := hdr.Get("Mcp-Session-Id"); id != "" {
			h.mu.Lock()
			h.owners[id] = p.Name
			h.mu.Unlock()
			s.addOnClose(func() {
				h.mu.Lock()
				delete(h.owners, id)
				h.mu.Unlock()
			})
		}
	}}
	h.sdk.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
	// The session lives on (or was never made, when the request was
	// refused): it ends with its MCP session.
	n := 0
	for ss := range s.srv.Sessions() {
		n++
		go func() {
			_ = ss.Wait()
			s.close()
		}()
	}
	if n == 0 {
		s.close()
	}
}

// newSession builds the session of the MCP request r, with a client of
// the server in-process.
func (h *Handler) newSession(r *http.Request, p auth.Principal) *session {
	base := "http://localhost"
	if h.o.Base != nil {
		base = h.o.Base(r)
	}
	o := h.o.Options
	if h.o.Execute == nil {
		o.Execute = func(context.Context) bool { return auth.MayExecute(h.o.AllowExec, p) }
	}
	hc := &http.Client{Transport: &inproc{h: h.target, host: r.Host, remote: r.RemoteAddr, tls: r.TLS,
		auth: r.Header.Get("Authorization"), fwd: forwarded(r.Header)}}
	if h.o.Engine != nil && h.o.Ledger != nil {
		// In-process: the ledger's own handler, which checks each route's
		// scope against the principal in the request's context, carried
		// in here; the edge authenticated and limited the MCP request
		// once already.
		hc = &http.Client{Transport: &inproc{h: asPrincipal(h.o.Ledger, p), host: r.Host, remote: r.RemoteAddr, tls: r.TLS}}
	}
	c, err := client.New(base, &client.Options{HTTPClient: hc, UserAgent: "asmp-mcp"})
	if err != nil {
		h.o.Logger.Error("the MCP bridge cannot build its client", "base", base, "err", err)
		c, _ = client.New("http://localhost", &client.Options{HTTPClient: hc, UserAgent: "asmp-mcp"})
	}
	// /mcp needs the read scope, which lists the directory.
	rows, ctx, stop := h.rows, h.ctx, func() {}
	if rows == nil {
		// A watcher of the session's own, with its token.
		ctx, stop = context.WithCancel(h.ctx)
		rows = newWatcher(c, h.o.Poll, h.o.Logger)
	}
	rows.start(ctx)
	var runs runBackend = c
	if h.o.Engine != nil {
		runs = newEngineRuns(h.o.Engine, base, p, h.o.MaxDepth)
	}
	s := newSession(runs, c, o, rows)
	s.addOnClose(stop)
	return s
}

// asPrincipal serves h as principal p: the request's context carries p,
// and any Authorization it has is dropped.
func asPrincipal(h http.Handler, p auth.Principal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Authorization")
		h.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

func forwarded(h http.Header) http.Header {
	out := http.Header{}
	for _, k := range []string{"X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-For"} {
		if v := h.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// ownerWriter tells onHeader the response headers before they are sent,
// so the session's owner is known before its id reaches the client.
type ownerWriter struct {
	http.ResponseWriter
	onHeader func(http.Header)
	once     sync.Once
}

func (w *ownerWriter) WriteHeader(code int) {
	w.once.Do(func() { w.onHeader(w.Header()) })
	w.ResponseWriter.WriteHeader(code)
}

func (w *ownerWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { w.onHeader(w.Header()) })
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush.
func (w *ownerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// inproc is an http.RoundTripper into an http.Handler: a request is
// served by the handler as if it came from the peer of the MCP request
// (its Host, remote address, TLS state and forwarding headers), with the
// Authorization of the MCP request being served (else of the one that
// created the session). Answers stream: the body is read as the handler
// writes it.
type inproc struct {
	h      http.Handler
	host   string
	remote string
	tls    *tls.ConnectionState
	auth   string
	fwd    http.Header
}

func (t *inproc) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	in := req.Clone(ctx)
	in.RequestURI = req.URL.RequestURI()
	in.Host, in.RemoteAddr, in.TLS = t.host, t.remote, t.tls
	in.Header.Del("Authorization")
	if a, _ := req.Context().Value(callerKey{}).(string); a != "" {
		in.Header.Set("Authorization", a)
	} else if t.auth != "" {
		in.Header.Set("Authorization", t.auth)
	}
	for k, v := range t.fwd {
		in.Header[k] = v
	}
	if in.Body == nil {
		in.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				w.start(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("the handler panicked: %v", v))
				return
			}
			w.start(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(w, in)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		pr.Close()
		return nil, ctx.Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &pipeBody{pr: pr, cancel: cancel}, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the handler's side of inproc: headers are fixed when the
// status is written, the body goes into the pipe.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	status int
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) start(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return // informational answers are not passed on
	}
	w.start(code)
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(b)
}

// Flush sends the headers; the body is sent as it is written.
func (w *pipeWriter) Flush() { w.start(http.StatusOK) }

type pipeBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *pipeBody) Close() error {
	b.cancel()
	return b.pr.CloseWithError(errors.New("the client closed the answer"))
}
