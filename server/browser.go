package server

import (
	"bytes"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/asmp-dev/asmp/internal/edge/httpx"
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

// hostCheck returns the Host allowlist (421), or nil when the server
// answers to every Host: on loopback (LocalHostsOnly) the loopback names
// (localhost, or a loopback address such as 127.0.0.1, 127.0.0.2 or
// [::1]), and with a PublicURL its host, any port. That stops DNS
// rebinding: a page whose own name resolves to the server sends that name
// as Host (and an Origin matching it), and an address is no name a page
// can own. With Hosts, behind a trusted proxy the host checked is the one
// the client asked the proxy for (X-Forwarded-Host), when the proxy says. Health
// checks (/healthz, /readyz) answer any Host: probes come by address.
func (s *Server) hostCheck() httpx.Check {
	names := map[string]bool{}
	for _, h := range s.opts.Hosts {
		names[normalHost(h)] = true
	}
	public := strings.Join(s.opts.Hosts, ", ")
	local := s.opts.LocalHostsOnly
	if len(names) == 0 && !local {
		return nil
	}
	return func(r *http.Request, rt *httpx.Route) error {
		if rt.Path == "/healthz" || rt.Path == "/readyz" {
			return nil
		}
		given := r.Host
		if len(names) > 0 && s.peerTrusted(r) {
			if h := firstValue(r.Header.Get("X-Forwarded-Host")); h != "" {
				given = h
			}
		}
		host := normalHost(given)
		if names[host] {
			return nil
		}
		if local {
			if host == "localhost" {
				return nil
			}
			if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
				return nil
			}
		}
		switch {
		case len(names) == 0:
			return protocol.Errorf(protocol.EMisdirected,
				"This server listens on loopback and answers to localhost and loopback addresses (127.0.0.1, [::1]) only, not to Host %q. Use one of those, or start it with --public-url naming the address clients use.",
				protocol.Truncate(given, 200))
		case local:
			return protocol.Errorf(protocol.EMisdirected,
				"This server answers to %s (its public URL's host) and to localhost and loopback addresses (127.0.0.1, [::1]) only, not to Host %q. Use one of those, or restart it with the --public-url clients use.",
				public, protocol.Truncate(given, 200))
		default:
			return protocol.Errorf(protocol.EMisdirected,
				"This server answers to %s (its public URL's host) only, not to Host %q. Use that name, or restart it with the --public-url clients use; a reverse proxy must pass on the host clients asked for (as Host, or as X-Forwarded-Host with --trust-proxy).",
				public, protocol.Truncate(given, 200))
		}
	}
}

// normalHost is the host name of a Host header (host[:port], [v6]:port)
// in the form names compare: lowercase, without port, brackets or a
// trailing dot.
func normalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	} else {
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
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
	if c := s.hostCheck(); c != nil {
		checks = append(checks, c)
	}
	for _, o := range s.opts.AllowOrigins {
		if err := CheckOrigin(o); err != nil {
			s.log.Error("ignoring an allowed origin that is not scheme://host[:port]", "origin", o, "err", err)
		}
	}
	return append(checks, originCheck(s.opts.AllowOrigins, s.opts.PublicURL), jsonBody)
}
