package client_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
)

// The test vector of the Standard Webhooks reference libraries
// (github.com/standard-webhooks/standard-webhooks, libraries/go,
// TestWebhookSign), which openssl computes too (docs/WEBHOOKS.md).
const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS     = "1614265330"
	vecBody   = `{"test": 2432232314}`
	vecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	// vecOther is a well-formed signature of something else.
	vecOther = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
)

var vecTime = time.Unix(1614265330, 0)

func vecHeader(sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", vecID)
	h.Set("webhook-timestamp", vecTS)
	h.Set("webhook-signature", sig)
	return h
}

func TestVerifyWebhookAcceptsThePublishedVector(t *testing.T) {
	for _, secret := range []string{vecSecret, strings.TrimPrefix(vecSecret, "whsec_")} {
		if err := client.VerifyWebhookAt(secret, vecHeader(vecSig), []byte(vecBody), 5*time.Minute, vecTime); err != nil {
			t.Errorf("secret %q: %v", secret, err)
		}
	}
	// Header names are case-insensitive on the wire.
	h := http.Header{"Webhook-Id": {vecID}, "Webhook-Timestamp": {vecTS}, "Webhook-Signature": {vecSig}}
	if err := client.VerifyWebhookAt(vecSecret, h, []byte(vecBody), 0, vecTime); err != nil {
		t.Errorf("canonical header names: %v", err)
	}
}

func TestVerifyWebhookAcceptsOneOfSeveralSignatures(t *testing.T) {
	for _, sig := range []string{
		vecOther + " " + vecSig,
		vecSig + " " + vecOther,
		"v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg== " + vecSig,
		"v2,garbage  " + vecSig + "   ",
	} {
		if err := client.VerifyWebhookAt(vecSecret, vecHeader(sig), []byte(vecBody), 0, vecTime); err != nil {
			t.Errorf("%q: %v", sig, err)
		}
	}
	// The signature in a second header line counts too.
	h := vecHeader(vecOther)
	h.Add("webhook-signature", vecSig)
	if err := client.VerifyWebhookAt(vecSecret, h, []byte(vecBody), 0, vecTime); err != nil {
		t.Errorf("two header lines: %v", err)
	}
}

func TestVerifyWebhookRefuses(t *testing.T) {
	body := []byte(vecBody)
	set := func(k, v string) http.Header { h := vecHeader(vecSig); h.Set(k, v); return h }
	del := func(k string) http.Header { h := vecHeader(vecSig); h.Del(k); return h }
	for _, c := range []struct {
		name   string
		secret string
		header http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"another signature", vecSecret, vecHeader(vecOther), body, vecTime, client.ErrWebhookSignature},
		{"the right signature under another version", vecSecret, vecHeader("v2," + strings.TrimPrefix(vecSig, "v1,")), body, vecTime, client.ErrWebhookSignature},
		{"the signature without its version", vecSecret, vecHeader(strings.TrimPrefix(vecSig, "v1,")), body, vecTime, client.ErrWebhookSignature},
		{"the signature cut short", vecSecret, vecHeader(vecSig[:len(vecSig)-2]), body, vecTime, client.ErrWebhookSignature},
		{"the signature joined to another by a comma", vecSecret, vecHeader(vecOther + "," + vecSig), body, vecTime, client.ErrWebhookSignature},
		{"a changed body", vecSecret, vecHeader(vecSig), []byte(`{"test": 2432232315}`), vecTime, client.ErrWebhookSignature},
		{"a re-encoded body", vecSecret, vecHeader(vecSig), []byte(`{"test":2432232314}`), vecTime, client.ErrWebhookSignature},
		{"a changed id", vecSecret, set("webhook-id", vecID+"x"), body, vecTime, client.ErrWebhookSignature},
		{"a changed timestamp", vecSecret, set("webhook-timestamp", "1614265331"), body, vecTime, client.ErrWebhookSignature},
		{"another secret", "whsec_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", vecHeader(vecSig), body, vecTime, client.ErrWebhookSignature},
		{"no id", vecSecret, del("webhook-id"), body, vecTime, client.ErrWebhookMalformed},
		{"no timestamp", vecSecret, del("webhook-timestamp"), body, vecTime, client.ErrWebhookMalformed},
		{"no signature", vecSecret, del("webhook-signature"), body, vecTime, client.ErrWebhookMalformed},
		{"a blank signature", vecSecret, set("webhook-signature", "  "), body, vecTime, client.ErrWebhookMalformed},
		{"a signed timestamp", vecSecret, set("webhook-timestamp", "+1614265330"), body, vecTime, client.ErrWebhookMalformed},
		{"a negative timestamp", vecSecret, set("webhook-timestamp", "-1"), body, vecTime, client.ErrWebhookMalformed},
		{"a timestamp with a space", vecSecret, set("webhook-timestamp", " 1614265330"), body, vecTime, client.ErrWebhookMalformed},
		{"a fractional timestamp", vecSecret, set("webhook-timestamp", "1614265330.5"), body, vecTime, client.ErrWebhookMalformed},
		{"a huge timestamp", vecSecret, set("webhook-timestamp", strings.Repeat("9", 30)), body, vecTime, client.ErrWebhookMalformed},
		{"a stale timestamp", vecSecret, vecHeader(vecSig), body, vecTime.Add(5*time.Minute + time.Second), client.ErrWebhookTooOld},
		{"a future timestamp", vecSecret, vecHeader(vecSig), body, vecTime.Add(-5*time.Minute - time.Second), client.ErrWebhookTooNew},
		{"a secret not in base64", "whsec_not base64!", vecHeader(vecSig), body, vecTime, client.ErrWebhookSecret},
		{"an empty secret", "whsec_", vecHeader(vecSig), body, vecTime, client.ErrWebhookSecret},
	} {
		err := client.VerifyWebhookAt(c.secret, c.header, c.body, 5*time.Minute, c.now)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: VerifyWebhookAt = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestVerifyWebhookTolerance(t *testing.T) {
	body := []byte(vecBody)
	for _, c := range []struct {
		tol  time.Duration
		skew time.Duration
		want error
	}{
		{5 * time.Minute, 5 * time.Minute, nil},
		{5 * time.Minute, -5 * time.Minute, nil},
		{5 * time.Minute, 5*time.Minute + time.Second, client.ErrWebhookTooOld},
		{0, 5 * time.Minute, nil}, // the default
		{0, 5*time.Minute + time.Second, client.ErrWebhookTooOld},
		{0, -5*time.Minute - time.Second, client.ErrWebhookTooNew},
		{-time.Second, 5*time.Minute + time.Second, client.ErrWebhookTooOld},
		{time.Hour, 59 * time.Minute, nil},
		{time.Hour, -59 * time.Minute, nil},
		{10 * time.Second, 11 * time.Second, client.ErrWebhookTooOld},
		{10 * time.Second, -11 * time.Second, client.ErrWebhookTooNew},
	} {
		err := client.VerifyWebhookAt(vecSecret, vecHeader(vecSig), body, c.tol, vecTime.Add(c.skew))
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("tolerance %s, clock %s off: %v, want %v", c.tol, c.skew, err, c.want)
		}
	}
	// VerifyWebhook reads the real clock: the 2021 vector is stale now.
	if err := client.VerifyWebhook(vecSecret, vecHeader(vecSig), body, time.Hour); !errors.Is(err, client.ErrWebhookTooOld) {
		t.Errorf("VerifyWebhook of a 2021 message = %v", err)
	}
}
