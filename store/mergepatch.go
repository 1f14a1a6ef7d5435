package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// This file is RFC 7386 (JSON Merge Patch): how an event stores the change
// of its run's data instead of the whole data (see Event.Patch).

// MergeValue applies the merge patch patch to target, both decoded JSON
// values (maps of string to any, slices, strings, numbers, bools, nil), as
// RFC 7386 section 2 defines: a patch that is not an object replaces the
// target; an object patch sets each of its members on the target (an
// object, or a new empty one when the target is not), removing those whose
// patch value is null, recursively. Neither argument is modified: the
// result shares the parts of target the patch leaves alone.
func MergeValue(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, _ := target.(map[string]any)
	out := make(map[string]any, len(t)+len(p))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = MergeValue(out[k], v)
	}
	return out
}

// Expressible reports whether value, set as one member of a merge patch,
// gives back exactly value when applied: a merge patch cannot express a
// member whose value is an object holding null somewhere (outside arrays),
// since null in a patch means "remove". A null value itself is not
// expressible either.
func Expressible(value any) bool {
	switch v := value.(type) {
	case nil:
		return false
	case map[string]any:
		for _, m := range v {
			if !Expressible(m) {
				return false
			}
		}
	}
	return true
}

// ApplyPatch applies the merge patch patch to the JSON document doc and
// returns the result's JSON. Numbers keep their text exactly; the result's
// object members are in key order.
func ApplyPatch(doc, patch []byte) ([]byte, error) {
	t, err := decodeExact(doc)
	if err != nil {
		return nil, fmt.Errorf("merge patch: document: %w", err)
	}
	p, err := decodeExact(patch)
	if err != nil {
		return nil, fmt.Errorf("merge patch: patch: %w", err)
	}
	b, err := json.Marshal(MergeValue(t, p))
	if err != nil {
		return nil, fmt.Errorf("merge patch: %w", err)
	}
	return b, nil
}

// decodeExact decodes one JSON value, numbers as json.Number so that they
// are encoded again with the same text.
func decodeExact(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}
