package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/protocol"
)

// WebhookMessage is the body of a webhook request (see
// protocol.WebhookMessage). Decode the body into it only after
// VerifyWebhook accepted the raw bytes.
type WebhookMessage = protocol.WebhookMessage

// DefaultWebhookTolerance is how far a webhook's timestamp may lie from the
// receiver's clock, either way, when VerifyWebhook is given no tolerance:
// the five minutes the Standard Webhooks libraries use.
const DefaultWebhookTolerance = 5 * time.Minute

// The headers of a signed webhook request (Standard Webhooks).
const (
	WebhookIDHeader        = "webhook-id"
	WebhookTimestampHeader = "webhook-timestamp"
	WebhookSignatureHeader = "webhook-signature"
)

// Errors of VerifyWebhook, for errors.Is. The error returned wraps one of
// them and says more (which header, how far off the clock is).
var (
	// ErrWebhookSecret: the secret is not "whsec_" followed by standard
	// base64 (the prefix may be left out), or it decodes to nothing.
	ErrWebhookSecret = errors.New("asmp: webhook secret is not whsec_ followed by base64")
	// ErrWebhookMalformed: a webhook-id, webhook-timestamp or
	// webhook-signature header is missing, or the timestamp is not a
	// decimal number of Unix seconds.
	ErrWebhookMalformed = errors.New("asmp: webhook headers missing or malformed")
	// ErrWebhookTooOld: the timestamp lies further in the past than the
	// tolerance allows (a replayed or long-delayed request).
	ErrWebhookTooOld = errors.New("asmp: webhook timestamp too old")
	// ErrWebhookTooNew: the timestamp lies further in the future than the
	// tolerance allows.
	ErrWebhookTooNew = errors.New("asmp: webhook timestamp too far in the future")
	// ErrWebhookSignature: no "v1," signature in webhook-signature matches
	// the body signed with the secret (wrong secret, or a changed body,
	// id or timestamp).
	ErrWebhookSignature = errors.New("asmp: no webhook signature matches")
)

// VerifyWebhook checks that a webhook request was signed with secret, the
// Standard Webhooks way: webhook-signature holds one or more
// space-separated "v1,BASE64" signatures (two while the sender rotates its
// secret), and one of them must be the HMAC-SHA256, keyed with the
// secret's bytes, of webhook-id + "." + webhook-timestamp + "." + body,
// compared in constant time. The timestamp (Unix seconds) must lie within
// tolerance of the clock, either way (DefaultWebhookTolerance if tolerance
// is 0 or less), which keeps a captured request from being replayed later;
// deduplicate on webhook-id to refuse a replay within the window.
//
// body must be the raw bytes of the request, read before any decoding:
// JSON decoded and encoded again is not what was signed. secret is the
// "whsec_…" string the server gave when the subscription was created.
//
// The error wraps ErrWebhookSecret, ErrWebhookMalformed, ErrWebhookTooOld,
// ErrWebhookTooNew or ErrWebhookSignature.
func VerifyWebhook(secret string, header http.Header, body []byte, tolerance time.Duration) error {
	return VerifyWebhookAt(secret, header, body, tolerance, time.Now())
}

// VerifyWebhookAt is VerifyWebhook with the clock's reading given: it
// checks the timestamp against now (to verify a stored request later, or
// in tests).
func VerifyWebhookAt(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	key, err := decodeWebhookSecret(secret)
	if err != nil {
		return err
	}
	id := header.Get(WebhookIDHeader)
	ts := header.Get(WebhookTimestampHeader)
	sigs := header.Values(WebhookSignatureHeader)
	switch {
	case id == "":
		return fmt.Errorf("%w: no %s header", ErrWebhookMalformed, WebhookIDHeader)
	case ts == "":
		return fmt.Errorf("%w: no %s header", ErrWebhookMalformed, WebhookTimestampHeader)
	case len(sigs) == 0 || strings.TrimSpace(strings.Join(sigs, "")) == "":
		return fmt.Errorf("%w: no %s header", ErrWebhookMalformed, WebhookSignatureHeader)
	}
	sent, err := parseWebhookTimestamp(ts)
	if err != nil {
		return err
	}
	if tolerance <= 0 {
		tolerance = DefaultWebhookTolerance
	}
	// Compare in whole seconds, as the header counts them.
	tol := int64(tolerance / time.Second)
	switch d := now.Unix() - sent; {
	case d > tol:
		return fmt.Errorf("%w: stamped %ds before this clock's reading, more than the %s allowed", ErrWebhookTooOld, d, tolerance)
	case -d > tol:
		return fmt.Errorf("%w: stamped %ds after this clock's reading, more than the %s allowed", ErrWebhookTooNew, -d, tolerance)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	enc := base64.StdEncoding.Strict()
	got := make([]byte, enc.DecodedLen(enc.EncodedLen(len(want))))
	for _, line := range sigs {
		for _, s := range strings.Fields(line) {
			b64, ok := strings.CutPrefix(s, "v1,")
			if !ok || len(b64) != enc.EncodedLen(len(want)) {
				continue // another scheme (v1a, …), or not an HMAC-SHA256
			}
			n, err := enc.Decode(got, []byte(b64))
			if err == nil && hmac.Equal(got[:n], want) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w (checked against the body of %d bytes and webhook-id %q)", ErrWebhookSignature, len(body), id)
}

// decodeWebhookSecret returns the key bytes of a "whsec_" secret.
func decodeWebhookSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, ErrWebhookSecret
	}
	return key, nil
}

// parseWebhookTimestamp parses a webhook-timestamp value: decimal digits
// only (no sign, no spaces), at most 18 of them.
func parseWebhookTimestamp(ts string) (int64, error) {
	if len(ts) > 18 || strings.TrimLeft(ts, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %s %q is not a number of Unix seconds", ErrWebhookMalformed, WebhookTimestampHeader, ts)
	}
	return strconv.ParseInt(ts, 10, 64)
}
