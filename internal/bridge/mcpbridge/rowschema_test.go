package mcpbridge_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/asmp-dev/asmp/internal/bridge/mcpbridge"
	"github.com/asmp-dev/asmp/oip/wire"
)

// The row's own schema adds its keywords to the params' properties and
// its required names, keeps its other keywords, and cannot widen the
// input to keys the row does not declare.
func TestRowSchemaMergesTheRowsSchema(t *testing.T) {
	r := wire.Row{
		Command: "convert",
		Args:    []wire.Param{{Name: "src", Type: "string", Description: "Source file", Required: true}},
		Flags: []wire.Param{
			{Name: "quality", Type: "integer", Default: json.RawMessage("80"), ShortAlias: "-q"},
			{Name: "tags", Type: "array"},
		},
		Schema: json.RawMessage(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
			"properties": {"quality": {"minimum": 1, "maximum": 100, "type": "number"}, "other": {"type": "string"}},
			"required": ["quality", "other"], "dependentRequired": {"tags": ["quality"]}}`),
	}
	got := mcpbridge.RowSchema(r)
	b, _ := json.Marshal(got)
	var s map[string]any
	json.Unmarshal(b, &s)
	props := s["properties"].(map[string]any)
	q := props["quality"].(map[string]any)
	if q["type"] != "integer" || q["minimum"] != 1.0 || q["maximum"] != 100.0 || q["default"] != 80.0 || q["description"] != "(flag -q)" {
		t.Errorf("quality: %v", q)
	}
	if src := props["src"].(map[string]any); src["description"] != "Source file. (positional argument 1)" || src["type"] != "string" {
		t.Errorf("src: %v", src)
	}
	if tags := props["tags"].(map[string]any); tags["type"] != "array" || tags["items"] == nil {
		t.Errorf("tags: %v", tags)
	}
	if _, ok := props["other"]; ok {
		t.Error("a property the row does not declare was added")
	}
	if !reflect.DeepEqual(s["required"], []any{"quality", "src"}) {
		t.Errorf("required: %v", s["required"])
	}
	if s["additionalProperties"] != false || s["dependentRequired"] == nil || s["$schema"] != nil {
		t.Errorf("top level: %s", b)
	}
}
