package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asmp-dev/asmp/protocol"
)

// The headers of a signed webhook request.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every serialized secret: "whsec_" and the key in
// standard base64.
const SecretPrefix = "whsec_"

// Key sizes: Standard Webhooks asks for 24 to 64 random bytes; NewSecret
// makes 32.
const (
	MinKeySize = 24
	MaxKeySize = 64
	KeySize    = 32
)

// Message is the body of a webhook request (see protocol.WebhookMessage).
type Message = protocol.WebhookMessage

// Data is what a Message says about the run (see protocol.WebhookData).
type Data = protocol.WebhookData

// ErrSecret is wrapped by the errors of ParseSecret and Sign about a key.
var ErrSecret = errors.New("webhook secret invalid")

// Secret is one signing key of a subscription. ExpiresAt is when a rotated
// key stops being used (zero: it does not expire). Printing, logging or
// JSON-encoding a Secret (fmt, slog, encoding/json) shows only its prefix,
// never the key, so secrets stay out of logs and API answers; a store
// persists Key and ExpiresAt itself.
type Secret struct {
	Key       []byte
	ExpiresAt time.Time
}

// NewSecret returns a new random key (KeySize bytes from crypto/rand) that
// does not expire. Show s.Encode() to the subscriber once.
func NewSecret() (Secret, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return Secret{}, fmt.Errorf("webhook secret: %w", err)
	}
	return Secret{Key: key}, nil
}

// ParseSecret decodes a "whsec_…" secret (the prefix may be left out) into
// a key that does not expire.
func ParseSecret(s string) (Secret, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
	if err != nil {
		return Secret{}, fmt.Errorf("%w: not %s followed by standard base64", ErrSecret, SecretPrefix)
	}
	if err := checkKey(key); err != nil {
		return Secret{}, err
	}
	return Secret{Key: key}, nil
}

func checkKey(key []byte) error {
	if len(key) < MinKeySize || len(key) > MaxKeySize {
		return fmt.Errorf("%w: a key of %d bytes (it must have %d to %d)", ErrSecret, len(key), MinKeySize, MaxKeySize)
	}
	return nil
}

// Encode returns the secret as the subscriber sees it: "whsec_" and the
// key in standard base64.
func (s Secret) Encode() string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.Key)
}

// String returns "whsec_…", never the key.
func (s Secret) String() string { return SecretPrefix + "…" }

// GoString returns "whsec_…", never the key.
func (s Secret) GoString() string { return s.String() }

// Format prints "whsec_…" whatever the verb, never the key.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }

// MarshalJSON encodes "whsec_…", never the key.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// LogValue logs "whsec_…", never the key.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Live reports whether the secret signs at time t: it has not expired.
func (s Secret) Live(t time.Time) bool { return s.ExpiresAt.IsZero() || t.Before(s.ExpiresAt) }

// MaxLiveSecrets bounds the secrets that sign a subscription's messages
// at once (the current one and those in their grace periods): Rotate with
// a grace period refuses to add one more, so a message never carries a
// signature header that receivers' header limits refuse.
const MaxLiveSecrets = 8

// TooManySecretsError is Rotate's refusal when MaxLiveSecrets are live:
// Live of them, the first grace period ending at FirstExpiry.
type TooManySecretsError struct {
	Live        int
	FirstExpiry time.Time
}

func (e *TooManySecretsError) Error() string {
	return fmt.Sprintf("webhook: %d secrets sign already (at most %d); the first grace period ends at %s", e.Live, MaxLiveSecrets, e.FirstExpiry.UTC().Format(time.RFC3339))
}

// Rotate returns the secrets of a subscription after a rotation at now:
// a new key first, then each key that was live, kept live until now+grace
// (or its own earlier expiry); keys already expired are dropped. Messages
// are signed with all of them until the old ones expire, so receivers can
// switch to the new secret at any time within the grace period. With a
// grace period and MaxLiveSecrets live already, it is a
// *TooManySecretsError.
func Rotate(secrets []Secret, now time.Time, grace time.Duration) ([]Secret, Secret, error) {
	if grace > 0 {
		full := TooManySecretsError{}
		for _, s := range secrets {
			if s.Live(now) {
				full.Live++
				if !s.ExpiresAt.IsZero() && (full.FirstExpiry.IsZero() || s.ExpiresAt.Before(full.FirstExpiry)) {
					full.FirstExpiry = s.ExpiresAt
				}
			}
		}
		if full.Live >= MaxLiveSecrets {
			return nil, Secret{}, &full
		}
	}
	fresh, err := NewSecret()
	if err != nil {
		return nil, Secret{}, err
	}
	out := []Secret{fresh}
	until := now.Add(grace)
	for _, s := range secrets {
		if !s.Live(now) || grace <= 0 {
			continue
		}
		if s.ExpiresAt.IsZero() || s.ExpiresAt.After(until) {
			s.ExpiresAt = until
		}
		out = append(out, s)
	}
	return out, fresh, nil
}

// Signature returns the "v1,BASE64" signature of a message under key:
// the HMAC-SHA256 of id + "." + timestamp + "." + body.
func Signature(key []byte, id, timestamp string, body []byte) string {
	return string(appendSignature(nil, hmac.New(sha256.New, key), id, timestamp, body))
}

// appendSignature appends the "v1,BASE64" signature made with mac (an
// HMAC-SHA256 keyed, in its initial state) to b.
func appendSignature(b []byte, mac hash.Hash, id, timestamp string, body []byte) []byte {
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	var sum [sha256.Size]byte
	return base64.StdEncoding.AppendEncode(append(b, "v1,"...), mac.Sum(sum[:0]))
}

// ErrMessageID is wrapped by Sign's error about an id it cannot sign.
var ErrMessageID = errors.New("webhook message id invalid")

// Sign returns the headers of a webhook request for the message id and
// body, attempted at ts: webhook-id, webhook-timestamp (ts in Unix seconds)
// and webhook-signature, one "v1," signature per secret live at ts,
// space-separated, in the order given. The id must be non-empty and hold
// only printable ASCII other than space and "." (a "." would let the parts
// of the signed content shift); at least one secret must be live, and every
// live key must have MinKeySize to MaxKeySize bytes.
func Sign(secrets []Secret, id string, ts time.Time, body []byte) (http.Header, error) {
	return sign(secrets, nil, id, ts, body)
}

// sign is Sign, with the HMACs of the secrets from macs when not nil
// (macs[i] of secrets[i]; see Keys).
func sign(secrets []Secret, macs []sync.Pool, id string, ts time.Time, body []byte) (http.Header, error) {
	if id == "" || len(id) > 256 || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' || r == '.' }) {
		return nil, fmt.Errorf("%w: %q (it must be 1 to 256 printable ASCII characters, no space or \".\")", ErrMessageID, id)
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	var buf [128]byte
	sigs := buf[:0]
	for i, s := range secrets {
		if !s.Live(ts) {
			continue
		}
		if err := checkKey(s.Key); err != nil {
			return nil, err
		}
		if len(sigs) > 0 {
			sigs = append(sigs, ' ')
		}
		if macs == nil {
			sigs = appendSignature(sigs, hmac.New(sha256.New, s.Key), id, stamp, body)
			continue
		}
		mac := macs[i].Get().(hash.Hash)
		sigs = appendSignature(sigs, mac, id, stamp, body)
		mac.Reset()
		macs[i].Put(mac)
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%w: no secret is live at %s", ErrSecret, ts.UTC().Format(time.RFC3339))
	}
	// The keys as http.Header.Set would make them (canonical), set
	// directly.
	return http.Header{
		"Webhook-Id":        {id},
		"Webhook-Timestamp": {stamp},
		"Webhook-Signature": {string(sigs)},
	}, nil
}

// Keys are a subscription's secrets made ready to sign many messages: the
// HMAC of each key is set up once and reused (a sync.Pool of them per
// key), which Sign does for every message. Safe for concurrent use.
type Keys struct {
	secrets []Secret
	macs    []sync.Pool
}

// NewKeys returns the Keys of secrets (not copied: they must not change
// afterwards).
func NewKeys(secrets []Secret) *Keys {
	k := &Keys{secrets: secrets, macs: make([]sync.Pool, len(secrets))}
	for i, s := range secrets {
		key := s.Key
		k.macs[i].New = func() any { return hmac.New(sha256.New, key) }
	}
	return k
}

// Secrets returns the secrets k signs with.
func (k *Keys) Secrets() []Secret { return k.secrets }

// Sign is Sign with k's secrets: the same headers.
func (k *Keys) Sign(id string, ts time.Time, body []byte) (http.Header, error) {
	return sign(k.secrets, k.macs, id, ts, body)
}
