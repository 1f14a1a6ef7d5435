package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ErrRefused is wrapped by every error that refuses a target: a scheme
// other than https (or http where allowed), or an address inside the
// server's networks that the allow list does not admit.
var ErrRefused = errors.New("webhook target refused")

// AllowList is the parsed --webhook-allow flag: the host names and the
// address ranges that webhook targets may use although they are not on the
// public internet (or use http://). The zero value admits nothing beyond
// the defaults.
type AllowList struct {
	hosts    map[string]bool
	prefixes []netip.Prefix
}

// ParseAllowList parses the --webhook-allow syntax: comma-separated
// entries, each a CIDR ("10.0.0.0/8", "fd00::/8"), an address ("127.0.0.1",
// "::1", meaning just that address) or a host name ("receiver.internal",
// "localhost"; compared without case and a trailing dot, no wildcards).
// Spaces around entries are ignored; an empty string is an empty list.
func ParseAllowList(s string) (AllowList, error) {
	var a AllowList
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
			ip = ip.WithZone("")
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		h := normalHost(e)
		if !validHostName(h) {
			return AllowList{}, fmt.Errorf("--webhook-allow entry %q is not a CIDR (10.0.0.0/8), an address (127.0.0.1) or a host name (receiver.internal)", e)
		}
		if a.hosts == nil {
			a.hosts = map[string]bool{}
		}
		a.hosts[h] = true
	}
	return a, nil
}

// metadataAddrs are the cloud instance metadata services' addresses.
var metadataAddrs = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}

// AdmitsMetadata reports whether the list admits a cloud metadata
// address (169.254.169.254, fd00:ec2::254, 100.100.100.200), as 0.0.0.0/0 or
// 169.254.0.0/16 do: a subscription could then make the server call it.
func (a AllowList) AdmitsMetadata() bool {
	for _, p := range a.prefixes {
		for _, m := range metadataAddrs {
			if p.Contains(m) {
				return true
			}
		}
	}
	return false
}

// String returns the list in the --webhook-allow syntax: the ranges in the
// order given, then the host names sorted.
func (a AllowList) String() string {
	var parts []string
	for _, p := range a.prefixes {
		if p.IsSingleIP() {
			parts = append(parts, p.Addr().String())
		} else {
			parts = append(parts, p.String())
		}
	}
	hosts := make([]string, 0, len(a.hosts))
	for h := range a.hosts {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return strings.Join(append(parts, hosts...), ",")
}

// admitsHost reports whether the list names host.
func (a AllowList) admitsHost(host string) bool { return a.hosts[normalHost(host)] }

// admitsAddr reports whether a listed range holds ip (or, for an
// IPv4-mapped IPv6 address, the IPv4 address it maps).
func (a AllowList) admitsAddr(ip netip.Addr) bool {
	ip = ip.WithZone("")
	for _, p := range a.prefixes {
		if p.Contains(ip) || p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// validHostName reports whether h is a DNS name: dot-separated labels of
// letters, digits, hyphens and underscores, none empty or longer than 63.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Resolver looks up a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy decides which URLs may be webhook targets. The zero value refuses
// everything but https to public addresses and resolves names with
// net.DefaultResolver.
type Policy struct {
	// Allow names the hosts and ranges admitted although not public.
	Allow AllowList
	// Resolver resolves target names; nil means net.DefaultResolver.
	Resolver Resolver
}

func (p *Policy) resolver() Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}

// target is a parsed webhook URL.
type target struct {
	u      *url.URL
	scheme string
	host   string // without port or brackets
	port   string
}

// parse checks a URL's syntax and scheme, without resolving it.
func (p *Policy) parse(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return target{}, fmt.Errorf("%w: %q is not an absolute URL (https://host/path)", ErrRefused, raw)
	}
	t := target{u: u, scheme: strings.ToLower(u.Scheme), host: u.Hostname(), port: u.Port()}
	if t.host == "" {
		return target{}, fmt.Errorf("%w: %q names no host", ErrRefused, raw)
	}
	if u.User != nil {
		return target{}, fmt.Errorf("%w: %q carries credentials; webhook requests are authenticated by their signature, so leave user:password out of the URL", ErrRefused, u.Redacted())
	}
	switch t.scheme {
	case "https":
		if t.port == "" {
			t.port = "443"
		}
	case "http":
		if !p.Allow.admitsHost(t.host) {
			if ip, err := netip.ParseAddr(t.host); err != nil || !p.Allow.admitsAddr(ip) {
				return target{}, fmt.Errorf("%w: %s is http://; targets must use https:// unless --webhook-allow names their host", ErrRefused, u.Redacted())
			}
		}
		if t.port == "" {
			t.port = "80"
		}
	default:
		return target{}, fmt.Errorf("%w: %q is not an https:// URL", ErrRefused, u.Redacted())
	}
	if n, err := strconv.Atoi(t.port); err != nil || n < 1 || n > 65535 {
		return target{}, fmt.Errorf("%w: %s names port %s; a port is from 1 to 65535", ErrRefused, u.Redacted(), t.port)
	}
	return t, nil
}

// admit decides whether the target t may be reached at ip: when the allow
// list names its host or holds ip, or when ip is a public address.
func (p *Policy) admit(t target, ip netip.Addr) error {
	if p.Allow.admitsHost(t.host) || p.Allow.admitsAddr(ip) {
		return nil
	}
	if why := notPublic(ip); why != "" {
		shown := ip.String()
		if t.host != shown {
			shown = t.host + " resolves to " + shown + ", which"
		}
		return fmt.Errorf("%w: %s is %s; name it in --webhook-allow (a CIDR or host name) to admit it", ErrRefused, shown, why)
	}
	return nil
}

// CheckURL decides whether raw may be a webhook target, as a subscription
// is made: it must be an https:// URL (http:// only when the allow list
// names the host or its address), without user:password, and every address
// its host resolves to must be public or admitted by the allow list. A
// refusal wraps ErrRefused and says what to change; a name that does not
// resolve is an error too (not wrapping ErrRefused).
func (p *Policy) CheckURL(ctx context.Context, raw string) error {
	t, err := p.parse(raw)
	if err != nil {
		return err
	}
	ips, err := p.lookup(ctx, t.host)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if err := p.admit(t, ip); err != nil {
			return err
		}
	}
	return nil
}

// lookup returns the addresses of host (the host itself when it is an
// address literal).
func (p *Policy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	ips, err := p.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("webhook target host %q does not resolve: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("webhook target host %q has no addresses", host)
	}
	return ips, nil
}

// Special ranges: addresses that are not on the public internet, with what
// they are. Checked in order; IPv4-mapped and embedding forms are checked
// by the IPv4 address they carry.
var special = []struct {
	prefix netip.Prefix
	what   string
}{
	// Cloud metadata services, named before the ranges holding them.
	{pfx("169.254.169.254/32"), "a cloud metadata address"},
	{pfx("fd00:ec2::254/128"), "a cloud metadata address"},
	{pfx("100.100.100.200/32"), "a cloud metadata address"},
	{pfx("0.0.0.0/8"), "an unspecified (\"this network\") address"},
	{pfx("10.0.0.0/8"), "a private address"},
	{pfx("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{pfx("127.0.0.0/8"), "a loopback address"},
	{pfx("169.254.0.0/16"), "a link-local address"},
	{pfx("172.16.0.0/12"), "a private address"},
	{pfx("192.0.0.0/24"), "a reserved (IETF protocol) address"},
	{pfx("192.0.2.0/24"), "a documentation address"},
	{pfx("192.88.99.0/24"), "a reserved (6to4 relay) address"},
	{pfx("192.168.0.0/16"), "a private address"},
	{pfx("198.18.0.0/15"), "a reserved (benchmarking) address"},
	{pfx("198.51.100.0/24"), "a documentation address"},
	{pfx("203.0.113.0/24"), "a documentation address"},
	{pfx("224.0.0.0/4"), "a multicast address"},
	{pfx("240.0.0.0/4"), "a reserved address"}, // 255.255.255.255 included
	{pfx("::/128"), "an unspecified address"},
	{pfx("::1/128"), "a loopback address"},
	{pfx("::/96"), "an IPv4-compatible (deprecated) address"},
	{pfx("100::/64"), "a discard address"},
	{pfx("2001:db8::/32"), "a documentation address"},
	{pfx("fc00::/7"), "a private (unique local) address"},
	{pfx("fe80::/10"), "a link-local address"},
	{pfx("fec0::/10"), "a site-local (deprecated) address"},
	{pfx("ff00::/8"), "a multicast address"},
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

var (
	nat64   = pfx("64:ff9b::/96")
	nat64l  = pfx("64:ff9b:1::/48")
	sixto4  = pfx("2002::/16")
	teredo  = pfx("2001::/32")
	mapped4 = pfx("::ffff:0:0/96")
)

// notPublic says what ip is when it is not a public internet address (""
// when it is public).
func notPublic(ip netip.Addr) string {
	ip = ip.WithZone("")
	if !ip.IsValid() {
		return "not an address"
	}
	if mapped4.Contains(ip) {
		if why := notPublic(ip.Unmap()); why != "" {
			return "an IPv4-mapped form of " + why
		}
		return ""
	}
	for _, s := range special {
		if s.prefix.Contains(ip) {
			return s.what
		}
	}
	if ip.Is6() {
		b := ip.As16()
		var v4 netip.Addr
		switch {
		case nat64.Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		case sixto4.Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		case nat64l.Contains(ip):
			return "a local-use NAT64 address"
		case teredo.Contains(ip):
			return "a Teredo tunnel address"
		}
		if v4.IsValid() {
			if why := notPublic(v4); why != "" {
				return "an IPv6 form (NAT64 or 6to4) of " + why
			}
		}
	}
	return ""
}
