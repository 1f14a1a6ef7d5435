package embedded

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// fromProtocol converts an engine error into a *client.Error with the
// status the server would have answered, so both backends fail alike.
func fromProtocol(err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return &client.Error{Status: http.StatusInternalServerError, Code: protocol.EInternal, Hint: protocol.ErrorHint(err)}
	}
	body := protocol.Body(pe) // drops the cause of internal errors, like the server
	hint, _ := body["hint"].(string)
	code, _ := body["error"].(string)
	delete(body, "hint")
	delete(body, "error")
	if len(body) == 0 {
		body = nil
	}
	// Round-trip the fields through JSON so they look as over HTTP.
	if body != nil {
		if v, err := roundTrip(body); err == nil {
			body, _ = v.(map[string]any)
		}
	}
	return &client.Error{Status: protocol.StatusOf(code), Code: code, Hint: hint, Fields: body}
}

// roundTrip re-decodes v through JSON, the way a value looks after HTTP.
func roundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeValue(b, 0)
}

// ClientError returns err as client.Backend's implementations return a
// refusal: a *protocol.Error becomes the *client.Error the HTTP client
// would have decoded from the server's answer (same status, code, hint and
// fields). nil stays nil.
func ClientError(err error) error { return fromProtocol(err) }
