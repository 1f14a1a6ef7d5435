package webhook_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/webhook"
)

func TestStoredSecretsRoundTrip(t *testing.T) {
	a, _ := webhook.NewSecret()
	b, _ := webhook.NewSecret()
	b.ExpiresAt = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	enc, err := webhook.EncodeSecrets([]webhook.Secret{a, b})
	if err != nil {
		t.Fatal(err)
	}
	got, err := webhook.DecodeSecrets(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Equal(got[0].Key, a.Key) || !got[0].ExpiresAt.IsZero() || !bytes.Equal(got[1].Key, b.Key) || !got[1].ExpiresAt.Equal(b.ExpiresAt) {
		t.Fatalf("round trip: %#v", got)
	}
}

func TestDecodeSecretsRefusesWhatCannotSign(t *testing.T) {
	for _, in := range []string{``, `null`, `[]`, `{}`, `[{"key":"whsec_c2hvcnQ="}]`, `[{"key":"not base64!"}]`, `[{"key":"whsec_` + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" + `"}]`} {
		if _, err := webhook.DecodeSecrets([]byte(in)); !errors.Is(err, webhook.ErrSecret) {
			t.Errorf("DecodeSecrets(%s) = %v, want ErrSecret", in, err)
		}
	}
	if _, err := webhook.EncodeSecrets([]webhook.Secret{{Key: []byte("short")}}); !errors.Is(err, webhook.ErrSecret) {
		t.Errorf("EncodeSecrets of a short key: %v", err)
	}
}

func FuzzDecodeSecrets(f *testing.F) {
	s, _ := webhook.NewSecret()
	enc, _ := webhook.EncodeSecrets([]webhook.Secret{s})
	f.Add(enc)
	f.Add([]byte(`[{"key":"whsec_","expires_at":"2026-01-01T00:00:00Z"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ss, err := webhook.DecodeSecrets(b)
		if err != nil {
			return
		}
		again, err := webhook.EncodeSecrets(ss)
		if err != nil {
			t.Fatalf("decoded secrets do not encode: %v", err)
		}
		if _, err := webhook.DecodeSecrets(again); err != nil {
			t.Fatalf("re-encoded secrets do not decode: %v", err)
		}
	})
}
