package row

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/asmp-dev/asmp/protocol"
)

// FuzzDecodeRow: Decode never panics; it either returns a row that passes
// Validate and survives a JSON round trip unchanged, or an EInvalid
// *protocol.Error with a hint.
func FuzzDecodeRow(f *testing.F) {
	f.Add(seedBody(f))
	f.Add([]byte(`{"command":"x","args":[{"name":"a","type":"array","default":[1,"b",true]}],"schema":{"type":"object"}}`))
	f.Add([]byte(`{"command":"x","flags":[{"name":"n","type":"integer","default":1e3,"short_alias":"-n"}],"timeout":2.5}`))
	f.Add([]byte(`{"command":"x","invocation_method":"shell","schema":{"$defs":{"a":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/a"}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Decode(body)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.EInvalid || pe.Hint == "" {
				t.Fatalf("Decode error %#v is not an EInvalid *protocol.Error with a hint", err)
			}
			return
		}
		if err := Validate(r); err != nil {
			t.Fatalf("decoded row fails Validate: %v", err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("Marshal(decoded row): %v", err)
		}
		r2, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Marshal(row)) = %v\n%s", err, b)
		}
		b2, err := json.Marshal(r2)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the row:\n%s\n%s", b, b2)
		}
		_ = r.InputKeys()
		_ = ValidateInput(r, map[string]any{"a": "b"})
	})
}
