package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
