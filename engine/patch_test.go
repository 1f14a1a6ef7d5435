package engine

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// The patch a transition stores turns the data before it into the data
// after it, or is nil (the event is kept whole) when no merge patch can.
func TestDataPatch(t *testing.T) {
	decode := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, c := range []struct {
		old, new string
		keys     []string
		ok       bool
	}{
		{`{"a":1,"b":{"x":1,"y":2}}`, `{"a":1,"b":{"x":3}}`, []string{"b"}, true}, // a nested key removed
		{`{"a":1}`, `{"a":1,"c":[null,{"k":null}]}`, []string{"c"}, true},         // nulls inside arrays are fine
		{`{"a":{"q":1}}`, `{"a":"s"}`, []string{"a"}, true},
		{`{"a":1}`, `{"a":null}`, []string{"a"}, false}, // null cannot be set by a merge patch
		{`{"a":1}`, `{"a":{"n":null}}`, []string{"a"}, false},
		{`{"a":1}`, `{"a":1}`, nil, true},
	} {
		old, new := decode(c.old), decode(c.new)
		set := map[string]any{}
		for _, k := range c.keys {
			set[k] = new[k]
		}
		p := dataPatch[string](old, new, nil, set)
		if (p != nil) != c.ok {
			t.Fatalf("%s → %s: patch %s, want one: %v", c.old, c.new, p, c.ok)
		}
		if p == nil {
			continue
		}
		var pv any
		json.Unmarshal(p, &pv)
		if got := store.MergeValue(old, pv); !reflect.DeepEqual(got, new) {
			t.Fatalf("%s with patch %s gives %v, want %s", c.old, p, got, c.new)
		}
	}
}
