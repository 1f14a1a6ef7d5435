package webhook_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/webhook"
)

// The test vector of the Standard Webhooks reference libraries
// (libraries/go/webhook_test.go, TestWebhookSign, in
// github.com/standard-webhooks/standard-webhooks), also computed
// independently with openssl:
//
//	printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' |
//	  openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf %s MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | base64 -d | od -An -tx1 | tr -d ' \n') -binary | base64
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustSecret(t *testing.T, s string) webhook.Secret {
	t.Helper()
	sec, err := webhook.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	sec := mustSecret(t, vectorSecret)
	h, err := webhook.Sign([]webhook.Secret{sec}, vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("webhook-signature"); got != vectorSignature {
		t.Errorf("webhook-signature = %q, want %q", got, vectorSignature)
	}
	if got := h.Get("webhook-id"); got != vectorID {
		t.Errorf("webhook-id = %q", got)
	}
	if got := h.Get("webhook-timestamp"); got != "1614265330" {
		t.Errorf("webhook-timestamp = %q", got)
	}
	if got := webhook.Signature(sec.Key, vectorID, "1614265330", []byte(vectorBody)); got != vectorSignature {
		t.Errorf("Signature = %q", got)
	}
	if sec.Encode() != vectorSecret {
		t.Errorf("Encode = %q, want the secret parsed", sec.Encode())
	}
}

func TestSignedMessagesVerifyWithTheSDK(t *testing.T) {
	sec, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	body, err := webhook.EncodeMessage(webhook.Message{Type: "run.completed", Timestamp: now, Data: webhook.Data{RunID: "r1", WorkflowID: "w", State: "DONE", Status: "completed", FrameHref: "/runs/r1"}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := webhook.Sign([]webhook.Secret{sec}, "msg_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.VerifyWebhookAt(sec.Encode(), h, body, 0, now.Add(time.Minute)); err != nil {
		t.Fatalf("the SDK refuses what the server signed: %v", err)
	}
	other, _ := webhook.NewSecret()
	if err := client.VerifyWebhookAt(other.Encode(), h, body, 0, now); !errors.Is(err, client.ErrWebhookSignature) {
		t.Fatalf("another secret verified: %v", err)
	}
}

func TestRotationSignsWithBothSecretsUntilTheOldExpires(t *testing.T) {
	old, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	grace := 24 * time.Hour
	secrets, fresh, err := webhook.Rotate([]webhook.Secret{old}, now, grace)
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets) != 2 || !bytes.Equal(secrets[0].Key, fresh.Key) || !bytes.Equal(secrets[1].Key, old.Key) {
		t.Fatalf("Rotate = %d secrets, want the new then the old", len(secrets))
	}
	if !secrets[1].ExpiresAt.Equal(now.Add(grace)) || !secrets[0].ExpiresAt.IsZero() {
		t.Fatalf("expiries: new %v, old %v", secrets[0].ExpiresAt, secrets[1].ExpiresAt)
	}
	body := []byte(`{}`)
	during := now.Add(grace - time.Second)
	h, err := webhook.Sign(secrets, "msg_1", during, body)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(h.Get("webhook-signature"))); n != 2 {
		t.Fatalf("during the grace period %d signatures, want 2: %q", n, h.Get("webhook-signature"))
	}
	for _, s := range []webhook.Secret{old, fresh} {
		if err := client.VerifyWebhookAt(s.Encode(), h, body, 0, during); err != nil {
			t.Errorf("during the grace period a receiver with %s refuses: %v", s.Encode()[:12], err)
		}
	}
	after := now.Add(grace)
	h, err = webhook.Sign(secrets, "msg_1", after, body)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(h.Get("webhook-signature"))); n != 1 {
		t.Fatalf("after the grace period %d signatures, want 1", n)
	}
	if err := client.VerifyWebhookAt(old.Encode(), h, body, 0, after); !errors.Is(err, client.ErrWebhookSignature) {
		t.Errorf("the expired secret still verifies: %v", err)
	}
	if err := client.VerifyWebhookAt(fresh.Encode(), h, body, 0, after); err != nil {
		t.Errorf("the new secret does not verify: %v", err)
	}
	// Rotating again drops what expired and keeps a shorter expiry.
	again, _, err := webhook.Rotate(secrets, after, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 || !bytes.Equal(again[1].Key, fresh.Key) {
		t.Fatalf("second rotation = %d secrets, want the newest and the previous", len(again))
	}
	if now, _, _ := webhook.Rotate([]webhook.Secret{old}, after, 0); len(now) != 1 {
		t.Errorf("a rotation without grace kept %d secrets, want only the new one", len(now))
	}
	kept, _, _ := webhook.Rotate([]webhook.Secret{{Key: old.Key, ExpiresAt: after.Add(time.Minute)}}, after, time.Hour)
	if !kept[1].ExpiresAt.Equal(after.Add(time.Minute)) {
		t.Errorf("a rotation extended an earlier expiry to %v", kept[1].ExpiresAt)
	}
}

func TestSignRefuses(t *testing.T) {
	sec, _ := webhook.NewSecret()
	now := time.Unix(1700000000, 0)
	for _, c := range []struct {
		name    string
		secrets []webhook.Secret
		id      string
		want    error
	}{
		{"empty id", []webhook.Secret{sec}, "", webhook.ErrMessageID},
		{"id with a dot", []webhook.Secret{sec}, "msg.1", webhook.ErrMessageID},
		{"id with a space", []webhook.Secret{sec}, "msg 1", webhook.ErrMessageID},
		{"id with a newline", []webhook.Secret{sec}, "msg\n1", webhook.ErrMessageID},
		{"id too long", []webhook.Secret{sec}, strings.Repeat("a", 257), webhook.ErrMessageID},
		{"no secret", nil, "msg_1", webhook.ErrSecret},
		{"only expired secrets", []webhook.Secret{{Key: sec.Key, ExpiresAt: now}}, "msg_1", webhook.ErrSecret},
		{"short key", []webhook.Secret{{Key: []byte("short")}}, "msg_1", webhook.ErrSecret},
	} {
		h, err := webhook.Sign(c.secrets, c.id, now, []byte("{}"))
		if !errors.Is(err, c.want) || h != nil {
			t.Errorf("%s: Sign = %v, %v; want %v", c.name, h, err, c.want)
		}
	}
	if _, err := webhook.Sign([]webhook.Secret{sec}, strings.Repeat("a", 256), now, nil); err != nil {
		t.Errorf("a 256-character id refused: %v", err)
	}
}

func TestParseSecret(t *testing.T) {
	sec, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.Key) != webhook.KeySize {
		t.Fatalf("NewSecret made %d bytes", len(sec.Key))
	}
	enc := sec.Encode()
	if !strings.HasPrefix(enc, "whsec_") {
		t.Fatalf("Encode = %q", enc)
	}
	back, err := webhook.ParseSecret(enc)
	if err != nil || !bytes.Equal(back.Key, sec.Key) {
		t.Fatalf("ParseSecret(Encode) = %v, %v", back, err)
	}
	if back, err := webhook.ParseSecret(strings.TrimPrefix(enc, "whsec_")); err != nil || !bytes.Equal(back.Key, sec.Key) {
		t.Fatalf("ParseSecret without the prefix: %v", err)
	}
	two, _ := webhook.NewSecret()
	if bytes.Equal(two.Key, sec.Key) {
		t.Fatal("two secrets are the same")
	}
	for _, bad := range []string{"", "whsec_", "whsec_!!!", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 23)), "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65))} {
		if _, err := webhook.ParseSecret(bad); !errors.Is(err, webhook.ErrSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrSecret", bad, err)
		}
	}
	for _, n := range []int{24, 64} {
		if _, err := webhook.ParseSecret("whsec_" + base64.StdEncoding.EncodeToString(make([]byte, n))); err != nil {
			t.Errorf("a key of %d bytes refused: %v", n, err)
		}
	}
}

// A secret printed or logged by mistake shows only its prefix.
func TestSecretsStayOutOfLogs(t *testing.T) {
	sec := mustSecret(t, vectorSecret)
	sec.ExpiresAt = time.Unix(1, 0)
	key := strings.TrimPrefix(vectorSecret, "whsec_")
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		out = append(out, fmt.Sprintf(verb, sec), fmt.Sprintf(verb, []webhook.Secret{sec}), fmt.Sprintf(verb, &sec))
	}
	out = append(out, fmt.Sprint(webhook.Target{URL: "https://x", Secrets: []webhook.Secret{sec}}))
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "secret", sec, "secrets", []webhook.Secret{sec})
	out = append(out, logged.String())
	for _, s := range out {
		if strings.Contains(s, key) || strings.Contains(s, fmt.Sprint(sec.Key)) || strings.Contains(s, fmt.Sprintf("%x", sec.Key)) {
			t.Errorf("a secret printed as %q", s)
		}
	}
}
