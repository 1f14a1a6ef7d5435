package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/webhook"
)

// The webhooks page lists the subscriptions with their recent deliveries:
// a receiver that answered 410 Gone shows as disabled with the reason, its
// delivery as failed, and Redeliver makes it pending again.
func TestWebhooksPageShowsDeliveries(t *testing.T) {
	needBrowser(t)
	var hits atomic.Int32
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusGone)
	}))
	defer rc.Close()
	allow, err := webhook.ParseAllowList("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	s := newServerWith(t, memstore.New(), examples.All(), nil, &engine.Options{Webhooks: webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Allow: allow}})})
	sub, err := s.eng.CreateWebhook(context.Background(), protocol.WebhookRequest{URL: rc.URL + "/hook", Events: []string{"run.created"}})
	if err != nil {
		t.Fatal(err)
	}
	run := s.start(t, "config-wizard-v1")
	if n, err := s.eng.DeliverDue(context.Background(), nil); err != nil || n != 1 || hits.Load() != 1 {
		t.Fatalf("deliver: %d, %v (receiver hit %d times)", n, err, hits.Load())
	}
	tb := newTab(t, "webhooks")
	tb.do(chromedp.Navigate(s.url + "/console/#/webhooks"))
	row := `document.querySelector('.deliveries-table tbody tr')`
	tb.waitJS(row + `?.querySelector('.badge')?.textContent === 'failed'`)
	if got := tb.text(".webhook-list .card"); !strings.Contains(got, rc.URL+"/hook") || !strings.Contains(got, "410 Gone") || !strings.Contains(got, "run.created") {
		t.Fatalf("the subscription card reads %q", got)
	}
	if got := tb.eval(row + `.querySelector('a').getAttribute('href')`); got != "#/runs/"+run {
		t.Fatalf("the delivery links to %q, want the run", got)
	}
	tb.shot("webhooks")
	tb.do(chromedp.Click(chromedp.CSS(`.deliveries-table tbody tr button`)))
	tb.waitJS(row + `?.querySelector('.badge')?.textContent === 'pending'`)
	page, err := s.eng.WebhookDeliveries(context.Background(), sub.ID, "", 10)
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].Status != "pending" {
		t.Fatalf("after Redeliver: %+v, %v", page, err)
	}
}
