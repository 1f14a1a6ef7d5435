package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustProxy parses the value of --trust-proxy: comma-separated CIDR
// ranges or addresses (an address is its own /32 or /128), e.g.
// "127.0.0.1/32,10.0.0.0/8".
func ParseTrustProxy(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR range or an address (e.g. 127.0.0.1/32 or 10.0.0.0/8)", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("name the proxies' addresses, e.g. --trust-proxy 127.0.0.1/32")
	}
	return out, nil
}

// trusted reports whether a (an address, maybe with a port) is one of the
// trusted proxies.
func (s *Server) trusted(a string) bool {
	if len(s.opts.TrustProxy) == 0 {
		return false
	}
	ip, ok := parseIP(a)
	if !ok {
		return false
	}
	for _, p := range s.opts.TrustProxy {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// peerTrusted reports whether the request came straight from a trusted
// proxy, whose X-Forwarded-* headers the server then believes.
func (s *Server) peerTrusted(r *http.Request) bool {
	return s.trusted(r.RemoteAddr)
}

// clientAddr is the client's address: the peer's, or when the peer is a
// trusted proxy the rightmost X-Forwarded-For entry that is not one (the
// entries left of it are whatever the client chose to send). With every
// entry trusted it is the leftmost.
func (s *Server) clientAddr(r *http.Request) string {
	peer := hostOf(r.RemoteAddr)
	if !s.peerTrusted(r) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		ip, ok := parseIP(hops[i])
		if !ok {
			break // not an address a proxy wrote: the hop to its right is the client
		}
		client = ip.String()
		if !s.trusted(client) {
			break
		}
	}
	return client
}

// parseIP parses an address with or without a port (and brackets).
func parseIP(a string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(a); err == nil {
		return ap.Addr().Unmap(), true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// maxClients bounds every per-client table (rate limit buckets, stream
// slots, authentication failures): clients choose their addresses.
var maxClients = 16384
