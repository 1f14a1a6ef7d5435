package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/webhook"
)

// A webhook receiver: read the raw body (bounded), verify it with the
// subscription's secret, answer 2xx quickly, deduplicate on webhook-id.
func ExampleVerifyWebhook() {
	// The secret POST /webhooks answered, shown once.
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := client.VerifyWebhook(secret, r.Header, body, 5*time.Minute); err != nil {
			status := http.StatusUnauthorized
			if errors.Is(err, client.ErrWebhookMalformed) {
				status = http.StatusBadRequest
			}
			http.Error(w, err.Error(), status)
			return
		}
		var msg client.WebhookMessage
		if err := json.Unmarshal(body, &msg); err != nil {
			http.Error(w, "not a webhook message", http.StatusBadRequest)
			return
		}
		fmt.Println(r.Header.Get("webhook-id"), msg.Type, msg.Data.RunID, msg.Data.From, "->", msg.Data.State, msg.Data.Status)
		w.WriteHeader(http.StatusNoContent)
	})

	// What the server sends (package webhook signs it).
	body := []byte(`{"type":"run.completed","timestamp":"2026-12-02T16:00:00Z","data":{"run_id":"r_1","workflow_id":"config-wizard-v1","state":"DONE","status":"completed","from":"CONFIRM","action":"confirm","actor":"alice","frame_href":"/runs/r_1"}}`)
	key, _ := webhook.ParseSecret(secret)
	h, _ := webhook.Sign([]webhook.Secret{key}, "msg_1", time.Now(), body)
	send := func(body []byte) int {
		req := httptest.NewRequest(http.MethodPost, "/hooks/asmp", bytes.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		receiver.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println(send(body))
	// A body changed on the way is refused.
	fmt.Println(send(bytes.Replace(body, []byte("alice"), []byte("mallory"), 1)))
	// Output:
	// msg_1 run.completed r_1 CONFIRM -> DONE completed
	// 204
	// 401
}
