package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// hangingReceiver is a webhook receiver on loopback that hangs (never
// answers) every request that arrives while hang is set, and answers
// those that arrive later 200 once their signature verifies. It counts
// 2xx answers per webhook-id: a hung request cut off when its sender dies
// is never answered, so it does not count.
type hangingReceiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	secret   string
	hang     bool
	hung     int               // requests that arrived while hanging
	answered map[string]int    // webhook-id -> 2xx answers
	msgs     map[string][]byte // webhook-id -> body
	bad      []string          // why requests were refused
}

func newHangingReceiver(t *testing.T) *hangingReceiver {
	rc := &hangingReceiver{hang: true, answered: map[string]int{}, msgs: map[string][]byte{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hangingReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	if rc.hang {
		rc.hung++
		rc.mu.Unlock()
		<-r.Context().Done() // until the sender goes away
		return
	}
	defer rc.mu.Unlock()
	if err == nil {
		err = client.VerifyWebhookAt(rc.secret, r.Header, body, time.Minute, time.Now())
	}
	if err != nil {
		rc.bad = append(rc.bad, id+": "+err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.answered[id]++
	rc.msgs[id] = body
	w.WriteHeader(http.StatusOK)
}

func (rc *hangingReceiver) hungCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.hung
}

// Webhook messages in flight when the server is killed with -9 are sent
// again by the next server on the same database, and every message is
// answered exactly once: the receiver hangs every request until the first
// server dies, then answers 200.
func TestWebhooksSurviveKill9InFlight(t *testing.T) {
	rc := newHangingReceiver(t)
	db := filepath.Join(t.TempDir(), "asmp.db")
	args := []string{"--db", db, "--webhook-allow", "127.0.0.1/32", "testdata/loop.yaml"}
	p := serve(t, args...)
	var sub protocol.WebhookSubscription
	r := p.do("POST", "/webhooks", map[string]any{"url": rc.srv.URL + "/hook", "events": []string{"run.created", "run.state_changed"}})
	if r.status != 201 {
		t.Fatalf("POST /webhooks: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &sub); err != nil || sub.Secret == "" {
		t.Fatalf("subscription %s: %v", r.body, err)
	}
	rc.mu.Lock()
	rc.secret = sub.Secret
	rc.mu.Unlock()

	const runs = 10
	ids := map[string]bool{}
	for i := 0; i < runs; i++ {
		id := frameOf(t, p.do("POST", "/runs", nil), 201).RunID
		frameOf(t, p.do("POST", "/runs/"+id+"/transitions/tick", map[string]any{"n": i}), 200)
		ids[id] = true
	}
	deadline := time.Now().Add(20 * time.Second)
	for rc.hungCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no webhook request reached the receiver:\n%s", p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	rc.mu.Lock()
	rc.hang = false
	rc.mu.Unlock()

	q := serve(t, args...)
	deadline = time.Now().Add(20 * time.Second)
	for {
		var l protocol.WebhookDeliveryList
		if err := json.Unmarshal(q.do("GET", "/webhooks/"+sub.ID+"/deliveries?limit=100", nil).body, &l); err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, d := range l.Deliveries {
			if d.Status == "delivered" {
				done++
			}
		}
		if done == 2*runs && len(l.Deliveries) == 2*runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries delivered after the restart: %+v\n%s", done, len(l.Deliveries), l.Deliveries, q.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Fatalf("refused requests: %s", strings.Join(rc.bad, "; "))
	}
	if len(rc.answered) != 2*runs {
		t.Fatalf("%d messages answered, want %d (a created and a state_changed per run): %v", len(rc.answered), 2*runs, rc.answered)
	}
	types := map[string]int{}
	for id, n := range rc.answered {
		if n != 1 {
			t.Errorf("message %s answered 200 %d times, want once", id, n)
		}
		var m protocol.WebhookMessage
		if err := json.Unmarshal(rc.msgs[id], &m); err != nil {
			t.Fatal(err)
		}
		if !ids[m.Data.RunID] {
			t.Errorf("message %s about run %q, not one of ours", id, m.Data.RunID)
		}
		types[m.Type]++
	}
	if types["run.created"] != runs || types["run.state_changed"] != runs {
		t.Fatalf("message types %v, want %d of run.created and run.state_changed", types, runs)
	}
}

// Without --webhook-allow, a loopback receiver is refused when the
// subscription is made, with a hint naming the flag that admits it.
func TestWebhookLoopbackNeedsAllow(t *testing.T) {
	rc := newHangingReceiver(t)
	p := serve(t, "--db", ":memory:", "testdata/loop.yaml")
	h := errorOf(t, p.do("POST", "/webhooks", map[string]any{"url": rc.srv.URL + "/hook", "events": []string{"run.created"}}), 400)
	if !strings.Contains(h, "--webhook-allow") {
		t.Fatalf("hint %q does not name --webhook-allow", h)
	}
	if n := rc.hungCount(); n != 0 {
		t.Fatalf("the refused receiver was sent %d requests", n)
	}
}

// --webhook-retention deletes a delivered message's delivery once its
// last attempt is that old (GET answers 404 with a hint naming
// retention), keeps one still pending (retried), logs the round and counts
// the deletion in /metrics. The retention is tiny, so the loop's period
// (a quarter of it, at least 100ms) is too: the test waits well under a
// second.
func TestWebhookRetentionPrunesSettledDeliveries(t *testing.T) {
	var mu sync.Mutex
	answered := 0
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		answered++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)
	p := serve(t, "--db", filepath.Join(t.TempDir(), "asmp.db"), "--webhook-allow", "127.0.0.1/32", "--webhook-retention", "200ms", "testdata/loop.yaml")
	subscribe := func(path string) string {
		t.Helper()
		var sub protocol.WebhookSubscription
		r := p.do("POST", "/webhooks", map[string]any{"url": rc.URL + path, "events": []string{"run.created"}})
		if r.status != 201 || json.Unmarshal(r.body, &sub) != nil {
			t.Fatalf("POST /webhooks: %d %s", r.status, r.body)
		}
		return sub.ID
	}
	ok, fail := subscribe("/ok"), subscribe("/fail")
	frameOf(t, p.do("POST", "/runs", nil), 201)
	// The deliveries are stored with the run: pending, until sent.
	only := func(sub string) string {
		t.Helper()
		var l protocol.WebhookDeliveryList
		if err := json.Unmarshal(p.do("GET", "/webhooks/"+sub+"/deliveries", nil).body, &l); err != nil || len(l.Deliveries) != 1 {
			t.Fatalf("deliveries of %s: %+v, %v", sub, l, err)
		}
		return l.Deliveries[0].ID
	}
	okID, failID := only(ok), only(fail)

	deadline := time.Now().Add(10 * time.Second)
	var r response
	for r = p.do("GET", "/webhooks/"+ok+"/deliveries/"+okID, nil); r.status != 404; r = p.do("GET", "/webhooks/"+ok+"/deliveries/"+okID, nil) {
		if time.Now().After(deadline) {
			t.Fatalf("the delivered message's delivery was not pruned: %d %s\n%s", r.status, r.body, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if h := errorOf(t, r, 404); !strings.Contains(h, "never existed") || !strings.Contains(h, "retention") {
		t.Fatalf("the hint for a pruned delivery %q does not say it may have been removed by retention", h)
	}
	mu.Lock()
	n := answered
	mu.Unlock()
	if n != 1 {
		t.Fatalf("the receiver answered %d requests, want 1 before its delivery was pruned", n)
	}
	// Two more rounds at least (every 100ms): the failed attempt's
	// delivery, pending until its retry in 5 s, stays.
	time.Sleep(300 * time.Millisecond)
	var d protocol.WebhookDelivery
	if r := p.do("GET", "/webhooks/"+fail+"/deliveries/"+failID, nil); r.status != 200 || json.Unmarshal(r.body, &d) != nil || d.Status != "pending" || d.Attempts != 1 {
		t.Fatalf("the pending delivery after retention rounds: %d %s", r.status, r.body)
	}
	if m := string(p.do("GET", "/metrics", nil).body); !strings.Contains(m, "asmp_webhook_deliveries_pruned_total 1\n") {
		t.Fatalf("metrics lack the pruned delivery:\n%s", m)
	}
	if !strings.Contains(p.stderr.String(), "retention: deleted settled webhook deliveries") {
		t.Fatalf("no retention log line:\n%s", p.stderr.String())
	}
}

// --webhook-retention is documented in serve --help with its default of 7
// days, and a negative one is refused with a hint naming the way to keep
// everything.
func TestWebhookRetentionFlag(t *testing.T) {
	out, err := exec.Command(binary, "serve", "--help").CombinedOutput()
	if err != nil || !regexp.MustCompile(`--webhook-retention duration +delete settled webhook deliveries .*\(default 168h0m0s\)`).Match(out) {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", ":memory:", "--webhook-retention", "-1s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--webhook-retention -1s") || !strings.Contains(string(out), "0 to keep every webhook delivery") {
		t.Fatalf("a negative retention: %v\n%s", err, out)
	}
	for _, lease := range []string{"0s", "-1s"} {
		out, err = exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", ":memory:", "--task-lease", lease).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--task-lease must be a positive duration") {
			t.Fatalf("--task-lease %s: %v\n%s", lease, err, out)
		}
	}
}
