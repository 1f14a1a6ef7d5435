package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store/memstore"
)

func testServer(t *testing.T, opts *Options) *Server {
	t.Helper()
	e, err := engine.New(memstore.New(), examples.All(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(e, opts)
}

// The authentication failure budget on a fake clock: 10 failures, then
// 429 (the right token too, as nothing is compared); one failure comes
// back every 6 s, the whole budget after a minute; each address has its own.
func TestAuthFailureBudget(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	compared := 0
	s := testServer(t, &Options{Authenticate: func(r *http.Request) (auth.Principal, error) {
		compared++
		if r.Header.Get("Authorization") == "Bearer good" {
			return auth.Principal{Name: "good", Scopes: auth.AllScopes}, nil
		}
		return auth.Principal{}, protocol.Errorf(protocol.EUnauthorized, "Unknown token.")
	}})
	s.now = func() time.Time { return now }
	get := func(addr, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/workflows", nil)
		r.RemoteAddr = addr + ":1234"
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	for i := range 10 {
		if w := get("192.0.2.1", "bad"); w.Code != 401 {
			t.Fatalf("failure %d: %d", i, w.Code)
		}
	}
	n := compared
	if w := get("192.0.2.1", "good"); w.Code != 429 || w.Header().Get("Retry-After") != "6" || compared != n {
		t.Fatalf("over the budget: %d, Retry-After %q, compared %d more", w.Code, w.Header().Get("Retry-After"), compared-n)
	}
	if w := get("192.0.2.2", "good"); w.Code != 200 {
		t.Fatalf("another address: %d", w.Code)
	}
	now = now.Add(6 * time.Second)
	if w := get("192.0.2.1", "bad"); w.Code != 401 {
		t.Fatalf("6 s on: %d, want one more try", w.Code)
	}
	if w := get("192.0.2.1", "bad"); w.Code != 429 {
		t.Fatalf("6 s on, second try: %d", w.Code)
	}
	now = now.Add(time.Minute)
	for i := range 10 {
		if w := get("192.0.2.1", "bad"); w.Code != 401 {
			t.Fatalf("a minute on, failure %d: %d", i, w.Code)
		}
	}
	// Successes are not charged.
	for range 20 {
		if w := get("192.0.2.3", "good"); w.Code != 200 {
			t.Fatalf("a good token: %d", w.Code)
		}
	}
}

// The rightmost X-Forwarded-For hop outside the trusted ranges is the
// client; a peer outside them is the client whatever it sends.
func TestClientAddr(t *testing.T) {
	s := testServer(t, &Options{TrustProxy: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}})
	for _, c := range []struct{ peer, xff, want string }{
		{"192.0.2.1:5", "203.0.113.9", "192.0.2.1"},                   // not a proxy
		{"127.0.0.1:5", "203.0.113.9", "203.0.113.9"},                 // one proxy
		{"127.0.0.1:5", "1.1.1.1, 203.0.113.9", "203.0.113.9"},        // the client's own prefix ignored
		{"127.0.0.1:5", "203.0.113.9, 10.1.2.3", "203.0.113.9"},       // two proxies
		{"127.0.0.1:5", "10.9.9.9, 10.1.2.3", "10.9.9.9"},             // every hop trusted: the leftmost
		{"127.0.0.1:5", "", "127.0.0.1"},                              // no header: the proxy
		{"127.0.0.1:5", "garbage, 203.0.113.9", "203.0.113.9"},        // junk left of the client
		{"127.0.0.1:5", "[2001:db8::1]:443, 10.0.0.1", "2001:db8::1"}, // with a port
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := s.clientAddr(r); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: client %s, want %s", c.peer, c.xff, got, c.want)
		}
	}
}

// Per-client tables are bounded however many addresses clients make up.
func TestPerClientTablesAreBounded(t *testing.T) {
	defer func(n int) { maxClients = n }(maxClients)
	maxClients = 8
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := newLimiter(1, 1)
	for i := range 100 {
		l.take(fmt.Sprintf("ip:192.0.2.%d", i), t0)
	}
	if len(l.b) > maxClients {
		t.Fatalf("%d buckets, bound %d", len(l.b), maxClients)
	}
	s := testServer(t, &Options{MaxStreamsPerClient: 2})
	var releases []func()
	for i := range maxClients {
		r := httptest.NewRequest("GET", "/stream", nil)
		r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1", i)
		rel, err := s.acquireStream(r)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		releases = append(releases, rel)
	}
	r := httptest.NewRequest("GET", "/stream", nil)
	r.RemoteAddr = "198.51.100.1:1"
	if _, err := s.acquireStream(r); protocol.ErrorCode(err) != protocol.ERateLimited {
		t.Fatalf("a client over the table's bound: %v", err)
	}
	releases[0]()
	if rel, err := s.acquireStream(r); err != nil {
		t.Fatalf("after one closed: %v", err)
	} else {
		rel()
	}
}
