package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/webhook"
)

// receiver is a loopback webhook receiver that verifies what it gets.
type receiver struct {
	*httptest.Server
	secret string
	hits   atomic.Int32
	errs   chan error
}

func newReceiver(t *testing.T, secret webhook.Secret, tls bool, answer http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{secret: secret.Encode(), errs: make(chan error, 16)}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		body, _ := io.ReadAll(req.Body)
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || req.Header.Get("User-Agent") != webhook.UserAgent {
			r.errs <- &headerError{req.Method + " " + req.Header.Get("Content-Type") + " " + req.Header.Get("User-Agent")}
		}
		ts := req.Header.Get("webhook-timestamp")
		now, _ := time.Parse(time.RFC3339, "2026-12-02T16:00:00Z")
		if err := client.VerifyWebhookAt(r.secret, req.Header, body, time.Minute, now); err != nil {
			r.errs <- err
		} else if ts != "1796227200" {
			r.errs <- &headerError{"webhook-timestamp " + ts}
		}
		if answer != nil {
			answer(w, req)
		}
	})
	if tls {
		r.Server = httptest.NewTLSServer(h)
	} else {
		r.Server = httptest.NewServer(h)
	}
	t.Cleanup(r.Close)
	return r
}

type headerError struct{ s string }

func (e *headerError) Error() string { return "unexpected request: " + e.s }

func (r *receiver) check(t *testing.T) {
	t.Helper()
	for {
		select {
		case err := <-r.errs:
			t.Errorf("receiver: %v", err)
		default:
			return
		}
	}
}

func (r *receiver) port() string {
	_, port, _ := net.SplitHostPort(r.Listener.Addr().String())
	return port
}

func (r *receiver) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(r.Certificate())
	return pool
}

var fixedNow = func() time.Time { return time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC) }

func newSecret(t *testing.T) webhook.Secret {
	t.Helper()
	s, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var msg = webhook.Outgoing{ID: "msg_01", Body: []byte(`{"type":"run.created","timestamp":"2026-12-02T16:00:00Z","data":{"run_id":"r1","workflow_id":"w","state":"INITIAL","status":"active","frame_href":"/runs/r1"}}`)}

func TestDeliverToAnAdmittedLoopbackReceiver(t *testing.T) {
	sec := newSecret(t)
	for _, c := range []struct {
		name, allow string
		tls         bool
	}{
		{"http, address listed", "127.0.0.1", false},
		{"http, range listed", "127.0.0.0/8", false},
		{"https, range listed", "127.0.0.0/8", true},
		{"https, host listed", "127.0.0.1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t, sec, c.tls, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusAccepted)
				io.WriteString(w, "thanks")
			})
			s := webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Allow: mustAllow(t, c.allow)}, TLS: tlsFor(r, c.tls), Now: fixedNow})
			defer s.Close()
			if err := s.CheckURL(context.Background(), r.URL+"/hook"); err != nil {
				t.Fatalf("CheckURL: %v", err)
			}
			a := s.Deliver(context.Background(), webhook.Target{URL: r.URL + "/hook", Secrets: []webhook.Secret{sec}}, msg)
			if a.Class != webhook.Delivered || a.Status != http.StatusAccepted || string(a.Body) != "thanks" || a.Truncated || a.Err != "" || a.Retry() {
				t.Fatalf("Deliver = %+v", a)
			}
			if !a.At.Equal(fixedNow()) || a.Duration <= 0 {
				t.Errorf("At %v, Duration %v", a.At, a.Duration)
			}
			if r.hits.Load() != 1 {
				t.Errorf("%d requests", r.hits.Load())
			}
			r.check(t)
		})
	}
}

func tlsFor(r *receiver, on bool) *tls.Config {
	if !on {
		return nil
	}
	return &tls.Config{RootCAs: r.roots()}
}

// Without the allow list nothing reaches a loopback receiver, whatever the
// URL says.
func TestDeliverRefusesLoopbackWithoutTheAllowList(t *testing.T) {
	sec := newSecret(t)
	r := newReceiver(t, sec, true, nil)
	plain := newReceiver(t, sec, false, nil)
	dns := newDNS(map[string][]string{"receiver.example": {"127.0.0.1"}, "localhost": {"127.0.0.1 ::1"}})
	s := webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Resolver: dns}, TLS: tlsFor(r, true), Now: fixedNow})
	defer s.Close()
	for _, u := range []string{
		r.URL,
		"https://receiver.example:" + r.port() + "/hook",
		"https://localhost:" + r.port() + "/hook",
		"https://[::ffff:127.0.0.1]:" + r.port() + "/hook",
		plain.URL,
	} {
		if err := s.CheckURL(context.Background(), u); err == nil {
			t.Errorf("CheckURL(%s) admitted it", u)
		}
		a := s.Deliver(context.Background(), webhook.Target{URL: u, Secrets: []webhook.Secret{sec}}, msg)
		if a.Class != webhook.Refused || a.Status != 0 || a.Err == "" {
			t.Errorf("Deliver(%s) = %+v, want refused", u, a)
		}
	}
	if n := r.hits.Load() + plain.hits.Load(); n != 0 {
		t.Errorf("%d requests reached the receivers", n)
	}
}

// A name that resolved to a public address when it was checked and to
// 127.0.0.1 when the message is sent (DNS rebinding) is refused as the
// connection is made.
func TestDeliverRefusesADNSRebinding(t *testing.T) {
	sec := newSecret(t)
	r := newReceiver(t, sec, true, nil)
	dns := newDNS(map[string][]string{"rebind.example": {"93.184.216.34", "127.0.0.1"}})
	// Trust the receiver's certificate (made for example.com) so that only
	// the address check stands between the request and the receiver.
	tc := &tls.Config{RootCAs: r.roots(), ServerName: "example.com"}
	s := webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Resolver: dns}, TLS: tc, Now: fixedNow})
	defer s.Close()
	u := "https://rebind.example:" + r.port() + "/hook"
	if err := s.CheckURL(context.Background(), u); err != nil {
		t.Fatalf("CheckURL at subscription: %v", err)
	}
	a := s.Deliver(context.Background(), webhook.Target{URL: u, Secrets: []webhook.Secret{sec}}, msg)
	if a.Class != webhook.Refused || !strings.Contains(a.Err, "127.0.0.1") || !a.Retry() {
		t.Fatalf("Deliver after the rebinding = %+v, want refused at connect", a)
	}
	if r.hits.Load() != 0 {
		t.Errorf("the request reached the receiver")
	}
}

func TestDeliverToANameAdmittedByTheAllowList(t *testing.T) {
	sec := newSecret(t)
	r := newReceiver(t, sec, false, nil)
	dns := newDNS(map[string][]string{"receiver.internal": {"127.0.0.1"}})
	s := webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Resolver: dns, Allow: mustAllow(t, "receiver.internal")}, Now: fixedNow})
	defer s.Close()
	u := "http://receiver.internal:" + r.port() + "/hook"
	if err := s.CheckURL(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if a := s.Deliver(context.Background(), webhook.Target{URL: u, Secrets: []webhook.Secret{sec}}, msg); a.Class != webhook.Delivered {
		t.Fatalf("Deliver = %+v", a)
	}
	r.check(t)
}

func loopbackSender(t *testing.T, o webhook.Options) *webhook.Sender {
	o.Policy.Allow = mustAllow(t, "127.0.0.1")
	o.Now = fixedNow
	s := webhook.NewSender(&o)
	t.Cleanup(s.Close)
	return s
}

func TestDeliverDoesNotFollowRedirects(t *testing.T) {
	sec := newSecret(t)
	elsewhere := newReceiver(t, sec, false, nil)
	r := newReceiver(t, sec, false, func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, elsewhere.URL+"/stolen", http.StatusTemporaryRedirect)
	})
	a := loopbackSender(t, webhook.Options{}).Deliver(context.Background(), webhook.Target{URL: r.URL, Secrets: []webhook.Secret{sec}}, msg)
	if a.Class != webhook.Non2xx || a.Status != http.StatusTemporaryRedirect || !strings.Contains(a.Err, "redirects are not followed") || !a.Retry() {
		t.Fatalf("Deliver = %+v, want the 307 recorded as a failure", a)
	}
	if elsewhere.hits.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

// An endless answer is read up to the bound, and the first KiB kept.
func TestDeliverBoundsTheAnswer(t *testing.T) {
	sec := newSecret(t)
	var wrote atomic.Int64
	r := newReceiver(t, sec, false, func(w http.ResponseWriter, req *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for req.Context().Err() == nil {
			n, err := w.Write(chunk)
			wrote.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	// If the answer were read to its end, the timeout would end the attempt.
	a := loopbackSender(t, webhook.Options{ReadLimit: 256 << 10, Timeout: 5 * time.Second}).Deliver(context.Background(), webhook.Target{URL: r.URL, Secrets: []webhook.Secret{sec}}, msg)
	if a.Class != webhook.Delivered || len(a.Body) != webhook.KeptBody || !a.Truncated || a.Body[0] != 'x' {
		t.Fatalf("Deliver = class %s, %d bytes kept, truncated %v, err %q", a.Class, len(a.Body), a.Truncated, a.Err)
	}
	// A short answer is kept whole.
	short := newReceiver(t, sec, false, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, strings.Repeat("y", webhook.KeptBody)) })
	a = loopbackSender(t, webhook.Options{}).Deliver(context.Background(), webhook.Target{URL: short.URL, Secrets: []webhook.Secret{sec}}, msg)
	if len(a.Body) != webhook.KeptBody || a.Truncated {
		t.Fatalf("an answer of exactly 1 KiB: %d bytes, truncated %v", len(a.Body), a.Truncated)
	}
}

func TestDeliverTimesOut(t *testing.T) {
	sec := newSecret(t)
	release := make(chan struct{})
	r := newReceiver(t, sec, false, func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	a := loopbackSender(t, webhook.Options{Timeout: 50 * time.Millisecond}).Deliver(context.Background(), webhook.Target{URL: r.URL, Secrets: []webhook.Secret{sec}}, msg)
	if a.Class != webhook.Timeout || a.Status != 0 || !a.Retry() {
		t.Fatalf("Deliver = %+v, want a timeout", a)
	}
	// A slow body counts too: the timeout covers reading the answer.
	slowBody := newReceiver(t, sec, false, func(w http.ResponseWriter, req *http.Request) {
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-req.Context().Done():
		case <-release:
		}
	})
	// (Long enough for the status line to arrive on a loaded machine.)
	a = loopbackSender(t, webhook.Options{Timeout: time.Second}).Deliver(context.Background(), webhook.Target{URL: slowBody.URL, Secrets: []webhook.Secret{sec}}, msg)
	if a.Class != webhook.Timeout || a.Status != 200 {
		t.Fatalf("Deliver with a slow body = %+v, want a timeout", a)
	}
}

func TestDeliverClassifiesAnswers(t *testing.T) {
	sec := newSecret(t)
	answer := func(status int, hdr ...string) *receiver {
		return newReceiver(t, sec, false, func(w http.ResponseWriter, _ *http.Request) {
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.WriteHeader(status)
			io.WriteString(w, http.StatusText(status))
		})
	}
	s := loopbackSender(t, webhook.Options{})
	for _, c := range []struct {
		r          *receiver
		class      webhook.Class
		retry      bool
		retryAfter time.Duration
	}{
		{answer(200), webhook.Delivered, false, 0},
		{answer(204), webhook.Delivered, false, 0},
		{answer(410), webhook.Gone, false, 0},
		{answer(500), webhook.Non2xx, true, 0},
		{answer(404), webhook.Non2xx, true, 0},
		{answer(429, "Retry-After", "30"), webhook.Non2xx, true, 30 * time.Second},
		{answer(503, "Retry-After", fixedNow().Add(2*time.Minute).Format(http.TimeFormat)), webhook.Non2xx, true, 2 * time.Minute},
		{answer(500, "Retry-After", "30"), webhook.Non2xx, true, 0},
	} {
		a := s.Deliver(context.Background(), webhook.Target{URL: c.r.URL, Secrets: []webhook.Secret{sec}}, msg)
		if a.Class != c.class || a.Retry() != c.retry || a.RetryAfter != c.retryAfter {
			t.Errorf("%s: Deliver = %+v", c.r.URL, a)
		}
		c.r.check(t)
	}

	// Nothing listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	if a := s.Deliver(context.Background(), webhook.Target{URL: closed, Secrets: []webhook.Secret{sec}}, msg); a.Class != webhook.ConnRefused || !a.Retry() {
		t.Errorf("a closed port: %+v", a)
	}
	// Nothing to sign with: nothing is sent, and trying again will not help.
	r := answer(200)
	if a := s.Deliver(context.Background(), webhook.Target{URL: r.URL}, msg); a.Class != webhook.Invalid || a.Retry() || r.hits.Load() != 0 {
		t.Errorf("no secret: %+v", a)
	}
}

// An answer's headers are read up to the read limit, like its body: a
// receiver that answers with more fails the attempt (it would otherwise
// make the sender read up to 10 MiB of headers per attempt).
func TestDeliverBoundsTheAnswersHeaders(t *testing.T) {
	sec := newSecret(t)
	r := newReceiver(t, sec, false, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 100<<10))
		w.WriteHeader(http.StatusOK)
	})
	a := loopbackSender(t, webhook.Options{}).Deliver(context.Background(), webhook.Target{URL: r.URL, Secrets: []webhook.Secret{sec}}, msg)
	if a.Class == webhook.Delivered || a.Status != 0 || !strings.Contains(a.Err, "header") || !a.Retry() {
		t.Fatalf("an answer with 100 KiB of headers: %+v, want a failed attempt naming the headers", a)
	}
	a = loopbackSender(t, webhook.Options{ReadLimit: 256 << 10}).Deliver(context.Background(), webhook.Target{URL: r.URL, Secrets: []webhook.Secret{sec}}, msg)
	if a.Class != webhook.Delivered {
		t.Fatalf("with a read limit of 256 KiB the same answer is %+v, want delivered", a)
	}
}
