package server

import (
	"bytes"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/asmp-dev/asmp/internal/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// The checks every request to the edge passes before its route's own
// (SPEC section 16, "Browsers"): a web page the operator visits must not
// be able to drive the API. They are httpx.Checks given to httpx.NewEdge
// in New, in this order: the Host allowlist (421), cross-origin
// protection (403), the body's media type (415).

// originCheck returns the check refusing unsafe requests (POST, PUT,
// PATCH, DELETE) sent by another origin: Sec-Fetch-Site cross-site or
// same-site, or an Origin that is neither the request's Host nor one of
// allowed (the public URL's origin counts as allowed). GET and HEAD stay
// open, so a link from elsewhere still works, except GET /mcp: MCP's
// notification stream is refused to a foreign origin like its POSTs (MCP
// 2025-11-25, streamable HTTP).
// An origin that is not scheme://host[:port] is skipped.
func originCheck(allowed []string, publicURL string) httpx.Check {
	cop := http.NewCrossOriginProtection()
	if u, err := url.Parse(publicURL); publicURL != "" && err == nil && u.Host != "" {
		_ = cop.AddTrustedOrigin(u.Scheme + "://" + u.Host)
	}
	for _, o := range allowed {
		_ = cop.AddTrustedOrigin(strings.TrimRight(o, "/"))
	}
	return func(r *http.Request, rt *httpx.Route) error {
		checked := r
		if rt != nil && rt.Path == mcpPath && r.Method == http.MethodGet {
			checked = r.WithContext(r.Context()) // a shallow copy, checked as an unsafe method
			checked.Method = http.MethodPost
		}
		if err := cop.Check(checked); err != nil {
			origin := r.Header.Get("Origin")
			if origin == "" {
				origin = "another site (Sec-Fetch-Site: " + protocol.Truncate(r.Header.Get("Sec-Fetch-Site"), 40) + ")"
			}
			return protocol.Errorf(protocol.EForbidden,
				"Cross-origin %s refused: the request comes from %s, not from this server's own origin. A browser client of another origin needs the operator to start the server with --allow-origin ORIGIN; other clients send no Origin header.",
				r.Method, protocol.Truncate(origin, 200)).With("origin", protocol.Truncate(r.Header.Get("Origin"), 200))
		}
		return nil
	}
}

// CheckOrigin reports whether o is an origin --allow-origin can take:
// scheme://host[:port], without a path.
func CheckOrigin(o string) error {
	return http.NewCrossOriginProtection().AddTrustedOrigin(strings.TrimRight(o, "/"))
}

// localHosts is the check of a server on loopback without a public URL:
// the Host header must name the loopback interface (localhost, or a
// loopback address such as 127.0.0.1, 127.0.0.2 or [::1], with any port),
// which stops DNS rebinding (a page whose own name resolves to 127.0.0.1
// sends that name as Host; an address is no name a page can own).
func localHosts(r *http.Request, _ *httpx.Route) error {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return protocol.Errorf(protocol.EMisdirected,
		"This server listens on loopback and answers to localhost and loopback addresses (127.0.0.1, [::1]) only, not to Host %q. Use one of those, or start it with --public-url naming the address clients use.",
		protocol.Truncate(r.Host, 200))
}

// jsonBody is the check of every request with a body: a non-empty body
// must be sent as application/json (415 otherwise; a web page can send
// text/plain without a preflight). An empty body needs no Content-Type:
// it counts as {}.
func jsonBody(r *http.Request, _ *httpx.Route) error {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
			return nil
		}
	}
	if r.ContentLength < 0 { // chunked: is there a body at all?
		var one [1]byte
		n, err := io.ReadFull(r.Body, one[:])
		if n == 0 && err != nil {
			return nil
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(one[:n]), r.Body), r.Body}
	}
	return protocol.Errorf(protocol.EUnsupportedMediaType,
		"The request body must be JSON sent with Content-Type: application/json, not %q. With curl: curl --json '{\"key\": \"value\"}' URL.",
		protocol.Truncate(ct, 100))
}

// edgeChecks are the checks of every route, in order.
func (s *Server) edgeChecks() []httpx.Check {
	var checks []httpx.Check
	if s.opts.LocalHostsOnly {
		checks = append(checks, localHosts)
	}
	for _, o := range s.opts.AllowOrigins {
		if err := CheckOrigin(o); err != nil {
			s.log.Error("ignoring an allowed origin that is not scheme://host[:port]", "origin", o, "err", err)
		}
	}
	return append(checks, originCheck(s.opts.AllowOrigins, s.opts.PublicURL), jsonBody)
}
