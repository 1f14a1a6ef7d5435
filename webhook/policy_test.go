package webhook_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/asmp-dev/asmp/webhook"
)

// fakeDNS resolves names from a table; a name with several answers gives
// them in turn, the last one from then on (a DNS rebinding).
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	asked   map[string]int
}

func newDNS(answers map[string][]string) *fakeDNS {
	d := &fakeDNS{answers: map[string][][]netip.Addr{}, asked: map[string]int{}}
	for name, seq := range answers {
		for _, a := range seq {
			var ips []netip.Addr
			for _, s := range strings.Split(a, " ") {
				ips = append(ips, netip.MustParseAddr(s))
			}
			d.answers[name] = append(d.answers[name], ips)
		}
	}
	return d
}

func (d *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	host = strings.TrimSuffix(strings.ToLower(host), ".") // as DNS compares names
	seq := d.answers[host]
	if len(seq) == 0 {
		return nil, errors.New("no such host")
	}
	i := min(d.asked[host], len(seq)-1)
	d.asked[host]++
	return seq[i], nil
}

func mustAllow(t *testing.T, s string) webhook.AllowList {
	t.Helper()
	a, err := webhook.ParseAllowList(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestParseAllowList(t *testing.T) {
	a := mustAllow(t, " 10.0.0.0/8, ::1 ,127.0.0.1,Receiver.Internal., fd00::/8,, [::1],a.internal,10.1.2.3/8")
	if got := a.String(); got != "10.0.0.0/8,::1,127.0.0.1,fd00::/8,::1,10.0.0.0/8,a.internal,receiver.internal" {
		t.Errorf("String = %q", got)
	}
	if narrow := mustAllow(t, "10.0.0.0/8,127.0.0.1,::1,fd12::/16,receiver.internal"); narrow.AdmitsMetadata() {
		t.Errorf("%s admits a metadata address", narrow)
	}
	for _, broad := range []string{"0.0.0.0/0", "169.254.0.0/16", "::/0", "fd00::/8,127.0.0.1", "100.64.0.0/10", "169.254.169.254"} {
		if !mustAllow(t, broad).AdmitsMetadata() {
			t.Errorf("%s: AdmitsMetadata = false, want true", broad)
		}
	}
	if a, err := webhook.ParseAllowList(""); err != nil || a.String() != "" {
		t.Errorf("empty list: %v %q", err, a.String())
	}
	for _, bad := range []string{"10.0.0.0/33", "http://x", "a b", "*.example.com", "x..y", "-x.com", "x/8", strings.Repeat("a", 64) + ".com"} {
		if _, err := webhook.ParseAllowList("127.0.0.1," + bad); err == nil || !strings.Contains(err.Error(), "--webhook-allow") {
			t.Errorf("ParseAllowList(%q) = %v, want an error naming the flag", bad, err)
		}
	}
}

// Every kind of address that is not on the public internet is refused as a
// target, in every form it can be written in, and public ones are not.
func TestCheckURLRefusesAddressesInsideTheNetwork(t *testing.T) {
	p := &webhook.Policy{Resolver: newDNS(nil)}
	ctx := context.Background()
	for _, c := range []struct{ ip, what string }{
		{"127.0.0.1", "loopback"},
		{"127.1.2.3", "loopback"},
		{"::1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%25eth0", "link-local"},
		{"169.254.169.254", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"100.100.100.200", "metadata"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.254", "carrier-grade NAT"},
		{"255.255.255.255", "reserved"},
		{"240.0.0.1", "reserved"},
		{"192.0.0.170", "reserved"},
		{"198.18.0.1", "benchmarking"},
		{"192.0.2.1", "documentation"},
		{"2001:db8::1", "documentation"},
		{"::ffff:127.0.0.1", "IPv4-mapped form of a loopback"},
		{"::ffff:169.254.169.254", "IPv4-mapped form of a cloud metadata"},
		{"::ffff:10.0.0.1", "IPv4-mapped form of a private"},
		{"::ffff:7f00:1", "IPv4-mapped form of a loopback"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"64:ff9b::127.0.0.1", "NAT64 or 6to4) of a loopback"},
		{"64:ff9b::a9fe:a9fe", "NAT64 or 6to4) of a cloud metadata"},
		{"2002:7f00:1::1", "NAT64 or 6to4) of a loopback"},
		{"2002:c0a8:101::1", "NAT64 or 6to4) of a private"},
		{"64:ff9b:1::1", "local-use NAT64"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"fec0::1", "site-local"},
	} {
		host := c.ip
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		err := p.CheckURL(ctx, "https://"+host+"/hook")
		if !errors.Is(err, webhook.ErrRefused) || !strings.Contains(err.Error(), c.what) || !strings.Contains(err.Error(), "--webhook-allow") {
			t.Errorf("%s: CheckURL = %v, want a refusal naming %q and the flag", c.ip, err, c.what)
		}
	}
	for _, ip := range []string{"93.184.216.34", "1.1.1.1", "8.8.8.8", "[2606:4700:4700::1111]", "[::ffff:1.1.1.1]", "[64:ff9b::1.1.1.1]", "[2002:0101:0101::1]", "100.63.255.255", "100.128.0.1", "172.32.0.1", "11.0.0.1"} {
		if err := p.CheckURL(ctx, "https://"+ip+"/hook"); err != nil {
			t.Errorf("%s: CheckURL = %v, want it admitted", ip, err)
		}
	}
}

func TestCheckURLResolvesNames(t *testing.T) {
	dns := newDNS(map[string][]string{
		"public.example":   {"93.184.216.34"},
		"loopback.example": {"127.0.0.1"},
		"mixed.example":    {"93.184.216.34 10.0.0.7"},
		"metadata.example": {"169.254.169.254"},
		"v6.example":       {"::ffff:127.0.0.1"},
	})
	ctx := context.Background()
	strict := &webhook.Policy{Resolver: dns}
	if err := strict.CheckURL(ctx, "https://public.example/hook"); err != nil {
		t.Errorf("public name: %v", err)
	}
	for _, c := range []struct{ url, want string }{
		{"https://loopback.example/hook", "loopback.example resolves to 127.0.0.1, which is a loopback address"},
		{"https://mixed.example/hook", "resolves to 10.0.0.7, which is a private address"},
		{"https://metadata.example:8443/latest", "cloud metadata"},
		{"https://v6.example/", "IPv4-mapped"},
		{"https://LOOPBACK.example./hook", "loopback"},
	} {
		if err := strict.CheckURL(ctx, c.url); !errors.Is(err, webhook.ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckURL = %v, want %q", c.url, err, c.want)
		}
	}
	if err := strict.CheckURL(ctx, "https://nowhere.example/"); err == nil || errors.Is(err, webhook.ErrRefused) || !strings.Contains(err.Error(), "does not resolve") {
		t.Errorf("a name that does not resolve: %v", err)
	}

	allowed := &webhook.Policy{Resolver: dns, Allow: mustAllow(t, "loopback.example,10.0.0.0/24")}
	for _, u := range []string{"https://loopback.example/hook", "https://Loopback.Example./hook", "https://mixed.example/hook", "http://loopback.example/hook", "http://10.0.0.9/", "https://10.0.0.255/"} {
		if err := allowed.CheckURL(ctx, u); err != nil {
			t.Errorf("%s with the allow list: %v", u, err)
		}
	}
	for _, c := range []struct{ url, want string }{
		{"http://public.example/hook", "https://"},      // http only for listed hosts
		{"http://mixed.example/hook", "https://"},       // its addresses being listed is not enough
		{"https://metadata.example/", "cloud metadata"}, // other names stay refused
		{"https://10.0.1.1/", "private"},
	} {
		if err := allowed.CheckURL(ctx, c.url); !errors.Is(err, webhook.ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with the allow list: %v, want %q", c.url, err, c.want)
		}
	}
}

func TestCheckURLRefusesOtherURLs(t *testing.T) {
	p := &webhook.Policy{Resolver: newDNS(map[string][]string{"public.example": {"93.184.216.34"}})}
	for _, c := range []struct{ url, want string }{
		{"http://public.example/", "https://"},
		{"ftp://public.example/", "not an https:// URL"},
		{"file:///etc/passwd", "names no host"},
		{"public.example/hook", "not an absolute URL"},
		{"/hook", "not an absolute URL"},
		{"https:///hook", "names no host"},
		{"https://user:pass@public.example/", "credentials"},
		{"https://public.example:bad/", "not an absolute URL"},
		{"https://public.example:0/", "port 0"},
		{"https://public.example:99999/", "port 99999"},
		{"", "not an absolute URL"},
		{"javascript:alert(1)", "not an absolute URL"},
	} {
		err := p.CheckURL(context.Background(), c.url)
		if !errors.Is(err, webhook.ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: CheckURL = %v, want %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "pass@") {
			t.Errorf("%q: the refusal shows the password: %v", c.url, err)
		}
	}
}

// "localhost" resolved by the system is refused without the flag.
func TestCheckURLRefusesLocalhost(t *testing.T) {
	var p webhook.Policy
	err := p.CheckURL(context.Background(), "https://localhost:8443/hook")
	if !errors.Is(err, webhook.ErrRefused) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("CheckURL(localhost) = %v, want refused as loopback", err)
	}
	p.Allow = mustAllow(t, "localhost")
	if err := p.CheckURL(context.Background(), "http://localhost:8443/hook"); err != nil {
		t.Fatalf("CheckURL(localhost) with --webhook-allow localhost = %v", err)
	}
}
