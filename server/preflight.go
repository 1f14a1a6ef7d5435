package server

import (
	"net/http"
	"path"
	"strings"

	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// DefaultMaxHeader is the limit of a request's line and headers when
// Options.MaxHeader is 0 (64 KiB); larger → 431 with a JSON body. The
// http.Server must allow more (ServerMaxHeaderBytes), so that the request
// reaches the handler that answers it.
const DefaultMaxHeader = 64 << 10

// ServerMaxHeaderBytes is the http.Server MaxHeaderBytes to run a Server
// with: beyond it net/http answers 431 itself, in plain text, before any
// handler runs.
const ServerMaxHeaderBytes = 1 << 20

// preflight answers, in JSON, what net/http's mux would answer in plain
// text or HTML: a request whose headers are over the limit (431) and a
// path that is not in canonical form ("..", "//", "."), which the mux
// would redirect (400 naming the canonical path), and the API prefix
// without its slash (/api, 404).
func (s *Server) preflight(next http.Handler) http.Handler {
	limit := s.opts.MaxHeader
	if limit <= 0 {
		limit = DefaultMaxHeader
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := headerSize(r); n > limit {
			s.errorStyle(r).Write(w, nil, protocol.Errorf(protocol.EHeaderTooLarge,
				"The request line and headers take %d bytes, over the limit of %d; send fewer or shorter headers.", n, limit).With("limit_bytes", limit))
			return
		}
		if p := r.URL.Path; p != "" && r.Method != http.MethodConnect {
			if c := canonicalPath(p); c != p {
				s.errorStyle(r).Write(w, nil, protocol.Errorf(protocol.EInvalid,
					"The path %q is not in canonical form (no \"..\", \".\" or empty segments); request %q instead.", protocol.Truncate(p, 200), protocol.Truncate(c, 200)).With("path", protocol.Truncate(c, 200)))
				return
			}
		}
		if pre := s.opts.API.Prefix; pre != "" && r.URL.Path+"/" == pre {
			// The mux would redirect to the prefix: say where instead.
			s.opts.API.Errors.Write(w, nil, protocol.Errorf(protocol.ENotFound, "No endpoint at %s; the endpoints of this API are under %s.", r.URL.Path, pre))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// errorStyle is the error style of the API r's path belongs to.
func (s *Server) errorStyle(r *http.Request) httpx.ErrorStyle {
	if s.opts.API.Prefix != "" && strings.HasPrefix(r.URL.Path, s.opts.API.Prefix) {
		return s.opts.API.Errors
	}
	return httpx.ErrorStyle{}
}

// canonicalPath is p as net/http's ServeMux cleans it: path.Clean, with
// p's trailing slash kept.
func canonicalPath(p string) string {
	if p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// headerSize is about what net/http counts against MaxHeaderBytes: the
// request line and every header line.
func headerSize(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	n += len("Host: ") + len(r.Host) + 2
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// noteWrite keeps Server.full: set by an answer 507 (the disk is full),
// cleared by an unsafe request that succeeded (a write went through).
// /readyz is not ready while it is set.
func (s *Server) noteWrite(r *http.Request, status int) {
	switch {
	case status == http.StatusInsufficientStorage:
		s.full.Store(true)
	case status < 400 && r.Method != http.MethodGet && r.Method != http.MethodHead && s.full.Load():
		s.full.Store(false)
	}
}
