package protocol_test

import (
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/protocol"
)

// A lone surrogate escape is refused wherever a body is decoded; pairs,
// other escapes and the characters themselves pass.
func TestLoneSurrogatesAreRefused(t *testing.T) {
	for _, bad := range []string{
		`{"a":"\ud800"}`, `{"a":"x\uDBFFy"}`, `{"a":"\udc00"}`, `{"a":"\ud800\u0041"}`,
		`{"a":"\ud800\ud800"}`, `{"a":"\\\ud800"}`, `{"\ud800":1}`, `["\ud83d"]`, `{"a":["ok","\ud800"]}`,
	} {
		_, err := protocol.DecodeValue([]byte(bad), 0)
		if protocol.ErrorCode(err) != protocol.EInvalid || !strings.Contains(protocol.ErrorHint(err), "lone surrogate") {
			t.Errorf("DecodeValue(%s): %v", bad, err)
		}
		if err := protocol.CheckSurrogates([]byte(bad)); err == nil {
			t.Errorf("CheckSurrogates(%s): nil", bad)
		}
	}
	for _, good := range []string{
		`{"a":"\ud83d\ude00"}`, `{"a":"\\ud800"}`, `{"a":"\u00e9\n\"\\"}`, `{"a":"😀 é"}`, `{"a":"\uD83D\uDE00"}`, `{}`, `"\\\\ud800"`,
	} {
		if _, err := protocol.DecodeValue([]byte(good), 0); err != nil {
			t.Errorf("DecodeValue(%s): %v", good, err)
		}
	}
	v, err := protocol.DecodeValue([]byte(`{"a":"\ud83d\ude00"}`), 0)
	if err != nil || v.(map[string]any)["a"] != "😀" {
		t.Fatalf("a surrogate pair: %v %v", v, err)
	}
}
