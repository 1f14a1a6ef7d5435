package workflow

import (
	"fmt"
	"math"
	"sort"

	"github.com/asmp-dev/asmp/protocol"
)

// fileExpect is one `expects` entry of a workflow file: a type name
// (`a: integer`), or an object with the type and its bounds
// (`a: {type: integer, minimum: 1, maximum: 1000000}`).
type fileExpect struct {
	Type       string
	Constraint protocol.Constraint
	// problem says why the entry has the wrong shape ("" when it is fine);
	// reported with the entry's position by splitExpects's caller.
	problem string
}

// UnmarshalYAML accepts a string or an object of the known keys.
func (e *fileExpect) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err == nil {
		e.Type = s
		return nil
	}
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		e.problem = "an expected field is a type name (string, number, ...) or an object {type, minimum, maximum, enum, pattern, maxLength}"
		return nil
	}
	e.problem = e.fromObject(m)
	return nil
}

// fromObject reads {type, minimum, maximum, enum, pattern, maxLength}.
func (e *fileExpect) fromObject(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		switch k {
		case "type":
			s, ok := v.(string)
			if !ok {
				return "type must be a type name (string, number, integer, boolean, array, object)"
			}
			e.Type = s
		case "minimum", "maximum":
			f, ok := yamlNumber(v)
			if !ok {
				return k + " must be a number"
			}
			if k == "minimum" {
				e.Constraint.Minimum = &f
			} else {
				e.Constraint.Maximum = &f
			}
		case "maxLength":
			f, ok := yamlNumber(v)
			if !ok || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
				return "maxLength must be a whole number of characters, 0 or more"
			}
			n := int(f)
			e.Constraint.MaxLength = &n
		case "pattern":
			s, ok := v.(string)
			if !ok {
				return "pattern must be a regular expression (a string)"
			}
			e.Constraint.Pattern = s
		case "enum":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return "enum must be a non-empty list of the allowed values"
			}
			for i, x := range list {
				if f, ok := yamlNumber(x); ok {
					list[i] = f
				}
			}
			e.Constraint.Enum = list
		default:
			return fmt.Sprintf("unknown key %q: an expected field's object has type, minimum, maximum, enum, pattern, maxLength", k)
		}
	}
	if e.Type == "" {
		return "an expected field's object needs a type"
	}
	return ""
}

// yamlNumber converts the number types the YAML decoder produces.
func yamlNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// splitExpects turns a file's expects into the type map and the
// constraints (nil when none), and the problems of malformed entries.
func splitExpects(path string, in map[string]fileExpect) (map[string]string, map[string]protocol.Constraint, []Problem) {
	if in == nil {
		return nil, nil, nil
	}
	types := make(map[string]string, len(in))
	var cs map[string]protocol.Constraint
	var problems []Problem
	for k, e := range in {
		if e.problem != "" {
			problems = append(problems, Problem{Path: path + "." + k, Message: e.problem})
			continue
		}
		types[k] = e.Type
		if !e.Constraint.IsZero() {
			if cs == nil {
				cs = map[string]protocol.Constraint{}
			}
			cs[k] = e.Constraint
		}
	}
	return types, cs, problems
}
