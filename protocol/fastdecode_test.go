package protocol

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// fastDecode must agree exactly with the general decoder whenever it
// accepts an input, and must never accept what the general decoder refuses.
func checkFastDecode(t *testing.T, b []byte) {
	t.Helper()
	fast, ok := fastDecode(b)
	if !ok {
		return
	}
	slow, err := decodeGeneral(b)
	if err != nil {
		t.Fatalf("fastDecode accepted %q, the general decoder refuses it: %v", b, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fastDecode(%q) = %#v, general decoder = %#v", b, fast, slow)
	}
}

var decodeSeeds = []string{
	`{}`, `[]`, `{"value":"dark mode"}`, ` {"a" : [1, -0, 2.50, 1e3, 1E+2, -1.5e-7, 9007199254740993, 99999999999999999999, true, false, null, {"b":{}} ] } `,
	`"x"`, `0`, `-`, `01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `--1`, `-01`, `1.e5`, `tru`, `nul`, `nulls`, `{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`,
	`{,}`, `[,1]`, `{"a":1 "b":2}`, `{"é":"日本"}`, "\"\xff\"", "\"a\x01\"", `"a\nb"`, `"\u00e9"`, `{"a":1}{}`, `{"a":1} x`, `1e400`, `-1e400`,
	`{"a":1,"a":2}`, "\t\r\n[ ]\t", `[[[[]]]]`, `{"n":123456789012345678901234567890}`, `{"a":"\u2028"}`, "\"\u2028\"", "\"\x7f\"",
}

func TestFastDecodeAgrees(t *testing.T) {
	for _, s := range decodeSeeds {
		checkFastDecode(t, []byte(s))
	}
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"{", "}", "[", "]", ",", ":", `"k"`, `"v"`, `"é"`, "\"\xc3\"", `"a\"b"`, "1", "-", "0", ".", "5", "e", "E", "+", "true", "false", "null", " ", "\n", "x", `""`}
	for range 200000 {
		var sb strings.Builder
		for range 1 + r.IntN(12) {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		checkFastDecode(t, []byte(sb.String()))
	}
	// Valid documents: every encoding of random values decodes the same way.
	for range 20000 {
		v := randValue(r, 3)
		b, err := json.Marshal(v)
		if err != nil {
			continue
		}
		checkFastDecode(t, b)
	}
}

func FuzzFastDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if depth(b) > DefaultMaxDepth {
			return
		}
		checkFastDecode(t, b)
	})
}
