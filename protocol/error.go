package protocol

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes. Each maps to exactly one HTTP status at the server edge
// (see StatusOf) and back again in the client (see CodeOf).
const (
	EInvalid       = "invalid"         // 400: the request is malformed or fails validation
	EUnauthorized  = "unauthorized"    // 401: no or unknown credentials
	EForbidden     = "forbidden"       // 403: not allowed now (action not offered, guard, scope)
	ENotFound      = "not_found"       // 404: no such run, workflow, record or row
	EConflict      = "conflict"        // 409: precondition (If-Match) failed
	ETooLarge      = "too_large"       // 413: request body over the limit
	ERateLimited   = "rate_limited"    // 429: too many requests
	EInternal      = "internal"        // 500: a server fault; details are logged, never sent
	ENotSupported  = "not_implemented" // 501: the server cannot do this
	EUnavailable   = "unavailable"     // 503: shutting down or dependency down
	EUnprocessable = "unprocessable"   // 422: reserved for well-formed but unusable input
)

// EMethodNotAllowed is the code of a 405: the path is served, not with
// the request's method (the answer's Allow header names those it is).
const EMethodNotAllowed = "method_not_allowed"

// Codes of the edge's hardening answers (SPEC section 16).
const (
	EUnsupportedMediaType = "unsupported_media_type" // 415: a body that is not application/json
	EMisdirected          = "misdirected"            // 421: a Host this server does not answer to
	EHeaderTooLarge       = "header_too_large"       // 431: request headers over the limit
	EInsufficientStorage  = "insufficient_storage"   // 507: the disk is full
)

var codeStatus = map[string]int{
	EInvalid:       http.StatusBadRequest,
	EUnauthorized:  http.StatusUnauthorized,
	EForbidden:     http.StatusForbidden,
	ENotFound:      http.StatusNotFound,
	EConflict:      http.StatusConflict,
	ETooLarge:      http.StatusRequestEntityTooLarge,
	ERateLimited:   http.StatusTooManyRequests,
	EInternal:      http.StatusInternalServerError,
	ENotSupported:  http.StatusNotImplemented,
	EUnavailable:   http.StatusServiceUnavailable,
	EUnprocessable: http.StatusUnprocessableEntity,

	EMethodNotAllowed: http.StatusMethodNotAllowed,

	EUnsupportedMediaType: http.StatusUnsupportedMediaType,
	EMisdirected:          http.StatusMisdirectedRequest,
	EHeaderTooLarge:       http.StatusRequestHeaderFieldsTooLarge,
	EInsufficientStorage:  http.StatusInsufficientStorage,
}

// StatusOf returns the HTTP status for an error code (500 for unknown codes).
func StatusOf(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// CodeOf returns the error code for an HTTP status, the inverse of StatusOf.
func CodeOf(status int) string {
	for c, s := range codeStatus {
		if s == status {
			return c
		}
	}
	if status >= 500 {
		return EInternal
	}
	return EInvalid
}

// Error is the one error type of asmp. Hint is written for the caller: what
// went wrong and what to do instead. Fields are extra properties for the
// error body (for example "allowed" actions); they must never hold secrets.
type Error struct {
	Code   string
	Hint   string
	Fields map[string]any
	Err    error // underlying cause; logged for internal errors, never sent
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil && e.Code == EInternal {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Hint, e.Err)
	}
	return e.Hint
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the code and a formatted hint.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Hint: fmt.Sprintf(format, args...)}
}

// With returns a copy of e with one more body field.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Fields = make(map[string]any, len(e.Fields)+1)
	for k, v := range e.Fields {
		c.Fields[k] = v
	}
	c.Fields[key] = value
	return &c
}

// ErrorCode returns the code of err's *Error, or EInternal for any other error.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorHint returns the hint of err's *Error, or a generic text for others.
func ErrorHint(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Hint
	}
	return "Internal server error; the server log has the details."
}

// Body returns the JSON error body for err: {"hint": ..., "error": code, ...}.
// Internal errors never carry their cause.
func Body(err error) map[string]any {
	var e *Error
	body := map[string]any{}
	if errors.As(err, &e) {
		for k, v := range e.Fields {
			body[k] = v
		}
		body["error"] = e.Code
		body["hint"] = e.Hint
		if e.Code == EInternal {
			body = map[string]any{"error": EInternal, "hint": ErrorHint(nil)}
		}
		return body
	}
	body["error"] = EInternal
	body["hint"] = ErrorHint(err)
	return body
}
