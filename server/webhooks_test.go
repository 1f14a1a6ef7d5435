package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/paging"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/storetest"
	"github.com/asmp-dev/asmp/webhook"
)

func loopbackWebhooks(t *testing.T) *engine.Options {
	t.Helper()
	allow, err := webhook.ParseAllowList("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	return &engine.Options{Webhooks: webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Allow: allow}})}
}

// The subscriptions API: admin scope, 201 with the secret shown once, never
// again; lists, deliveries, redelivery, deletion; bad input is a 400 with a
// hint.
func TestWebhooksAPI(t *testing.T) {
	tokens, err := auth.NewTokens([]string{"all=" + adminSecret, "runner=" + runnerSecret + ":read,runs"}, "")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{opts: &server.Options{Authenticate: tokens.Authenticate}, eopts: loopbackWebhooks(t)})
	admin := []string{"Authorization", "Bearer " + adminSecret}
	runner := []string{"Authorization", "Bearer " + runnerSecret}
	body := map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"run.created", "run.completed"}}
	for _, p := range []struct{ method, path string }{{"POST", "/webhooks"}, {"GET", "/webhooks"}, {"GET", "/webhooks/x"}, {"DELETE", "/webhooks/x"}, {"GET", "/webhooks/x/deliveries"}} {
		r := e.do(p.method, p.path, body, runner...)
		if r.status != 403 || !strings.Contains(r.hint(t), `"admin"`) {
			t.Errorf("%s %s without admin: %d %s", p.method, p.path, r.status, r.body)
		}
	}
	r := e.do("POST", "/webhooks", body, admin...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	sub := r.json(t)
	id, _ := sub["id"].(string)
	if secret, _ := sub["secret"].(string); !strings.HasPrefix(secret, "whsec_") || id == "" || r.header.Get("Location") != e.url+"/webhooks/"+id {
		t.Fatalf("create answer: %s (Location %q)", r.body, r.header.Get("Location"))
	}
	// States given twice are kept once.
	r2 := e.do("POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/states", "events": []string{"run.state_changed"}, "states": []string{"DONE", "CONFIRM", "DONE"}}, admin...)
	if states, _ := r2.json(t)["states"].([]any); r2.status != 201 || len(states) != 2 {
		t.Fatalf("create with a state twice: %d %s, want the two states once each", r2.status, r2.body)
	}
	for _, path := range []string{"/webhooks/" + id, "/webhooks"} {
		r := e.do("GET", path, nil, admin...)
		if r.status != 200 || strings.Contains(string(r.body), "whsec_") || !strings.Contains(string(r.body), id) {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	if r := e.do("POST", "/runs", map[string]any{"workflow_id": "config-wizard-v1"}, admin...); r.status != 201 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/webhooks/"+id+"/deliveries", nil, admin...)
	ds, _ := r.json(t)["deliveries"].([]any)
	if r.status != 200 || len(ds) != 1 {
		t.Fatalf("deliveries: %d %s", r.status, r.body)
	}
	did, _ := ds[0].(map[string]any)["id"].(string)
	if r := e.do("GET", "/webhooks/"+id+"/deliveries/"+did, nil, admin...); r.status != 200 || !strings.Contains(string(r.body), `"message":{"type":"run.created"`) {
		t.Fatalf("delivery: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/webhooks/"+id+"/deliveries/"+did+"/redeliver", nil, admin...); r.status != 202 {
		t.Fatalf("redeliver: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/webhooks/"+id+"/rotate", map[string]any{"grace": "1h"}, admin...); r.status != 200 || !strings.Contains(string(r.body), "whsec_") {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	// The old secrets' lifetimes: no grace named keeps them 24h, "2d" two
	// days, "0s" revokes them (only the new secret is left).
	for _, tc := range []struct {
		body map[string]any
		live int
		for_ time.Duration
	}{
		{map[string]any{"grace": "0s"}, 1, 0}, {map[string]any{}, 2, 24 * time.Hour},
		{map[string]any{"grace": "0s"}, 1, 0}, {map[string]any{"grace": "2d"}, 2, 48 * time.Hour},
	} {
		before := time.Now()
		if r := e.do("POST", "/webhooks/"+id+"/rotate", tc.body, admin...); r.status != 200 {
			t.Fatalf("rotate %v: %d %s", tc.body, r.status, r.body)
		}
		stored, err := e.st.GetSubscription(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		secrets, err := webhook.DecodeSecrets(stored.Secrets)
		if err != nil {
			t.Fatal(err)
		}
		if len(secrets) != tc.live || (tc.live > 1 && secrets[1].ExpiresAt.Sub(before).Round(time.Hour) != tc.for_) {
			t.Fatalf("rotate %v: secrets %v, want %d, the old one for %s", tc.body, secrets, tc.live, tc.for_)
		}
	}
	for _, bad := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "events": []string{"run.melted"}}, 400},
		{"POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/"}, 400},
		{"POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "events": "run.created"}, 400},
		{"POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "events": []string{"run.created"}, "secret": "mine"}, 400},
		{"POST", "/webhooks", map[string]any{"url": "http://10.0.0.1/", "events": []string{"run.created"}}, 400},
		{"POST", "/webhooks", "[1,2]", 400},
		{"POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/" + strings.Repeat("a", engine.MaxWebhookURL), "events": []string{"run.created"}}, 400},
		{"POST", "/webhooks/" + id + "/deliveries/" + did + "/redeliver", map[string]any{"now": true}, 400},
		{"GET", "/webhooks?cursor=bogus", nil, 400},
		{"GET", "/webhooks?limit=0", nil, 400},
		{"GET", "/webhooks?limt=5", nil, 400},
		{"GET", "/webhooks/" + id + "/deliveries?foo=bar", nil, 400},
		{"GET", "/webhooks/" + id + "/deliveries?limit=1&limit=2", nil, 400},
		{"GET", "/webhooks/" + id + "/deliveries/" + did + "?after=1", nil, 400},
		{"POST", "/webhooks/" + id + "/rotate", map[string]any{"grace": "forever"}, 400},
		{"GET", "/webhooks/wh_nope", nil, 404},
		{"GET", "/webhooks/wh_nope/deliveries", nil, 404},
		{"GET", "/webhooks/" + id + "/deliveries/dlv_nope", nil, 404},
		{"POST", "/webhooks/" + id + "/deliveries/dlv_nope/redeliver", nil, 404},
	} {
		r := e.do(bad.method, bad.path, bad.body, admin...)
		if r.status != bad.want {
			t.Errorf("%s %s %v: %d %s, want %d", bad.method, bad.path, bad.body, r.status, r.body, bad.want)
			continue
		}
		r.hint(t)
	}
	if r := e.do("DELETE", "/webhooks/"+id, nil, admin...); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/webhooks/"+id, nil, admin...); r.status != 404 {
		t.Fatalf("after delete: %d", r.status)
	}
}

// Without --webhook-allow a loopback or private target is refused, with a
// hint that names the flag.
func TestWebhooksAPIRefusesPrivateTargets(t *testing.T) {
	e := start(t, setup{})
	for _, u := range []string{"http://127.0.0.1:9/hook", "https://127.0.0.1/hook", "https://localhost/hook", "https://169.254.169.254/", "https://[::1]/", "ftp://example.com/", "https://user:pw@example.com/"} {
		r := e.do("POST", "/webhooks", map[string]any{"url": u, "events": []string{"run.created"}})
		if r.status != 400 {
			t.Errorf("%s: %d %s, want 400", u, r.status, r.body)
			continue
		}
		r.hint(t)
	}
}

// A refused subscription, rotation or redelivery names what it refuses
// without echoing a long value whole: the answer stays short whatever the
// body held (up to the body limit).
func TestWebhooksAPIHintsAreBounded(t *testing.T) {
	e := start(t, setup{eopts: loopbackWebhooks(t)})
	long := strings.Repeat("x", 100_000)
	ok := "http://127.0.0.1:9/hook"
	sub := e.do("POST", "/webhooks", map[string]any{"url": ok, "events": []string{"run.created"}})
	if sub.status != 201 {
		t.Fatalf("create: %d %s", sub.status, sub.body)
	}
	id, _ := sub.json(t)["id"].(string)
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/webhooks", map[string]any{"url": ok, "events": []string{long}}},
		{"/webhooks", map[string]any{"url": ok, "events": []string{"run.created"}, "workflow_id": long}},
		{"/webhooks", map[string]any{"url": ok, "events": []string{"run.created"}, "states": []string{long}}},
		{"/webhooks", map[string]any{"url": ok, "events": []string{"run.created"}, long: 1}},
		{"/webhooks/" + id + "/rotate", map[string]any{long: 1}},
		{"/webhooks/" + id + "/deliveries/dlv_x/redeliver", map[string]any{long: 1}},
	} {
		r := e.do("POST", c.path, c.body)
		if r.status != 400 {
			t.Errorf("POST %s: %d, want 400", c.path, r.status)
			continue
		}
		if r.hint(t); len(r.body) > 600 {
			t.Errorf("POST %s: an answer of %d bytes echoes the long value", c.path, len(r.body))
		}
	}
}

// GET of a delivery pages its attempts (oldest first, limit and an opaque
// history_next_cursor, as every list): a message redelivered many times
// does not answer every attempt at once.
func TestWebhooksAPIPagesADeliverysAttempts(t *testing.T) {
	e := start(t, setup{eopts: loopbackWebhooks(t)})
	r := e.do("POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"run.created"}})
	id, _ := r.json(t)["id"].(string)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/runs", map[string]any{"workflow_id": "config-wizard-v1"}); r.status != 201 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	ctx := context.Background()
	var did string
	for n := range 3 { // three failed attempts, recorded as the delivery loop would
		now := time.Now()
		ds, err := e.st.ClaimDeliveries(ctx, now.Add(time.Hour), 10, "test", now.Add(2*time.Hour))
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim %d: %v, %v", n, ds, err)
		}
		did = ds[0].ID
		if err := storetest.RecordAttempt(ctx, e.st, did, "test", store.DeliveryAttempt{At: now, Status: 500, Class: "non_2xx"}, store.DeliveryPending, now); err != nil {
			t.Fatal(err)
		}
	}
	path := "/webhooks/" + id + "/deliveries/" + did
	var page struct {
		History []struct {
			N int `json:"n"`
		} `json:"history"`
		Next *string `json:"history_next_cursor"`
	}
	r = e.do("GET", path+"?limit=2", nil)
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 || len(page.History) != 2 || page.History[0].N != 1 || page.History[1].N != 2 || page.Next == nil {
		t.Fatalf("first page of 2: %d %s", r.status, r.body)
	}
	next := *page.Next
	page.Next = nil
	r = e.do("GET", path+"?limit=2&cursor="+url.QueryEscape(next), nil)
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 || len(page.History) != 1 || page.History[0].N != 3 || page.Next != nil {
		t.Fatalf("last page: %d %s", r.status, r.body)
	}
	if r := e.do("GET", path, nil); r.status != 200 || strings.Contains(string(r.body), "history_next_cursor") || strings.Count(string(r.body), `"n":`) != 3 {
		t.Fatalf("default page: %d %s", r.status, r.body)
	}
	other := paging.List{Name: "deliveries"}.Of(id).Cursor(did) // a cursor of another list
	attempts := paging.List{Name: "attempts"}
	for _, q := range []string{"?limit=0", "?limit=501", "?cursor=bogus", "?cursor=" + other,
		"?cursor=" + url.QueryEscape(attempts.Of(did).Cursor("-1")),
		"?cursor=" + url.QueryEscape(attempts.Of("dlv_other").Cursor("1")), // another delivery's
	} {
		if r := e.do("GET", path+q, nil); r.status != 400 {
			t.Errorf("GET %s: %d %s, want 400", q, r.status, r.body)
		} else {
			r.hint(t)
		}
	}
	if r := e.do("GET", path+"?cursor="+url.QueryEscape(attempts.Of(did).Cursor("1")), nil); r.status != 200 || strings.Count(string(r.body), `"n":`) != 2 {
		t.Fatalf("this delivery's own cursor: %d %s", r.status, r.body)
	}

	// A subscription's deliveries cursor pages that subscription's list
	// only: another's refuses it.
	r = e.do("POST", "/webhooks", map[string]any{"url": "http://127.0.0.1:9/other", "events": []string{"run.created"}})
	id2, _ := r.json(t)["id"].(string)
	if r := e.do("GET", "/webhooks/"+id+"/deliveries?cursor="+url.QueryEscape(other), nil); r.status != 200 {
		t.Fatalf("a subscription's own deliveries cursor: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/webhooks/"+id2+"/deliveries?cursor="+url.QueryEscape(other), nil); r.status != 400 || !strings.Contains(r.hint(t), "not a cursor of deliveries of "+id2) {
		t.Fatalf("another subscription's deliveries cursor: %d %s, want 400", r.status, r.body)
	}
}
