package server_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

const (
	adminSecret  = "admin-secret-0123456789"
	readerSecret = "reader-secret-0123456789"
	runnerSecret = "runner-secret-0123456789"
)

func TestTokensAndScopes(t *testing.T) {
	tokens, err := auth.NewTokens([]string{"admin=" + adminSecret, "reader=" + readerSecret + ":read", "runner=" + runnerSecret + ":read,runs"}, "")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuf{}
	st := memstore.New()
	ledger, err := oip.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{
		newStor: func(*testing.T) storeT { return st },
		opts: &server.Options{Authenticate: tokens.Authenticate, API: ledger.API(), AuthFailures: 1000,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	})
	bearer := func(s string) []string { return []string{"Authorization", "Bearer " + s} }

	// No token, or an unknown one: 401 with a hint, everywhere but health checks.
	for _, path := range []string{"/", "/workflows", "/openapi.json", "/metrics", "/api/directory"} {
		r := e.do("GET", path, nil)
		if r.status != 401 || !strings.Contains(r.hint(t), "Authorization: Bearer") || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without a token: %d %s", path, r.status, r.body)
		}
		if r := e.do("GET", path, nil, bearer("wrong-secret-0123456789")...); r.status != 401 || !strings.Contains(r.hint(t), "Unknown token") {
			t.Errorf("GET %s with an unknown token: %d %s", path, r.status, r.body)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := e.do("GET", path, nil); r.status != 200 {
			t.Errorf("%s needs no token, got %d", path, r.status)
		}
	}
	// A known token without the scope: 403 naming the scope.
	if r := e.do("POST", "/runs", nil, bearer(readerSecret)...); r.status != 403 || !strings.Contains(r.hint(t), `needs the "runs" scope`) {
		t.Fatalf("reader starting a run: %d %s", r.status, r.body)
	}
	r := e.do("POST", "/runs", nil, bearer(runnerSecret)...)
	f := frame(t, r, 201)
	frame(t, e.do("GET", "/runs/"+f.RunID, nil, bearer(readerSecret)...), 200)
	frame(t, e.do("POST", "/runs/"+f.RunID+"/transitions/start", nil, bearer(runnerSecret)...), 200)
	// The token's name is the actor; the ledger's source is the principal.
	evs := e.do("GET", "/runs/"+f.RunID+"/events", nil, bearer(readerSecret)...)
	if !strings.Contains(string(evs.body), `"actor":"runner"`) {
		t.Fatalf("events do not name the actor: %s", evs.body)
	}
	row := map[string]any{"key": "echo-v1", "body": map[string]any{"type": "directory_row", "command": "echo"}}
	if r := e.do("POST", "/api/dispatch", row, bearer(runnerSecret)...); r.status != 403 {
		t.Fatalf("dispatch without the dispatch scope: %d %s", r.status, r.body)
	}
	rec := e.do("POST", "/api/dispatch", row, bearer(adminSecret)...)
	if rec.status != 201 {
		t.Fatalf("dispatch: %d %s", rec.status, rec.body)
	}
	got := e.do("GET", "/api/dispatch?key=echo-v1", nil, bearer(readerSecret)...)
	if !strings.Contains(string(got.body), `"source":"admin"`) {
		t.Fatalf("record source: %s", got.body)
	}
	// No secret anywhere: not in records, receipts, frames or logs.
	for name, text := range map[string]string{"receipt": string(rec.body), "record": string(got.body), "events": string(evs.body), "logs": logs.String()} {
		for _, secret := range []string{adminSecret, readerSecret, runnerSecret, "wrong-secret"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains a secret", name)
			}
		}
	}
	if !strings.Contains(logs.String(), "principal=runner") || !strings.Contains(logs.String(), "request_id=") {
		t.Errorf("request logs lack principal or request id:\n%s", logs.String())
	}
}

// A client gets its burst, then 429s with Retry-After and a hint; other
// clients and health checks are not held back. The rate is so low that no
// token comes back during the test, however slow the machine: the counts
// are exact. Refilling over time is TestLimiterRefill's, on a fake clock.
func TestRateLimit(t *testing.T) {
	e := start(t, setup{opts: &server.Options{RateLimit: 0.001, RateBurst: 5, TrustProxy: loopbackProxy}})
	a := []string{"X-Forwarded-For", "192.0.2.1"}
	passed, limited := 0, 0
	for i := 0; i < 12; i++ {
		r := e.do("GET", "/workflows", nil, a...)
		switch r.status {
		case 200:
			if limited > 0 {
				t.Fatalf("request %d passed after a refusal", i)
			}
			passed++
		case 429:
			limited++
			if got := r.header.Get("Retry-After"); got != "1000" {
				t.Fatalf("Retry-After %q, want 1000 (one token at 0.001 per second)", got)
			}
			if h := r.hint(t); h != "Too many requests from this client (limit 0.001 per second); retry after 1000 s." {
				t.Fatalf("429 hint: %q", h)
			}
			if m := r.json(t); m["retry_after"] != 1000.0 || m["error"] != "rate_limited" {
				t.Fatalf("429 body: %s", r.body)
			}
		default:
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	if passed != 5 || limited != 7 {
		t.Fatalf("%d passed and %d limited of 12; want the burst of 5, then 7 refusals", passed, limited)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := e.do("GET", path, nil, a...); r.status != 200 {
			t.Fatalf("%s is never limited: %d", path, r.status)
		}
	}
	if r := e.do("GET", "/workflows", nil, "X-Forwarded-For", "192.0.2.2"); r.status != 200 {
		t.Fatalf("another client was limited by the first one's requests: %d", r.status)
	}
	if r := e.do("GET", "/workflows", nil, a...); r.status != 429 {
		t.Fatalf("the first client again: %d, want 429", r.status)
	}
}

func TestMaxStreamsPerClient(t *testing.T) {
	e := start(t, setup{opts: &server.Options{MaxStreamsPerClient: 2}})
	id := e.startRun("").RunID
	a := e.openStream("/runs/" + id + "/stream")
	b := e.openStream("/runs/" + id + "/stream")
	a.next(t, streamWait)
	b.next(t, streamWait)
	r := e.do("GET", "/runs/"+id+"/stream", nil)
	if r.status != 429 || !strings.Contains(r.hint(t), "2 open streams") {
		t.Fatalf("third stream: %d %s", r.status, r.body)
	}
	a.cancel()
	deadline := time.Now().Add(streamWait)
	for {
		c := e.openStream("/runs/" + id + "/stream")
		if c.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream's slot was never released")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMetrics(t *testing.T) {
	e := start(t, setup{})
	id := e.startRun("").RunID
	frame(t, e.fire(id, "start", nil), 200)
	e.fire(id, "nope", nil)
	m := string(e.do("GET", "/metrics", nil).body)
	for _, want := range []string{
		`asmp_http_requests_total{code="201",method="POST",route="POST /runs"} 1`,
		`asmp_http_requests_total{code="403",method="POST",route="POST /runs/{run_id}/transitions/{action}"} 1`,
		`asmp_transitions_total{action="start",kind="transition",workflow="config-wizard-v1"} 1`,
		`asmp_runs{status="derived",workflow="config-wizard-v1"} 1`,
		`asmp_stream_subscribers 0`,
		`asmp_task_queue_depth 0`,
		`asmp_ledger_records 0`,
		`asmp_webhook_deliveries_pending 0`,
		`asmp_http_request_duration_seconds_bucket`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// The outbox's backlog is a gauge: a subscription's messages count until
// they are sent (no delivery loop runs in this test's server).
func TestMetricsWebhookBacklog(t *testing.T) {
	e := start(t, setup{eopts: loopbackWebhooks(t)})
	r := e.do("POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"run.created", "run.state_changed"}})
	if r.status != 201 {
		t.Fatalf("subscribe: %d %s", r.status, r.body)
	}
	id := e.startRun("").RunID
	frame(t, e.fire(id, "start", nil), 200)
	if m := string(e.do("GET", "/metrics", nil).body); !strings.Contains(m, "\nasmp_webhook_deliveries_pending 2\n") {
		t.Errorf("metrics do not count the two pending deliveries:\n%s", m)
	}
}

// opaqueWriter wraps a ResponseWriter without an Unwrap method, as user
// middleware may.
type opaqueWriter struct{ http.ResponseWriter }

// Request logs name the route and the principal whether or not user
// middleware wraps the writer in between.
func TestRequestLogsThroughUserMiddleware(t *testing.T) {
	tokens, err := auth.NewTokens([]string{"runner=" + runnerSecret + ":read,runs"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for name, mw := range map[string][]func(http.Handler) http.Handler{
		"none": nil,
		"opaque writer": {func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next.ServeHTTP(opaqueWriter{w}, r)
			})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &lockedBuf{}
			e := start(t, setup{opts: &server.Options{Authenticate: tokens.Authenticate, Middleware: mw,
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}})
			r := e.do("GET", "/workflows", nil, "Authorization", "Bearer "+runnerSecret)
			if r.status != 200 {
				t.Fatalf("GET /workflows: %d %s", r.status, r.body)
			}
			if !strings.Contains(logs.String(), `route="GET /workflows"`) || !strings.Contains(logs.String(), "principal=runner") {
				t.Errorf("request log lacks the route or the principal:\n%s", logs.String())
			}
		})
	}
}
