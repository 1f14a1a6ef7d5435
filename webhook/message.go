package webhook

import "encoding/json"

// EncodeMessage returns the body of a webhook request for m: compact JSON,
// the bytes that are signed, stored and sent unchanged on every attempt.
func EncodeMessage(m Message) ([]byte, error) { return json.Marshal(m) }
