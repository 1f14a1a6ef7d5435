package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/webhook"
)

// asmp webhooks add, list, deliveries, redeliver, rotate and rm against a
// server that admits a loopback receiver: the secret once, the tables, the
// JSON, the server's hints; a receiver's answer with terminal escapes
// prints as plain text.
func TestWebhooksCommand(t *testing.T) {
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("\x1b]0;pwned\x07 down"))
	}))
	t.Cleanup(rc.Close)
	allow, err := webhook.ParseAllowList("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(memstore.New(), examples.All(), &engine.Options{Webhooks: webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Allow: allow}})})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(server.New(eng, nil))
	t.Cleanup(hs.Close)

	out := ok(t, hs.URL, "webhooks", "add", rc.URL+"/hook", "--events", "run.created")
	mustContain(t, "asmp webhooks add", out, "Subscribed "+rc.URL+"/hook", "to run.created", "Secret (shown once", "whsec_")
	id := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(out)[2], "("), ")")
	mustContain(t, "asmp webhooks list", ok(t, hs.URL, "webhooks", "list"), "ID", id, "active", rc.URL+"/hook", "run.created")
	if out := ok(t, hs.URL, "webhooks", "list", "--json"); strings.Contains(out, "whsec_") || !strings.Contains(out, `"id": "`+id+`"`) {
		t.Fatalf("list --json shows a secret or lacks the subscription:\n%s", out)
	}
	if _, err := eng.StartRun(context.Background(), "config-wizard-v1", nil, engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.DeliverDue(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	out = ok(t, hs.URL, "webhooks", "deliveries", id)
	mustContain(t, "asmp webhooks deliveries", out, "DELIVERY", "run.created", "pending (next ")
	dlv := strings.Fields(strings.Split(out, "\n")[1])[0]
	out = ok(t, hs.URL, "webhooks", "deliveries", id, dlv)
	mustContain(t, "one delivery", out, "Delivery "+dlv, "#1 ", "non_2xx 500", `Message:  {"type":"run.created"`, "pwned")
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Fatalf("a receiver's answer reached the terminal with its escapes:\n%q", out)
	}
	mustContain(t, "asmp webhooks redeliver", ok(t, hs.URL, "webhooks", "redeliver", id, dlv), "Delivery "+dlv+" is pending again")
	if _, err := eng.DeliverDue(context.Background(), nil); err != nil { // a second attempt
		t.Fatal(err)
	}
	out = ok(t, hs.URL, "webhooks", "deliveries", id, dlv, "--limit", "1")
	mustContain(t, "a page of one attempt", out, "#1 ", "more attempts: asmp webhooks deliveries "+id+" "+dlv+" --cursor ")
	cursor := strings.Fields(out[strings.Index(out, "--cursor "):])[1]
	out = ok(t, hs.URL, "webhooks", "deliveries", id, dlv, "--limit", "1", "--cursor", cursor)
	if mustContain(t, "the next page", out, "#2 "); strings.Contains(out, "#1 ") || strings.Contains(out, "more attempts") {
		t.Fatalf("the second page of attempts:\n%s", out)
	}
	mustContain(t, "asmp webhooks rotate", ok(t, hs.URL, "webhooks", "rotate", id, "--grace", "1h"), "New secret of "+id, "whsec_")

	// The list of deliveries pages too; a --limit below 1 is refused.
	if _, err := eng.StartRun(context.Background(), "config-wizard-v1", nil, engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	out = ok(t, hs.URL, "webhooks", "deliveries", id, "--limit", "1")
	mustContain(t, "a page of one delivery", out, "More: asmp webhooks deliveries "+id+" --cursor ")
	first := strings.Fields(strings.Split(out, "\n")[1])[0]
	cursor = strings.Fields(out[strings.Index(out, "--cursor "):])[1]
	out = ok(t, hs.URL, "webhooks", "deliveries", id, "--limit", "1", "--cursor", cursor)
	if second := strings.Fields(strings.Split(out, "\n")[1])[0]; second == first || strings.Contains(out, "More:") {
		t.Fatalf("the second page of deliveries (the first held %s):\n%s", first, out)
	}
	for _, bad := range [][]string{{"webhooks", "deliveries", id, "--limit", "0"}, {"webhooks", "deliveries", id, dlv, "--limit", "-1"}} {
		fails(t, hs.URL, "--limit must be a positive number", bad...)
	}

	fails(t, hs.URL, "Unknown event type", "webhooks", "add", rc.URL, "--events", "run.exploded")
	fails(t, hs.URL, "webhook-allow", "webhooks", "add", "https://10.1.2.3/hook")
	fails(t, hs.URL, "No webhook subscription", "webhooks", "rm", "wh_nope")
	fails(t, hs.URL, "No delivery", "webhooks", "redeliver", id, "dlv_nope")

	mustContain(t, "asmp webhooks rm", ok(t, hs.URL, "webhooks", "rm", id), "Removed "+id)
	mustContain(t, "list after rm", ok(t, hs.URL, "webhooks", "list"), "No webhook subscriptions.")
}
