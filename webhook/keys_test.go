package webhook_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/webhook"
)

// TestKeysSignAsSign checks that Keys, which reuse each key's HMAC, sign
// every message as Sign does: the Standard Webhooks vector, then many
// messages one after the other and at once (a reused HMAC starts from
// its key again), with a rotated secret live and then expired, and the
// same refusals.
func TestKeysSignAsSign(t *testing.T) {
	vec := webhook.NewKeys([]webhook.Secret{mustSecret(t, vectorSecret)})
	for range 3 {
		h, err := vec.Sign(vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
		if err != nil || h.Get("webhook-signature") != vectorSignature || h.Get("webhook-id") != vectorID || h.Get("webhook-timestamp") != "1614265330" {
			t.Fatalf("Keys.Sign of the vector = %v, %v", h, err)
		}
	}
	now := time.Unix(1_800_000_000, 0)
	fresh, old := mustSecret(t, "whsec_"+"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwAAAAAAAA"), mustSecret(t, vectorSecret)
	old.ExpiresAt = now.Add(time.Hour)
	secrets := []webhook.Secret{fresh, old}
	keys := webhook.NewKeys(secrets)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id, at, body := fmt.Sprintf("msg_%d_%d", g, i), now.Add(time.Duration(i)*3*time.Minute), []byte(fmt.Sprintf(`{"n":%d}`, i))
				want, werr := webhook.Sign(secrets, id, at, body)
				got, gerr := keys.Sign(id, at, body)
				if werr != nil || gerr != nil || fmt.Sprint(got) != fmt.Sprint(want) {
					errs <- fmt.Errorf("message %s at %s: Keys.Sign = %v, %v; Sign = %v, %v", id, at, got, gerr, want, werr)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := keys.Sign("msg.1", now, nil); !errors.Is(err, webhook.ErrMessageID) {
		t.Errorf("Keys.Sign of a bad id = %v, want ErrMessageID", err)
	}
	if _, err := keys.Sign("msg_1", now.Add(48*time.Hour), nil); err != nil {
		t.Errorf("Keys.Sign once the old secret expired = %v", err)
	}
	dead := webhook.NewKeys([]webhook.Secret{old})
	if _, err := dead.Sign("msg_1", now.Add(2*time.Hour), nil); !errors.Is(err, webhook.ErrSecret) {
		t.Errorf("Keys.Sign with no live secret = %v, want ErrSecret", err)
	}
}
