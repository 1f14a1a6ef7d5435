package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/protocol"
)

func ptr[T any](v T) *T { return &v }

// Every bound refuses a value beyond it with a hint that names the bound,
// and lets a value within it through.
func TestCheckConstraintsPerBound(t *testing.T) {
	cases := []struct {
		name      string
		c         protocol.Constraint
		ok, bad   any
		wantInErr string
	}{
		{"minimum", protocol.Constraint{Minimum: ptr(1.0)}, 1.0, 0.0, `Field "f" must be at least 1, got 0.`},
		{"maximum", protocol.Constraint{Maximum: ptr(1e6)}, int64(1000000), 2e6, `Field "f" must be at most 1000000, got 2000000.`},
		{"maximum json.Number", protocol.Constraint{Maximum: ptr(10.0)}, json.Number("10"), json.Number("10.5"), `must be at most 10, got 10.5`},
		{"enum strings", protocol.Constraint{Enum: []any{"red", "green"}}, "green", "blue", `Field "f" must be one of "red", "green", got "blue".`},
		{"enum numbers", protocol.Constraint{Enum: []any{1.0, 2.0}}, int64(2), 3.0, `must be one of 1, 2, got 3`},
		{"pattern", protocol.Constraint{Pattern: `^[a-z]+$`}, "abc", "ab1", `Field "f" must match the pattern ^[a-z]+$.`},
		{"maxLength", protocol.Constraint{MaxLength: ptr(3)}, "äöü", "abcd", `Field "f" must be at most 3 characters long, got 4.`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := map[string]protocol.Constraint{"f": c.c}
			if err := protocol.CheckConstraints(cs, map[string]any{"f": c.ok}); err != nil {
				t.Fatalf("%v refused: %v", c.ok, err)
			}
			err := protocol.CheckConstraints(cs, map[string]any{"f": c.bad})
			if err == nil || protocol.ErrorCode(err) != protocol.EInvalid || !strings.Contains(err.Error(), c.wantInErr) {
				t.Fatalf("%v: err = %v, want %q", c.bad, err, c.wantInErr)
			}
		})
	}
	// No constraints, or a field that is absent, constrain nothing.
	if err := protocol.CheckConstraints(nil, map[string]any{"f": 1}); err != nil {
		t.Fatal(err)
	}
	if err := protocol.CheckConstraints(map[string]protocol.Constraint{"g": {Maximum: ptr(1.0)}}, map[string]any{"f": 5.0}); err != nil {
		t.Fatal(err)
	}
	if protocol.FormatNumber(2e6) != "2000000" || protocol.FormatNumber(0.25) != "0.25" {
		t.Fatal("FormatNumber")
	}
}
