package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Defaults of a Sender.
const (
	// DefaultTimeout bounds one attempt: connecting, sending, and reading
	// the answer.
	DefaultTimeout = 10 * time.Second
	// DefaultReadLimit is how much of an answer is read before the
	// connection is closed: of its headers, and of its body.
	DefaultReadLimit = 64 << 10
	// KeptBody is how much of an answer an Attempt keeps for the record.
	KeptBody = 1 << 10
	// UserAgent is sent with every webhook request.
	UserAgent = "asmp-webhooks/1"
)

// Options configure a Sender; the zero value (or nil) means the defaults.
type Options struct {
	// Policy decides which targets may be reached (the zero Policy: https
	// to public addresses only).
	Policy Policy
	// Timeout bounds each attempt (0: DefaultTimeout).
	Timeout time.Duration
	// ReadLimit bounds how much of an answer's headers, and of its body,
	// is read (0: DefaultReadLimit).
	ReadLimit int64
	// TLS configures https connections (nil: the system's roots). Tests set
	// RootCAs to trust an httptest server.
	TLS *tls.Config
	// Now is the clock that stamps attempts, the webhook-timestamp sent
	// (nil: time.Now). Attempt.Duration is measured on the real clock.
	Now func() time.Time
}

// Sender delivers signed webhook messages under a Policy. It never follows
// a redirect, never uses a proxy (HTTP_PROXY and friends are ignored: a
// proxy would connect to addresses the Policy cannot see), checks the
// address it connects to, and reads answers up to a bound. It is safe for
// concurrent use; connections to a receiver are reused.
type Sender struct {
	policy    Policy
	timeout   time.Duration
	readLimit int64
	now       func() time.Time
	client    *http.Client
	transport *http.Transport
}

// NewSender returns a Sender with the options (nil: the defaults).
func NewSender(o *Options) *Sender {
	if o == nil {
		o = &Options{}
	}
	s := &Sender{policy: o.Policy, timeout: o.Timeout, readLimit: o.ReadLimit, now: o.Now}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.readLimit <= 0 {
		s.readLimit = DefaultReadLimit
	}
	if s.readLimit < KeptBody {
		s.readLimit = KeptBody
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.transport = &http.Transport{
		Proxy:                 nil, // never the environment's proxy
		DialContext:           s.dial,
		TLSClientConfig:       o.TLS.Clone(),
		TLSHandshakeTimeout:   s.timeout,
		ResponseHeaderTimeout: s.timeout,
		// The answer's headers are bounded like its body (Go's default
		// is 10 MiB an attempt, and many attempts run at once).
		MaxResponseHeaderBytes: s.readLimit,
		MaxIdleConnsPerHost:    16, // above the delivery loop's 8 requests per subscription at once
		IdleConnTimeout:        90 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	s.client = &http.Client{
		Transport: s.transport,
		// A redirect is an answer like any other: the 3xx is recorded and
		// the attempt failed. Following it would reach a URL nobody checked
		// when the subscription was made.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s
}

// CheckURL is the Sender's Policy.CheckURL: whether raw may be a webhook
// target.
func (s *Sender) CheckURL(ctx context.Context, raw string) error {
	return s.policy.CheckURL(ctx, raw)
}

// Close closes the idle connections the Sender keeps.
func (s *Sender) Close() { s.transport.CloseIdleConnections() }

// Target is where a message goes and what it is signed with.
type Target struct {
	URL     string
	Secrets []Secret
	// Keys, when not nil, sign instead of Secrets: the same secrets made
	// ready to sign (NewKeys), for a caller that sends many messages to
	// one target.
	Keys *Keys
}

// Outgoing is one message to send: its stable id (the webhook-id header,
// the same on every attempt) and its body, the encoded Message exactly as
// stored (EncodeMessage).
type Outgoing struct {
	ID   string
	Body []byte
}

// Class sorts the outcomes of an attempt.
type Class string

// The classes of Attempt.
const (
	// Delivered: the receiver answered 2xx.
	Delivered Class = "delivered"
	// Gone: the receiver answered 410 Gone; it wants no more messages, and
	// the subscription is disabled.
	Gone Class = "gone"
	// Non2xx: the receiver answered another status (3xx included:
	// redirects are not followed).
	Non2xx Class = "non_2xx"
	// Timeout: no complete answer within the Sender's timeout.
	Timeout Class = "timeout"
	// ConnRefused: nothing listens at the target's address.
	ConnRefused Class = "connection_refused"
	// Refused: the Policy refused the target or the address it resolved
	// to; nothing was sent.
	Refused Class = "refused"
	// Invalid: the message could not be signed (no live secret, a bad id);
	// nothing was sent, and trying again will not help.
	Invalid Class = "invalid"
	// Failed: another network or TLS error (reset, DNS failure, a bad
	// certificate).
	Failed Class = "failed"
)

// Attempt is the record of one delivery attempt.
type Attempt struct {
	// At is when the attempt started (the webhook-timestamp sent).
	At time.Time
	// Duration is how long it took, until the answer was read.
	Duration time.Duration
	// Class sorts the outcome.
	Class Class
	// Status is the HTTP status answered (0 when there was no answer).
	Status int
	// Body holds the first KeptBody bytes of the answer.
	Body []byte
	// Truncated says the answer was longer than Body.
	Truncated bool
	// RetryAfter is the delay a 429 or 503 answer asked for in Retry-After
	// (in seconds or as an HTTP date), 0 if none.
	RetryAfter time.Duration
	// Err says what went wrong ("" when delivered). It never holds a secret.
	Err string
}

// Retry reports whether the message should be tried again later: every
// failure but Gone and Invalid. A Refused target is retried too, as what
// a name resolves to (and the allow list, after a restart) may change.
func (a Attempt) Retry() bool {
	switch a.Class {
	case Delivered, Gone, Invalid:
		return false
	}
	return true
}

// Deliver sends one message to t, signed with t's live secrets and stamped
// with the Sender's clock, and returns the record of the attempt. It checks
// the URL first (without resolving: the address is checked as it is
// connected to). Cancelling ctx ends the attempt as a Timeout.
func (s *Sender) Deliver(ctx context.Context, t Target, m Outgoing) Attempt {
	start, t0 := s.now(), time.Now()
	a := Attempt{At: start}
	finish := func(c Class, err error) Attempt {
		a.Class = c
		if err != nil {
			a.Err = err.Error()
		}
		a.Duration = time.Since(t0)
		return a
	}
	tgt, err := s.policy.parse(t.URL)
	if err != nil {
		return finish(Refused, err)
	}
	var h http.Header
	if t.Keys != nil {
		h, err = t.Keys.Sign(m.ID, start, m.Body)
	} else {
		h, err = Sign(t.Secrets, m.ID, start, m.Body)
	}
	if err != nil {
		return finish(Invalid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tgt.u.String(), bytes.NewReader(m.Body))
	if err != nil {
		return finish(Refused, err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return finish(classify(ctx, err), err)
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	var kept bytes.Buffer
	n, err := io.Copy(&kept, io.LimitReader(resp.Body, KeptBody))
	if err == nil && n == KeptBody {
		var rest int64
		rest, err = io.Copy(io.Discard, io.LimitReader(resp.Body, s.readLimit-KeptBody+1))
		a.Truncated = rest > 0
	}
	a.Body = kept.Bytes()
	if err != nil {
		return finish(classify(ctx, err), fmt.Errorf("reading the answer: %w", err))
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return finish(Delivered, nil)
	case resp.StatusCode == http.StatusGone:
		return finish(Gone, errors.New("the receiver answered 410 Gone"))
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		a.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), start)
	}
	err = fmt.Errorf("the receiver answered %s", resp.Status)
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
		if len(loc) > 256 {
			loc = loc[:256] + "…"
		}
		err = fmt.Errorf("the receiver answered %s to %q (redirects are not followed: change the subscription's URL)", resp.Status, loc)
	}
	return finish(Non2xx, err)
}

// classify sorts a network error.
func classify(ctx context.Context, err error) Class {
	var ne net.Error
	switch {
	case errors.Is(err, ErrRefused):
		return Refused
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return Timeout
	case errors.As(err, &ne) && ne.Timeout():
		return Timeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return ConnRefused
	}
	return Failed
}

// retryAfter parses a Retry-After value: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		return time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// dial connects to a target's address: it resolves the host and connects
// to its addresses in turn, each checked by the Policy as the socket
// connects (the Dialer's Control sees the address actually used).
func (s *Sender) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	tgt := target{host: host, port: port}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ips, err := s.policy.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{
		// net/http dials on a context that outlives the request.
		Timeout: s.timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot check address %q", ErrRefused, address)
			}
			return s.policy.admit(tgt, ap.Addr())
		},
	}
	var first error
	for _, ip := range ips {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrRefused) {
			return nil, err // a refused address ends the attempt
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}
