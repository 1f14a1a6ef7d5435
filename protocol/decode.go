package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// DefaultMaxDepth is the JSON nesting limit applied when a caller passes 0.
const DefaultMaxDepth = 64

// DecodeObject decodes a request body that must be one JSON object. An empty
// or all-whitespace body decodes to an empty object. Numbers become int64 when
// they are integers that fit, float64 otherwise, so values keep their exact
// type through storage. Nesting deeper than maxDepth (0 = DefaultMaxDepth),
// syntax errors, trailing data, non-object values, invalid UTF-8 and lone
// surrogate escapes (CheckSurrogates: never replaced silently) give an
// EInvalid *Error.
func DecodeObject(body []byte, maxDepth int) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return map[string]any{}, nil
	}
	v, err := DecodeValue(body, maxDepth)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, Errorf(EInvalid, "The body must be a JSON object, not %s.", jsonKind(v))
	}
	return m, nil
}

// DecodeValue decodes exactly one JSON value with the rules of DecodeObject.
func DecodeValue(body []byte, maxDepth int) (any, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if !utf8.Valid(body) {
		return nil, Errorf(EInvalid, "The body is not valid UTF-8; send UTF-8 JSON (invalid bytes are never replaced silently).")
	}
	if d := depth(body); d > maxDepth {
		return nil, Errorf(EInvalid, "JSON nesting is %d levels deep; the limit is %d.", d, maxDepth)
	}
	if v, ok := fastDecode(body); ok {
		return v, nil
	}
	return decodeGeneral(body)
}

// decodeGeneral is DecodeValue's general path: encoding/json with
// UseNumber, then normalizeNumbers. It decodes anything and words the errors.
func decodeGeneral(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, Errorf(EInvalid, "The body is not valid JSON: %s.", describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Errorf(EInvalid, "The body has data after its JSON value; send exactly one JSON object.")
	}
	if err := CheckSurrogates(body); err != nil {
		return nil, err
	}
	out, err := normalizeNumbers(v)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NormalizeNumbers converts json.Number values inside v (as produced by a
// decoder with UseNumber) to int64 or float64, in place where possible.
func NormalizeNumbers(v any) (any, error) { return normalizeNumbers(v) }

func normalizeNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, Errorf(EInvalid, "The number %s is out of range.", Truncate(string(x), 40))
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			n, err := normalizeNumbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := normalizeNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}

// depth returns the maximum nesting of arrays and objects in b, skipping
// strings. It does not validate; the decoder does that afterwards.
func depth(b []byte) int {
	d, max := 0, 0
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			d++
			if d > max {
				max = d
			}
		case '}', ']':
			d--
		}
	}
	return max
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

func describeJSONError(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "unexpected end of input"
	}
	return err.Error()
}

// Truncate shortens s to at most n bytes (cut at a character boundary)
// plus "…", for quoting user input in hints.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
