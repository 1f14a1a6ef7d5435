package client_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server"
)

// cutter is a proxy in front of a server that cuts every stream after a
// few lines: by aborting the connection, by ending the response early, or
// by sending a slow_consumer / shutdown end line, in turn.
type cutter struct {
	upstream *url.URL
	every    int
	mu       sync.Mutex
	conns    int
	lastIDs  []string // the Last-Event-ID of each stream request
}

func (c *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/stream") {
		httputil.NewSingleHostReverseProxy(c.upstream).ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	c.conns++
	n := c.conns
	c.lastIDs = append(c.lastIDs, r.Header.Get("Last-Event-ID"))
	c.mu.Unlock()
	req, _ := http.NewRequestWithContext(r.Context(), "GET", c.upstream.String()+r.URL.Path, nil)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	lines := 0
	var last int64
	for sc.Scan() {
		line := sc.Text()
		if it, err := client.ParseStreamLine([]byte(line)); err == nil && it.Frame != nil {
			last = it.Frame.ID
		}
		lines++
		if lines > c.every {
			switch n % 4 {
			case 0:
				panic(http.ErrAbortHandler) // a torn connection
			case 1:
				return // a clean but early end
			case 2:
				fmt.Fprintf(w, `{"id":%d,"end":"slow_consumer","hint":"cut by the test","run_id":"x"}`+"\n", last)
				return
			case 3:
				// Half a line, then the connection is gone.
				io.WriteString(w, line[:len(line)/2])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}
		}
		io.WriteString(w, line+"\n")
		w.(http.Flusher).Flush()
	}
}

// Every event arrives exactly once and in order, however often the stream
// is cut.
func TestStreamSurvivesDisconnects(t *testing.T) {
	f := httpFixture(t, nil)
	up, _ := url.Parse(f.url)
	cut := &cutter{upstream: up, every: 2}
	proxy := httptest.NewServer(cut)
	defer proxy.Close()
	c := must(client.New(proxy.URL, nil))(t)
	ctx := ctx(t)
	run := must(f.b.StartRun(ctx, "loop-v1", nil))(t)
	const ticks = 40
	first := make(chan struct{})
	driverErr := make(chan error, 1)
	go func() {
		<-first
		for i := 0; i < ticks; i++ {
			if _, err := f.b.Transition(ctx, run.RunID, "tick", nil, nil); err != nil {
				driverErr <- err
				return
			}
			if i%8 == 0 {
				time.Sleep(5 * time.Millisecond) // let the stream go live in between
			}
		}
		_, err := f.b.Transition(ctx, run.RunID, "finish", nil, nil)
		driverErr <- err
	}()
	var ids []int64
	var ends int
	for it, err := range c.Stream(ctx, run.RunID, &client.StreamOptions{Backoff: time.Millisecond}) {
		if err != nil {
			t.Fatalf("stream error after ids %v: %v", ids, err)
		}
		switch {
		case it.Frame != nil:
			ids = append(ids, it.Frame.ID)
			if len(ids) == 1 {
				close(first)
			}
		case it.End != nil:
			ends++
			if it.End.End != "slow_consumer" || !it.End.Resumable() {
				t.Fatalf("end line = %+v", it.End)
			}
		}
	}
	if err := <-driverErr; err != nil {
		t.Fatal(err)
	}
	want := make([]int64, ticks+2)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("frame ids = %v\nwant %v", ids, want)
	}
	cut.mu.Lock()
	defer cut.mu.Unlock()
	if cut.conns < 8 || ends == 0 {
		t.Fatalf("only %d connections (%d end lines): the test did not cut enough", cut.conns, ends)
	}
	if cut.lastIDs[0] != "" {
		t.Fatalf("the first request sent Last-Event-ID %q", cut.lastIDs[0])
	}
	prev := int64(0)
	for _, v := range cut.lastIDs[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < prev {
			t.Fatalf("reconnects sent Last-Event-ID %v", cut.lastIDs)
		}
		prev = n
	}
}

// A server that is gone: the stream retries a bounded number of times,
// then yields an error wrapping ErrStreamEnded.
func TestStreamGivesUp(t *testing.T) {
	var hits atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"unavailable","hint":"Shutting down."}`)
	}))
	defer ts.Close()
	c := must(client.New(ts.URL, nil))(t)
	var errs []error
	for _, err := range c.Stream(ctx(t), "r1", &client.StreamOptions{MaxRetries: 3, Backoff: time.Millisecond}) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], client.ErrStreamEnded) || !errors.Is(errs[0], client.ErrUnavailable) ||
		!strings.Contains(errs[0].Error(), "Shutting down.") {
		t.Fatalf("errors = %v", errs)
	}
	if hits.Load() != 4 {
		t.Fatalf("%d attempts, want 1 + 3 retries", hits.Load())
	}
	// A shutdown of the real server: the stream gets the end line and then
	// cannot reconnect.
	f := httpFixture(t, nil)
	run := must(f.b.StartRun(ctx(t), "", nil))(t)
	srv := server.New(f.eng, nil)
	ts2 := httptest.NewServer(srv)
	defer ts2.Close()
	c2 := must(client.New(ts2.URL, nil))(t)
	var ends []string
	var last error
	for it, err := range c2.Stream(ctx(t), run.RunID, &client.StreamOptions{MaxRetries: 2, Backoff: time.Millisecond}) {
		if it.Frame != nil {
			srv.Shutdown()
			ts2.CloseClientConnections()
		}
		if it.End != nil {
			ends = append(ends, it.End.End)
		}
		if err != nil {
			last = err
		}
	}
	if !errors.Is(last, client.ErrStreamEnded) || len(ends) < 3 || len(ends) > 4 || ends[0] != "shutdown" {
		t.Fatalf("after shutdown: ends %v, err %v", ends, last)
	}
}

func TestTokenAndUnauthorized(t *testing.T) {
	f := httpFixture(t, &server.Options{Authenticate: func(r *http.Request) (auth.Principal, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer s3cret":
			return auth.Principal{Name: "ci"}, nil // no scopes
		case "Bearer all":
			return auth.Open, nil
		}
		return auth.Principal{}, protocol.Errorf(protocol.EUnauthorized, "A token is needed: send Authorization: Bearer <token>.")
	}})
	anon := must(client.New(f.url, nil))(t)
	_, err := anon.Workflows(ctx(t))
	wantError(t, err, 401, "token")
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Fatal("ErrUnauthorized")
	}
	noScope := must(client.New(f.url, &client.Options{Token: "s3cret"}))(t)
	_, err = noScope.StartRun(ctx(t), "", nil)
	wantError(t, err, 403, "scope")
	ok := must(client.New(f.url, &client.Options{Token: "all", UserAgent: "test-agent/1"}))(t)
	run := must(ok.StartRun(ctx(t), "", nil))(t)
	// The token goes to the server's origin only: a foreign href is refused.
	_, err = ok.TransitionHref(ctx(t), "http://example.invalid/runs/x/transitions/start", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "not on the server") {
		t.Fatalf("foreign href: %v", err)
	}
	// A relative href resolves against the base URL.
	next := must(ok.TransitionHref(ctx(t), "/runs/"+run.RunID+"/transitions/start", nil, nil))(t)
	if next.State != "CONFIGURE" {
		t.Fatal(next.State)
	}
}

func TestTransportErrors(t *testing.T) {
	// Non-JSON error bodies (a proxy's 502) still give an *Error with a hint.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != client.DefaultUserAgent {
			t.Errorf("User-Agent = %q", r.Header.Get("User-Agent"))
		}
		if strings.HasPrefix(r.URL.Path, "/slow") {
			<-r.Context().Done() // no answer until the client gives up
		}
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer ts.Close()
	c := must(client.New(ts.URL+"/", nil))(t)
	if c.BaseURL() != ts.URL {
		t.Fatalf("BaseURL = %q", c.BaseURL())
	}
	_, err := c.Frame(ctx(t), "r1")
	ce := wantError(t, err, 502, "502", "bad gateway")
	if !errors.Is(err, client.ErrServer) || ce.Method != "GET" || !strings.HasSuffix(ce.URL, "/runs/r1") {
		t.Fatalf("502: %#v", ce)
	}
	// Timeouts.
	slow := must(client.New(ts.URL+"/slow", &client.Options{Timeout: 20 * time.Millisecond}))(t)
	if _, err := slow.Workflows(ctx(t)); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("timeout: %v", err)
	}
	// Nobody listening.
	dead := httptest.NewServer(http.NotFoundHandler())
	addr := dead.URL
	dead.Close()
	c2 := must(client.New(addr, nil))(t)
	if _, err := c2.Discover(ctx(t)); err == nil || !strings.Contains(err.Error(), "cannot reach") || client.StatusOf(err) != 0 {
		t.Fatalf("dead server: %v", err)
	}
	// Bad base URLs.
	for _, u := range []string{"", "ftp://x", "http://", "http://h/?q=1", "http://u:p@h/"} {
		if _, err := client.New(u, nil); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if c, err := client.New("127.0.0.1:8000/w/config-wizard-v1/", nil); err != nil || c.BaseURL() != "http://127.0.0.1:8000/w/config-wizard-v1" {
		t.Fatalf("bare host: %v %v", c, err)
	}
	// Empty run ids and actions fail before any request.
	if _, err := c.Frame(ctx(t), " "); !client.IsNotFound(err) {
		t.Fatalf("empty run id: %v", err)
	}
	if _, err := c.Transition(ctx(t), "r", "", nil, nil); !client.IsInvalid(err) {
		t.Fatalf("empty action: %v", err)
	}
}

// The workflow-scoped API works as a base URL.
func TestScopedBaseURL(t *testing.T) {
	f := httpFixture(t, nil)
	c := must(client.New(f.url+"/w/expense-approval-v1", nil))(t)
	run := must(c.StartRun(ctx(t), "", nil))(t)
	if run.WorkflowID != "expense-approval-v1" || !strings.HasPrefix(run.NextStates[0].Href, f.url+"/w/expense-approval-v1/runs/") {
		t.Fatalf("scoped start: %+v", run.Frame)
	}
	wfs := must(c.Workflows(ctx(t)))(t)
	if len(wfs) != 1 {
		t.Fatalf("scoped catalog = %v", wfs)
	}
	other := must(f.b.StartRun(ctx(t), "config-wizard-v1", nil))(t)
	_, err := c.Frame(ctx(t), other.RunID)
	wantError(t, err, 404, "does not belong")
}

// A connection that goes silent (a proxy that dropped it without a word) is
// abandoned after IdleTimeout and resumed.
func TestStreamIdleTimeout(t *testing.T) {
	var calls atomic.Int32
	var lastIDs sync.Map
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		lastIDs.Store(n, r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "application/x-ndjson")
		if n == 1 {
			io.WriteString(w, `{"id":1,"run_id":"r","workflow_id":"w","state":"A","status":"active","hint":"","next_states":[]}`+"\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // then silence
			return
		}
		io.WriteString(w, `{"id":2,"run_id":"r","workflow_id":"w","state":"B","status":"completed","hint":"","next_states":[]}`+"\n")
	}))
	defer ts.Close()
	c := must(client.New(ts.URL, nil))(t)
	var states []string
	// The first connection stays silent until the client drops it: only
	// the idle timeout gets the stream to B (before ctx's 20 s are up).
	for it, err := range c.Stream(ctx(t), "r", &client.StreamOptions{IdleTimeout: 100 * time.Millisecond, Backoff: time.Millisecond}) {
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, it.Frame.State)
	}
	if !slices.Equal(states, []string{"A", "B"}) || calls.Load() != 2 {
		t.Fatalf("states %v after %d calls", states, calls.Load())
	}
	if v, _ := lastIDs.Load(int32(2)); v != "1" {
		t.Fatalf("the reconnect sent Last-Event-ID %v", v)
	}
}
