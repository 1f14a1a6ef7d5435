package protocol_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/protocol"
)

func TestDecodeObject(t *testing.T) {
	m, err := protocol.DecodeObject([]byte(`{"i": 3, "big": 9007199254740993, "f": 1.5, "e": 1e3, "s": "x", "a": [1, 2.5], "o": {"n": -0}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if m["i"] != int64(3) || m["big"] != int64(9007199254740993) || m["f"] != 1.5 || m["e"] != 1000.0 || m["s"] != "x" {
		t.Fatalf("decoded = %#v", m)
	}
	if a := m["a"].([]any); a[0] != int64(1) || a[1] != 2.5 {
		t.Fatalf("array = %#v", a)
	}
	if m, err := protocol.DecodeObject([]byte("  \n"), 0); err != nil || len(m) != 0 {
		t.Fatalf("empty body = %v, %v", m, err)
	}
	for body, want := range map[string]string{
		`[1]`:          "must be a JSON object, not an array",
		`null`:         "not null",
		`{"a":1`:       "not valid JSON",
		`{"a":1}x`:     "after its JSON value",
		`{"n": 1e999}`: "out of range",
		strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat(`}`, 65): "nesting is 65 levels deep",
		`{"a":"\u0000 {{{{"}`: "", // braces inside strings do not count as depth
	} {
		_, err := protocol.DecodeObject([]byte(body), 0)
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || protocol.ErrorCode(err) != protocol.EInvalid {
			t.Errorf("%.40q: err = %v, want %q", body, err, want)
		}
	}
}

func TestCheckExpects(t *testing.T) {
	ex := map[string]string{"s": "string", "n": "number", "i": "integer", "b": "boolean", "a": "array", "o": "object"}
	ok := map[string]any{"s": "", "n": int64(2), "i": 2.0, "b": false, "a": []any{}, "o": map[string]any{}}
	if err := protocol.CheckExpects(ex, ok); err != nil {
		t.Fatal(err)
	}
	bad := map[string]any{"s": "", "n": int64(2), "i": 2.5, "b": false, "a": []any{}, "o": map[string]any{}}
	err := protocol.CheckExpects(ex, bad)
	if err == nil || !strings.Contains(err.Error(), `"i" must be an integer, got number`) {
		t.Fatalf("err = %v", err)
	}
	if protocol.TypeOf(math.Inf(1)) != "number" || protocol.TypeOf(json.Number("12")) != "integer" {
		t.Fatal("TypeOf")
	}
}

func TestErrorBodyNeverLeaksInternals(t *testing.T) {
	err := &protocol.Error{Code: protocol.EInternal, Hint: "db at postgres://user:pw@host failed", Err: errString("secret")}
	b, _ := json.Marshal(protocol.Body(err))
	if strings.Contains(string(b), "pw@") || strings.Contains(string(b), "secret") {
		t.Fatalf("internal error body leaks: %s", b)
	}
	if protocol.StatusOf(protocol.ENotFound) != 404 || protocol.CodeOf(409) != protocol.EConflict {
		t.Fatal("status table")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestStreamFrameHasIDFirst(t *testing.T) {
	b, _ := json.Marshal(protocol.StreamFrame{ID: 7, Frame: protocol.Frame{RunID: "r", NextStates: []protocol.NextState{}}})
	if !strings.HasPrefix(string(b), `{"id":7,"run_id":"r"`) {
		t.Fatalf("stream frame = %s", b)
	}
}

// FuzzDecodeObject is the fuzz target of the request body decoder every
// transition, tool and run request goes through: no input may panic, and an
// accepted body must re-encode to JSON that decodes to the same value.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"value":"x"}`, `{"a":[1,2,{"b":null}],"n":-1.5e10}`, `[`, `{"a":"\ud800"}`, "\xff", `{"n":123456789012345678901234567890}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := protocol.DecodeObject(b, 16)
		if err != nil {
			if protocol.ErrorCode(err) != protocol.EInvalid {
				t.Fatalf("error with code %s: %v", protocol.ErrorCode(err), err)
			}
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("accepted body does not re-encode: %v", err)
		}
		m2, err := protocol.DecodeObject(out, 16)
		if err != nil {
			t.Fatalf("re-encoded body rejected: %v (%s)", err, out)
		}
		out2, _ := json.Marshal(m2)
		if string(out) != string(out2) {
			t.Fatalf("round trip changed the value: %s vs %s", out, out2)
		}
	})
}
