package webhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/webhook"
)

// Deliver a message to a receiver on loopback, which only an allow list
// admits, and decide what to do next.
func Example() {
	secret, _ := webhook.NewSecret()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := client.VerifyWebhook(secret.Encode(), r.Header, body, 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable) // busy: try again later
	}))
	defer receiver.Close()

	ctx := context.Background()
	strict := webhook.NewSender(nil)
	fmt.Println(strict.CheckURL(ctx, receiver.URL) != nil) // http:// to loopback: refused

	allow, _ := webhook.ParseAllowList("127.0.0.1") // --webhook-allow 127.0.0.1
	s := webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Allow: allow}})
	defer s.Close()
	fmt.Println(s.CheckURL(ctx, receiver.URL))

	body, _ := webhook.EncodeMessage(webhook.Message{
		Type:      "run.created",
		Timestamp: time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC),
		Data:      webhook.Data{RunID: "r_1", WorkflowID: "config-wizard-v1", State: "INITIAL", Status: "active", FrameHref: "/runs/r_1"},
	})
	a := s.Deliver(ctx, webhook.Target{URL: receiver.URL + "/hooks", Secrets: []webhook.Secret{secret}}, webhook.Outgoing{ID: "msg_1", Body: body})
	fmt.Println(a.Class, a.Status, a.Retry())

	var sched webhook.Schedule // 5 s … 1 h, for 24 h
	next, ok := sched.Next(1, a.At, a.At, a.RetryAfter, func() float64 { return 0 })
	fmt.Println(next.Sub(a.At), ok)
	// Output:
	// true
	// <nil>
	// non_2xx 503 true
	// 5s true
}
