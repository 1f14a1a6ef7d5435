package protocol

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
)

// The value types an `expects` map may name.
const (
	TypeString  = "string"
	TypeNumber  = "number"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
	TypeArray   = "array"
	TypeObject  = "object"
)

var typeAliases = map[string]string{
	TypeString: TypeString, "str": TypeString,
	TypeNumber: TypeNumber, "float": TypeNumber,
	TypeInteger: TypeInteger, "int": TypeInteger,
	TypeBoolean: TypeBoolean, "bool": TypeBoolean,
	TypeArray:  TypeArray,
	TypeObject: TypeObject,
}

// NormalizeType maps a type name or alias (int, float, bool, str) to its
// canonical name. ok is false for unknown names.
func NormalizeType(t string) (canonical string, ok bool) {
	c, ok := typeAliases[strings.ToLower(strings.TrimSpace(t))]
	return c, ok
}

// TypeOf names the JSON type of a decoded value, as CheckType understands it.
func TypeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return TypeString
	case bool:
		return TypeBoolean
	case []any, []string:
		return TypeArray
	case map[string]any:
		return TypeObject
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return TypeInteger
		}
		return TypeNumber
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, uintptr:
		return TypeInteger
	case float32:
		return numberType(float64(x))
	case float64:
		return numberType(x)
	}
	return "unknown"
}

func numberType(f float64) string {
	if f == math.Trunc(f) && !math.IsInf(f, 0) && math.Abs(f) < 1<<53 {
		return TypeInteger
	}
	return TypeNumber
}

// CheckType reports whether v (a decoded JSON value) has the canonical type t.
// An integer is also a number.
func CheckType(t string, v any) bool {
	got := TypeOf(v)
	if got == t {
		return true
	}
	return t == TypeNumber && got == TypeInteger
}

// CheckExpects validates input against an expects map (field -> canonical
// type). It returns an *Error (EInvalid) naming the first missing or
// mistyped field in sorted order, or nil.
func CheckExpects(expects map[string]string, input map[string]any) error {
	keys := make([]string, 0, len(expects))
	for k := range expects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t := expects[k]
		v, ok := input[k]
		if !ok {
			return Errorf(EInvalid, "Missing field %q: this action expects %s.", k, DescribeExpects(expects)).
				With("field", k).With("expects", expects)
		}
		if !CheckType(t, v) {
			return Errorf(EInvalid, "Field %q must be %s %s, got %s.", k, article(t), t, TypeOf(v)).
				With("field", k).With("expects", expects)
		}
	}
	return nil
}

// DescribeExpects renders an expects map as `a (string), b (integer)` in
// sorted order, for hints and input prompts.
func DescribeExpects(expects map[string]string) string {
	keys := make([]string, 0, len(expects))
	for k := range expects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteString(" (")
		b.WriteString(expects[k])
		b.WriteString(")")
	}
	return b.String()
}

func article(t string) string {
	switch t {
	case TypeInteger, TypeArray, TypeObject:
		return "an"
	}
	return "a"
}
