package client

import (
	"errors"
	"net/http"

	"github.com/asmp-dev/asmp/protocol"
)

// Sentinel errors for errors.Is. An *Error matches the sentinel of its code.
var (
	ErrInvalid      = errors.New("asmp: invalid request")       // 400
	ErrUnauthorized = errors.New("asmp: unauthorized")          // 401
	ErrForbidden    = errors.New("asmp: forbidden")             // 403
	ErrNotFound     = errors.New("asmp: not found")             // 404
	ErrConflict     = errors.New("asmp: conflict")              // 409
	ErrRateLimited  = errors.New("asmp: rate limited")          // 429
	ErrUnavailable  = errors.New("asmp: server unavailable")    // 503
	ErrServer       = errors.New("asmp: server error")          // other 5xx
	ErrStreamEnded  = errors.New("asmp: stream ended too soon") // a stream that could not be resumed
)

var codeSentinel = map[string]error{
	protocol.EInvalid:      ErrInvalid,
	protocol.EUnauthorized: ErrUnauthorized,
	protocol.EForbidden:    ErrForbidden,
	protocol.ENotFound:     ErrNotFound,
	protocol.EConflict:     ErrConflict,
	protocol.ERateLimited:  ErrRateLimited,
	protocol.EUnavailable:  ErrUnavailable,
}

// Error is an error answered by an ASMP server (or an embedded engine): the
// HTTP status, the error code of the body ("not_found", "forbidden", …), and
// the hint that says what went wrong and what to do instead. Error() is the
// hint, so printing the error shows the user what the server said.
type Error struct {
	// Status is the HTTP status (for an embedded backend: the status the
	// server would have answered).
	Status int
	// Code is the body's "error" code, or the code of the status when the
	// body had none.
	Code string
	// Hint is the body's "hint".
	Hint string
	// Fields holds the body's other properties (e.g. "allowed" actions).
	Fields map[string]any
	// Method and URL name the request that failed ("" for an embedded backend).
	Method, URL string
}

// Error returns the hint.
func (e *Error) Error() string {
	if e.Hint != "" {
		return e.Hint
	}
	return http.StatusText(e.Status)
}

// Is reports whether target is the sentinel of e's code (ErrNotFound for
// "not_found", …; ErrServer for any other 5xx).
func (e *Error) Is(target error) bool {
	if s, ok := codeSentinel[e.Code]; ok && s == target {
		return true
	}
	return target == ErrServer && e.Status >= 500 && e.Status != http.StatusServiceUnavailable
}

// Unwrap returns the equivalent *protocol.Error.
func (e *Error) Unwrap() error {
	return &protocol.Error{Code: e.Code, Hint: e.Hint, Fields: e.Fields}
}

// Allowed returns the actions the server said are offered now, from the
// "allowed" field of a 403 body, or nil.
func (e *Error) Allowed() []string {
	raw, _ := e.Fields["allowed"].([]any)
	out := make([]string, 0, len(raw))
	for _, a := range raw {
		if s, ok := a.(string); ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		if ss, ok := e.Fields["allowed"].([]string); ok {
			return ss
		}
		return nil
	}
	return out
}

// IsNotFound reports whether err is (or wraps) a 404 from the server.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsForbidden reports whether err is (or wraps) a 403: an action or tool
// not offered now, a guard that refused, or a token without the scope.
func IsForbidden(err error) bool { return errors.Is(err, ErrForbidden) }

// IsConflict reports whether err is (or wraps) a 409: If-Match named a
// version the run no longer has.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsInvalid reports whether err is (or wraps) a 400: a malformed request or
// input that does not match what the action expects.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// StatusOf returns the HTTP status of err's *Error, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// HintOf returns the server's hint of err's *Error, or err.Error() for
// other errors ("" for nil).
func HintOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Error()
	}
	return err.Error()
}
