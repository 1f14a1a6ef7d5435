package protocol_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/asmp-dev/asmp/protocol"
)

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolName(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := map[string]string{
		"save":           "save",
		"tool_policy":    "tool_policy",
		"a.b c/d":        "a_b_c_d",
		"Ünïcode-ok_1":   "_n_code-ok_1",
		"":               "_",
		"start:config":   "start_config",
		long[:64]:        long[:64],
		"x-" + long[:62]: "x-" + long[:62],
	}
	for in, want := range cases {
		if got := protocol.ToolName(in); got != want {
			t.Errorf("ToolName(%q) = %q, want %q", in, got, want)
		}
	}
	a, b := protocol.ToolName(long+"1"), protocol.ToolName(long+"2")
	for _, n := range []string{a, b} {
		if !toolNameRE.MatchString(n) || !strings.HasPrefix(n, long[:55]+"_") {
			t.Errorf("long name mapped to %q", n)
		}
	}
	if a == b {
		t.Errorf("two long names share the tool name %q", a)
	}
	if protocol.ToolName(long+"1") != a {
		t.Error("ToolName is not deterministic")
	}
}

func TestUniqueToolName(t *testing.T) {
	taken := map[string]bool{}
	first := protocol.UniqueToolName("action", "a.b", taken)
	if first != "a_b" {
		t.Fatalf("first = %q, want a_b", first)
	}
	taken[first] = true
	second := protocol.UniqueToolName("action", "a_b", taken)
	if second == first || !strings.HasPrefix(second, "a_b_") || !toolNameRE.MatchString(second) {
		t.Fatalf("second = %q", second)
	}
	if again := protocol.UniqueToolName("action", "a_b", taken); again != second {
		t.Fatalf("not deterministic: %q then %q", second, again)
	}
	taken[second] = true
	third := protocol.UniqueToolName("action", "a-b", taken)
	if third != "a-b" {
		t.Fatalf("a free name was changed: %q", third)
	}
	long := strings.Repeat("z", 80)
	taken[protocol.ToolName(long)] = true
	if n := protocol.UniqueToolName("tool", long, taken); len(n) > 64 || taken[n] || !toolNameRE.MatchString(n) {
		t.Fatalf("long colliding name = %q", n)
	}
}

func TestExpectsSchema(t *testing.T) {
	got := protocol.ExpectsSchema(map[string]string{
		"amount": "number", "count": "int", "note": "string", "tags": "array", "meta": "object", "ok": "bool", "odd": "weird",
	}, map[string]protocol.Constraint{
		"amount": {Minimum: ptr(0.5), Maximum: ptr(1000.0)},
		"note":   {Pattern: "^[a-z ]+$", MaxLength: ptr(20), Enum: []any{"a b", "c"}},
	})
	b, _ := json.Marshal(got)
	want := `{"additionalProperties":false,"properties":{"amount":{"maximum":1000,"minimum":0.5,"type":"number"},` +
		`"count":{"type":"integer"},"meta":{"type":"object"},"note":{"enum":["a b","c"],"maxLength":20,"pattern":"^[a-z ]+$","type":"string"},` +
		`"odd":{},"ok":{"type":"boolean"},"tags":{"type":"array"}},"required":["amount","count","meta","note","odd","ok","tags"],"type":"object"}`
	if string(b) != want {
		t.Fatalf("schema =\n%s\nwant\n%s", b, want)
	}
	empty, _ := json.Marshal(protocol.ExpectsSchema(nil, nil))
	if string(empty) != `{"additionalProperties":false,"properties":{},"required":[],"type":"object"}` {
		t.Fatalf("empty schema = %s", empty)
	}

	// The schema is a valid JSON Schema that accepts what the server
	// accepts and refuses a string for a number (the reference wrapper's
	// mistake), a missing field and a broken constraint.
	sch := compile(t, got)
	ok := `{"amount": 12.5, "count": 3, "note": "a b", "tags": [], "meta": {}, "ok": true, "odd": null}`
	if err := sch.Validate(decode(t, ok)); err != nil {
		t.Fatalf("valid input refused: %v", err)
	}
	for _, bad := range []string{
		`{"amount": "12.5", "count": 3, "note": "a b", "tags": [], "meta": {}, "ok": true, "odd": 1}`,
		`{"amount": 12.5, "count": 3.5, "note": "a b", "tags": [], "meta": {}, "ok": true, "odd": 1}`,
		`{"count": 3, "note": "a b", "tags": [], "meta": {}, "ok": true, "odd": 1}`,
		`{"amount": 2000, "count": 3, "note": "a b", "tags": [], "meta": {}, "ok": true, "odd": 1}`,
		`{"amount": 1, "count": 3, "note": "zz", "tags": [], "meta": {}, "ok": true, "odd": 1}`,
		`{"amount": 1, "count": 3, "note": "a b", "tags": [], "meta": {}, "ok": true, "odd": 1, "extra": 1}`,
	} {
		if err := sch.Validate(decode(t, bad)); err == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
}

func compile(t *testing.T, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	b, _ := json.Marshal(schema)
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool.json", decode(t, string(b))); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("tool.json")
	if err != nil {
		t.Fatalf("not a valid JSON Schema: %v", err)
	}
	return s
}

func decode(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
