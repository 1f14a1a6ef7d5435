package protocol_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/asmp-dev/asmp/protocol"
)

// checkRefusal asserts that err is CheckExpects's refusal: an EInvalid
// *protocol.Error with the given hint, naming field and the expects map.
func checkRefusal(t *testing.T, err error, hint, field string, expects map[string]string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want a *protocol.Error", err, err)
	}
	if pe.Code != protocol.EInvalid || pe.Hint != hint {
		t.Fatalf("err = %s %q, want invalid %q", pe.Code, pe.Hint, hint)
	}
	if pe.Fields["field"] != field || !reflect.DeepEqual(pe.Fields["expects"], expects) {
		t.Fatalf("error fields = %v, want field %q and expects %v", pe.Fields, field, expects)
	}
}

// Every expected field that is absent is refused by name, with the whole
// expects map described in the hint.
func TestCheckExpectsMissingField(t *testing.T) {
	ex := map[string]string{"amount": protocol.TypeNumber, "description": protocol.TypeString, "tags": protocol.TypeArray}
	full := map[string]any{"amount": 1.5, "description": "Lunch", "tags": []any{"food"}}
	if err := protocol.CheckExpects(ex, full); err != nil {
		t.Fatalf("complete input refused: %v", err)
	}
	for field := range ex {
		in := map[string]any{}
		for k, v := range full {
			if k != field {
				in[k] = v
			}
		}
		checkRefusal(t, protocol.CheckExpects(ex, in),
			`Missing field "`+field+`": this action expects amount (number), description (string), tags (array).`, field, ex)
	}
	// A field present with a null value is there, but of the wrong type.
	checkRefusal(t, protocol.CheckExpects(ex, map[string]any{"amount": nil, "description": "x", "tags": []any{}}),
		`Field "amount" must be a number, got null.`, "amount", ex)
	// With several problems, the first field in sorted order is named,
	// whatever order the maps iterate in.
	for range 50 {
		checkRefusal(t, protocol.CheckExpects(ex, map[string]any{"tags": "x"}),
			`Missing field "amount": this action expects amount (number), description (string), tags (array).`, "amount", ex)
	}
	if err := protocol.CheckExpects(nil, map[string]any{"x": 1}); err != nil {
		t.Fatalf("no expects, yet refused: %v", err)
	}
}

// Each canonical type accepts the decoded values of its kind and refuses
// the rest, naming what it got.
func TestCheckExpectsTypes(t *testing.T) {
	for _, c := range []struct {
		typ  string
		ok   []any
		bad  []any
		got  []string // TypeOf of each bad value
		hint string   // the article and type as the hint writes them
	}{
		{protocol.TypeString, []any{"", "x"},
			[]any{int64(1), true, nil}, []string{"integer", "boolean", "null"}, "a string"},
		{protocol.TypeNumber, []any{1.5, int64(2), 2.0, json.Number("1.5"), json.Number("7"), float32(0.5), 3, math.Inf(1)},
			[]any{"1", []any{}, false}, []string{"string", "array", "boolean"}, "a number"},
		{protocol.TypeInteger, []any{int64(2), 2.0, math.Copysign(0, -1), json.Number("3"), 7, uint8(1), float32(4)},
			[]any{2.5, json.Number("2.5"), "2", float64(1 << 53), math.Inf(-1)}, []string{"number", "number", "string", "number", "number"}, "an integer"},
		{protocol.TypeBoolean, []any{true, false},
			[]any{"true", int64(0), nil}, []string{"string", "integer", "null"}, "a boolean"},
		{protocol.TypeArray, []any{[]any{}, []any{1.0}, []string{"a"}},
			[]any{map[string]any{}, "[]"}, []string{"object", "string"}, "an array"},
		{protocol.TypeObject, []any{map[string]any{}, map[string]any{"a": 1.0}},
			[]any{[]any{}, nil, "{}"}, []string{"array", "null", "string"}, "an object"},
	} {
		ex := map[string]string{"v": c.typ}
		for _, v := range c.ok {
			if err := protocol.CheckExpects(ex, map[string]any{"v": v}); err != nil {
				t.Errorf("%s refused %#v: %v", c.typ, v, err)
			}
		}
		for i, v := range c.bad {
			if got := protocol.TypeOf(v); got != c.got[i] {
				t.Errorf("TypeOf(%#v) = %s, want %s", v, got, c.got[i])
			}
			checkRefusal(t, protocol.CheckExpects(ex, map[string]any{"v": v}),
				`Field "v" must be `+c.hint+`, got `+c.got[i]+`.`, "v", ex)
		}
	}
}

// Workflow files may name types by alias; NormalizeType maps each to the
// canonical name CheckExpects takes, and nothing else is a type.
func TestTypeAliases(t *testing.T) {
	for alias, want := range map[string]string{
		"string": protocol.TypeString, "str": protocol.TypeString, " Str ": protocol.TypeString,
		"number": protocol.TypeNumber, "float": protocol.TypeNumber, "FLOAT": protocol.TypeNumber,
		"integer": protocol.TypeInteger, "int": protocol.TypeInteger,
		"boolean": protocol.TypeBoolean, "bool": protocol.TypeBoolean,
		"array": protocol.TypeArray, "object": protocol.TypeObject,
	} {
		got, ok := protocol.NormalizeType(alias)
		if !ok || got != want {
			t.Errorf("NormalizeType(%q) = %q, %v; want %q", alias, got, ok, want)
		}
	}
	for _, unknown := range []string{"", "date", "list", "dict", "null", "any", "i", "strings"} {
		if got, ok := protocol.NormalizeType(unknown); ok {
			t.Errorf("NormalizeType(%q) = %q, want unknown", unknown, got)
		}
	}
	norm := map[string]string{}
	for k, alias := range map[string]string{"n": "int", "f": "float", "b": "bool", "s": "str"} {
		norm[k], _ = protocol.NormalizeType(alias)
	}
	if err := protocol.CheckExpects(norm, map[string]any{"n": int64(1), "f": 0.5, "b": true, "s": "x"}); err != nil {
		t.Errorf("normalized aliases refused good input: %v", err)
	}
}
