package protocol

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// AppendJSON appends the JSON encoding of the frame to b: exactly the bytes
// json.Marshal(f) gives (field order, omitempty, sorted map keys, HTML-safe
// string escaping), without reflection. The server writes every frame this
// way; json.Marshal remains the reference, and the tests compare the two.
func (f Frame) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	return f.appendFields(b)
}

// appendFields appends the frame's properties and the closing brace.
func (f *Frame) appendFields(b []byte) ([]byte, error) {
	var err error
	b = appendKV(b, `"run_id":`, f.RunID)
	b = appendKV(b, `,"workflow_id":`, f.WorkflowID)
	b = appendOptKV(b, `,"resource_url":`, f.ResourceURL)
	b = appendKV(b, `,"state":`, f.State)
	b = appendKV(b, `,"status":`, f.Status)
	b = appendKV(b, `,"hint":`, f.Hint)
	if s := f.ActiveSkill; s != nil {
		b = appendKV(b, `,"active_skill":{"name":`, s.Name)
		b = appendKV(b, `,"url":`, s.URL)
		b = appendOptKV(b, `,"context_summary":`, s.ContextSummary)
		b = appendOptKV(b, `,"version":`, s.Version)
		b = append(b, '}')
	}
	b = append(b, `,"next_states":`...)
	if f.NextStates == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range f.NextStates {
			n := &f.NextStates[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = appendKV(b, `{"action":`, n.Action)
			b = appendKV(b, `,"method":`, n.Method)
			b = appendKV(b, `,"href":`, n.Href)
			if len(n.Expects) > 0 {
				b = append(b, `,"expects":`...)
				b = appendStringMap(b, n.Expects)
			}
			if n.IsCritical {
				b = append(b, `,"is_critical":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(f.Data) > 0 {
		b = append(b, `,"data":`...)
		if b, err = appendObject(b, f.Data); err != nil {
			return nil, err
		}
	}
	if len(f.Milestones) > 0 {
		b = append(b, `,"milestones":[`...)
		for i, m := range f.Milestones {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, m)
		}
		b = append(b, ']')
	}
	b = appendOptKV(b, `,"stream_url":`, f.StreamURL)
	if len(f.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range f.Tools {
			t := &f.Tools[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = appendKV(b, `{"name":`, t.Name)
			b = appendKV(b, `,"href":`, t.Href)
			b = appendOptKV(b, `,"description":`, t.Description)
			if len(t.Expects) > 0 {
				b = append(b, `,"expects":`...)
				b = appendStringMap(b, t.Expects)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(f.Resources) > 0 {
		b = append(b, `,"resources":[`...)
		for i := range f.Resources {
			r := &f.Resources[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = appendKV(b, `{"uri":`, r.URI)
			b = appendOptKV(b, `,"name":`, r.Name)
			b = appendOptKV(b, `,"mime_type":`, r.MimeType)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(f.Links) > 0 {
		b = append(b, `,"_links":{`...)
		var buf [8]string
		for i, k := range sortedKeys(f.Links, buf[:]) {
			if i > 0 {
				b = append(b, ',')
			}
			l := f.Links[k]
			b = appendString(b, k)
			b = append(b, ":{"...)
			sep := false
			if l.Href != "" {
				b = appendKV(b, `"href":`, l.Href)
				sep = true
			}
			if l.Method != "" {
				if sep {
					b = append(b, ',')
				}
				b = appendKV(b, `"method":`, l.Method)
				sep = true
			}
			if l.Version != "" {
				if sep {
					b = append(b, ',')
				}
				b = appendKV(b, `"version":`, l.Version)
				sep = true
			}
			if l.DueAt != "" {
				if sep {
					b = append(b, ',')
				}
				b = appendKV(b, `"due_at":`, l.DueAt)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// AppendJSON appends the stream line's JSON encoding to b: the frame's
// properties with "id" first, exactly as MarshalJSON gives them.
func (s StreamFrame) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, s.ID, 10)
	b = append(b, ',')
	return s.Frame.appendFields(b)
}

// AppendJSON appends the CLI object's JSON encoding to b: exactly the bytes
// json.Marshal(c) gives.
func (c CLI) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	n := len(b)
	field := func(name, v string) {
		if v == "" {
			return
		}
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = appendKV(b, `":`, v)
	}
	field("prompt", c.Prompt)
	field("hint", c.Hint)
	if len(c.Options) > 0 {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, `"options":[`...)
		for i := range c.Options {
			o := &c.Options[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = appendKV(b, `{"action":`, o.Action)
			b = appendKV(b, `,"label":`, o.Label)
			b = appendOptKV(b, `,"keys":`, o.Keys)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	field("input_hint", c.InputHint)
	field("run_id", c.RunID)
	return append(b, '}'), nil
}

// sortedKeys returns m's keys in order, in buf when they fit.
func sortedKeys[V any](m map[string]V, buf []string) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}

func appendStringMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	var buf [8]string
	for i, k := range sortedKeys(m, buf[:]) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m[k])
	}
	return append(b, '}')
}

func appendObject(b []byte, m map[string]any) ([]byte, error) {
	b = append(b, '{')
	var err error
	var buf [8]string
	for i, k := range sortedKeys(m, buf[:]) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		if b, err = appendValue(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendValue appends a decoded JSON value; types other than the common
// ones go through json.Marshal, which is then exactly what is appended.
func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			break // json.Marshal's error
		}
		// encoding/json's float format: %f, or %e outside [1e-6, 1e21),
		// with e-07 shortened to e-7.
		format := byte('f')
		if a := math.Abs(x); a != 0 && (a < 1e-6 || a >= 1e21) {
			format = 'e'
		}
		b = strconv.AppendFloat(b, x, format, -1, 64)
		if format == 'e' {
			if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
				b[n-2] = b[n-1]
				b = b[:n-1]
			}
		}
		return b, nil
	case map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendObject(b, x)
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		var err error
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

const hexDigits = "0123456789abcdef"

// plainASCII[c] reports whether ASCII byte c goes into a JSON string as
// is: not a control character, quote, backslash, or <, > and & (which
// encoding/json escapes by default).
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string exactly as encoding/json does
// with HTML escaping on (its default): <, > and & as \u003c, \u003e,
// \u0026; control characters as \b, \f, \n, \r, \t or \u00XX; invalid
// UTF-8 as \ufffd; U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendKV appends key, a ready-made `,"name":` prefix, and v as a JSON
// string.
func appendKV(b []byte, key, v string) []byte {
	return appendString(append(b, key...), v)
}

// appendOptKV is appendKV when v is not empty (omitempty), else b.
func appendOptKV(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendKV(b, key, v)
}
