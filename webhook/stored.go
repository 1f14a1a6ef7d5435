package webhook

import (
	"encoding/json"
	"fmt"
	"time"
)

// storedSecret is how a store keeps a Secret: the key in the "whsec_" form
// and its expiry.
type storedSecret struct {
	Key       string    `json:"key"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// EncodeSecrets returns the stored form of a subscription's secrets (the
// keys themselves, for the store's eyes only: a Secret's own JSON form
// hides its key). DecodeSecrets reads it back.
func EncodeSecrets(secrets []Secret) ([]byte, error) {
	out := make([]storedSecret, 0, len(secrets))
	for _, s := range secrets {
		if err := checkKey(s.Key); err != nil {
			return nil, err
		}
		out = append(out, storedSecret{Key: s.Encode(), ExpiresAt: s.ExpiresAt.UTC()})
	}
	return json.Marshal(out)
}

// DecodeSecrets parses what EncodeSecrets wrote. Every key must parse
// (ParseSecret); an empty list is an error, since a subscription without
// a secret could sign nothing.
func DecodeSecrets(b []byte) ([]Secret, error) {
	var in []storedSecret
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%w: stored secrets: %v", ErrSecret, err)
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: no stored secret", ErrSecret)
	}
	out := make([]Secret, 0, len(in))
	for i, s := range in {
		sec, err := ParseSecret(s.Key)
		if err != nil {
			return nil, fmt.Errorf("stored secret %d: %w", i, err)
		}
		sec.ExpiresAt = s.ExpiresAt
		out = append(out, sec)
	}
	return out, nil
}
