package protocol

import (
	"strconv"
	"unicode/utf8"
)

// fastDecode decodes b when it is one plain JSON value: strings without
// escapes or control characters, numbers, literals, objects and arrays,
// surrounded by whitespace only. It gives exactly what the general decoder
// (encoding/json with UseNumber, then normalizeNumbers) gives for such
// input, without its allocations. ok is false for anything else (escapes,
// invalid input, numbers out of range, …): the caller then uses the general
// decoder, which also produces the errors. Callers check the nesting depth
// first.
func fastDecode(b []byte) (v any, ok bool) {
	p := fastParser{b: b}
	p.ws()
	if v, ok = p.value(); !ok {
		return nil, false
	}
	p.ws()
	return v, p.i == len(p.b)
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) value() (any, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, false
}

func (p *fastParser) literal(word string) bool {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

// str reads a string with no escapes and no control characters; its UTF-8
// must be valid (the general decoder replaces invalid bytes).
func (p *fastParser) str() (string, bool) {
	j := p.i + 1
	ascii := true
	for ; j < len(p.b); j++ {
		c := p.b[j]
		if c == '"' {
			break
		}
		if c == '\\' || c < 0x20 {
			return "", false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if j >= len(p.b) {
		return "", false
	}
	s := string(p.b[p.i+1 : j])
	if !ascii && !utf8.ValidString(s) {
		return "", false
	}
	p.i = j + 1
	return s, true
}

// number reads a number with JSON's exact grammar,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and converts it as
// normalizeNumbers does: int64 when it parses as one, else float64.
func (p *fastParser) number() (any, bool) {
	b, start, i := p.b, p.i, p.i
	digits := func() bool {
		n := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		digits()
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	lit := string(b[start:i])
	p.i = i
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

func (p *fastParser) object() (any, bool) {
	p.i++ // {
	m := map[string]any{}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		k, ok := p.str()
		if !ok {
			return nil, false
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.ws()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		m[k] = v
		p.ws()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.ws()
		case '}':
			p.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (p *fastParser) array() (any, bool) {
	p.i++ // [
	a := []any{}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, true
	}
	for {
		p.ws()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		a = append(a, v)
		p.ws()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, true
		default:
			return nil, false
		}
	}
}
