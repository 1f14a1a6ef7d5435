package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The examples of RFC 7386 appendix A.
var rfc7386 = []struct{ doc, patch, want string }{
	{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
	{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
	{`{"a":"b"}`, `{"a":null}`, `{}`},
	{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
	{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
	{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
	{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
	{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
	{`["a","b"]`, `["c","d"]`, `["c","d"]`},
	{`{"a":"b"}`, `["c"]`, `["c"]`},
	{`{"a":"foo"}`, `null`, `null`},
	{`{"a":"foo"}`, `"bar"`, `"bar"`},
	{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
	{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
	{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
}

func TestApplyPatchRFC7386(t *testing.T) {
	for _, c := range rfc7386 {
		got, err := ApplyPatch([]byte(c.doc), []byte(c.patch))
		if err != nil {
			t.Fatalf("ApplyPatch(%s, %s): %v", c.doc, c.patch, err)
		}
		if string(got) != c.want {
			t.Errorf("ApplyPatch(%s, %s) = %s, want %s", c.doc, c.patch, got, c.want)
		}
	}
}

func TestApplyPatchKeepsNumbers(t *testing.T) {
	got, err := ApplyPatch([]byte(`{"big":12345678901234567890,"f":1.50}`), []byte(`{"n":1e400}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"big":12345678901234567890,"f":1.50,"n":1e400}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestApplyPatchRefusesBadJSON(t *testing.T) {
	for _, c := range [][2]string{{`{`, `{}`}, {`{}`, `{"a":}`}, {`{} {}`, `{}`}} {
		if _, err := ApplyPatch([]byte(c[0]), []byte(c[1])); err == nil {
			t.Errorf("ApplyPatch(%s, %s) succeeded", c[0], c[1])
		}
	}
}

// FuzzMergePatch checks the properties the event layout relies on: the
// immutable and the in-place merges agree, neither argument of MergeValue
// changes, and a merge patch applied twice gives what it gave once.
func FuzzMergePatch(f *testing.F) {
	for _, c := range rfc7386 {
		f.Add([]byte(c.doc), []byte(c.patch))
	}
	f.Fuzz(func(t *testing.T, doc, patch []byte) {
		d, err1 := decodeExact(doc)
		p, err2 := decodeExact(patch)
		if err1 != nil || err2 != nil {
			return
		}
		dCopy, _ := decodeExact(doc)
		pCopy, _ := decodeExact(patch)
		once := MergeValue(d, p)
		if !reflect.DeepEqual(d, dCopy) || !reflect.DeepEqual(p, pCopy) {
			t.Fatalf("MergeValue changed its arguments")
		}
		if inPlace := mergeInPlace(dCopy, pCopy); !reflect.DeepEqual(normal(once), normal(inPlace)) {
			t.Fatalf("in place %v, copying %v", inPlace, once)
		}
		if twice := MergeValue(once, p); !reflect.DeepEqual(normal(once), normal(twice)) {
			t.Fatalf("not idempotent: once %v, twice %v", once, twice)
		}
		if _, err := ApplyPatch(doc, patch); err != nil {
			t.Fatalf("ApplyPatch: %v", err)
		}
	})
}

// normal makes empty and nil maps compare equal through a JSON round trip.
func normal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestExpressible(t *testing.T) {
	for v, want := range map[string]bool{`1`: true, `null`: false, `{"a":null}`: false, `{"a":{"b":[null]}}`: true, `[null]`: true, `{"a":{"b":null}}`: false} {
		d, _ := decodeExact([]byte(v))
		if got := Expressible(d); got != want {
			t.Errorf("Expressible(%s) = %v, want %v", v, got, want)
		}
	}
}
