// Package httpx is asmp's HTTP edge and the helpers every handler shares.
//
// Edge routes requests to the handlers of the APIs mounted on it (the ASMP
// API of package server, the OIP ledger's oip.Service.API): for each route
// it runs its checks and RequireScope, the one scope check, then the
// handler, and answers a returned error with ErrorStyle.Write, the one
// place an HTTP error is rendered; other methods on a served path get a
// 405 with an Allow header. An API contributes handlers only (Route: a
// method, a path, the scope it needs, a HandlerFunc). Package server puts
// authentication, rate limits and the access log in front of its Edge.
//
// Beside it: one way to write JSON and one to read a bounded request body.
package httpx

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/asmp-dev/asmp/protocol"
)

// WantsHTML reports whether the request's Accept header names text/html
// first, as browsers send it when they open a page. API clients (no
// Accept, */*, or JSON first) get JSON.
func WantsHTML(r *http.Request) bool {
	first, _, _ := strings.Cut(r.Header.Get("Accept"), ",")
	mt, _, err := mime.ParseMediaType(strings.TrimSpace(first))
	return err == nil && mt == "text/html"
}

// DefaultMaxBody is the request body limit when none is configured (1 MiB).
const DefaultMaxBody = 1 << 20

// JSONAppender is implemented by values that encode themselves as JSON
// without reflection (State Frames, stream lines, CLI objects): AppendJSON
// appends exactly the bytes json.Marshal would give.
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// contentTypeJSON is shared by every response: a header value slice of
// length and capacity 1, which Header.Set replaces and Header.Add copies,
// so no one writes into it.
var contentTypeJSON = []string{"application/json"}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// AppendJSON appends v's JSON encoding to b: through v's own AppendJSON
// when it has one, else json.Marshal.
func AppendJSON(b []byte, v any) ([]byte, error) {
	if a, ok := v.(JSONAppender); ok {
		return a.AppendJSON(b)
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// WriteJSON writes v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	if a, ok := v.(JSONAppender); ok {
		bp := bufPool.Get().(*[]byte)
		b, err := a.AppendJSON((*bp)[:0])
		if err != nil {
			bufPool.Put(bp)
			WriteError(w, nil, &protocol.Error{Code: protocol.EInternal, Hint: "encoding failed", Err: err})
			return
		}
		w.Header()["Content-Type"] = contentTypeJSON
		w.WriteHeader(status)
		b = append(b, '\n')
		_, _ = w.Write(b) // the writer copies b (io.Writer must not retain it)
		if cap(b) <= 64<<10 {
			*bp = b
			bufPool.Put(bp)
		}
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, nil, &protocol.Error{Code: protocol.EInternal, Hint: "encoding failed", Err: err})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b = append(b, '\n')
	_, _ = w.Write(b)
}

// WriteEncoded writes body, JSON already encoded (with its final newline),
// with status.
func WriteEncoded(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = contentTypeJSON
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ErrorStyle is how an API words its error bodies beyond what every one
// carries ({"error": code, "hint": ..., and the error's fields}).
type ErrorStyle struct {
	// Status, when not "", is the "status" member of every error body but
	// internal ones (the OIP wire format: "error").
	Status string
}

// WriteError writes err with the default ErrorStyle (the ASMP API's).
func WriteError(w http.ResponseWriter, log *slog.Logger, err error) {
	ErrorStyle{}.Write(w, log, err)
}

// Write is the one place an HTTP error answer is rendered: err's body
// ({"hint": …, "error": code, …}, see protocol.Body) with the status of
// its code, Cache-Control: no-store, and Retry-After for a rate limit.
// Server faults (5xx) are logged with their cause when log is not nil;
// their body never carries it.
func (st ErrorStyle) Write(w http.ResponseWriter, log *slog.Logger, err error) {
	code := protocol.ErrorCode(err)
	status := protocol.StatusOf(code)
	if status >= 500 && code != protocol.EInsufficientStorage && DiskFull(err) {
		err = diskFull(err)
		code, status = protocol.EInsufficientStorage, http.StatusInsufficientStorage
	}
	if status >= 500 && log != nil {
		log.Error("request failed", "err", err)
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.ERateLimited {
		if ra, ok := pe.Fields["retry_after"]; ok {
			if s, ok := ra.(int); ok {
				w.Header().Set("Retry-After", itoa(s))
			}
		}
	}
	body := protocol.Body(err)
	if st.Status != "" && code != protocol.EInternal {
		body["status"] = st.Status
	}
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, status, body)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// ReadBody reads the whole request body, up to limit bytes (0 = DefaultMaxBody).
// A longer body gives an ETooLarge error (413).
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	if r.ContentLength >= 0 {
		// The length is known (and net/http reads no further): read exactly
		// that, into one buffer of the right size.
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, protocol.Errorf(protocol.EInvalid, "Could not read the request body: %v.", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, protocol.Errorf(protocol.EInvalid, "Could not read the request body: %v.", err)
	}
	return b, nil
}

func tooLarge(limit int64) error {
	return protocol.Errorf(protocol.ETooLarge, "The request body is larger than the limit of %d bytes; send less.", limit).
		With("limit_bytes", limit)
}

// ReadObject reads the body and decodes it as one JSON object (see
// protocol.DecodeObject); an empty body is an empty object.
func ReadObject(w http.ResponseWriter, r *http.Request, limit int64, maxDepth int) (map[string]any, error) {
	b, err := ReadBody(w, r, limit)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeObject(b, maxDepth)
}

// HandlerFunc is an HTTP handler that returns an error instead of writing
// it: the Edge writes it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error
