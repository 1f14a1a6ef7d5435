package row

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
)

// Kind is the dispatch type that carries a directory row, and Category the
// row's category in the directory listing. Decode accepts either as "type".
const (
	Kind     = "directory_row"
	Category = "cli"
)

var (
	rowKeys   = []string{"type", "command", "description", "args", "flags", "output_format", "invocation_method", "source_url", "schema", "timeout"}
	argKeys   = []string{"name", "type", "description", "required", "default"}
	flagKeys  = []string{"name", "type", "description", "required", "default", "short_alias"}
	rowKeySet = keySet(rowKeys)
	argKeySet = keySet(argKeys)
	flgKeySet = keySet(flagKeys)
)

func keySet(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// Decode decodes a dispatch body — one JSON object holding the row's fields
// and "type":"directory_row" — and validates it. Unknown keys are refused,
// output_format and invocation_method are filled in with their defaults when
// absent, and the result has passed Validate. Errors are EInvalid
// *protocol.Error values whose hint and Fields["field"] name the offending
// field path, such as `flags[1].short_alias`.
func Decode(body []byte) (*Row, error) {
	v, err := protocol.DecodeValue(body, 0)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, protocol.Errorf(protocol.EInvalid, "A directory row must be a JSON object, not %s", protocol.TypeOf(v))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, protocol.Errorf(protocol.EInvalid, "The directory row is not valid JSON: %v", err)
	}
	if err := unknownKeys(top, rowKeySet, rowKeys, "", "the directory row"); err != nil {
		return nil, err
	}
	var t string
	if err := str(top, "type", "type", &t); err != nil {
		return nil, err
	}
	if t != "" && t != Kind && t != Category {
		return nil, invalid("type", "type %s is not a directory row; use %q", quoted(t), Kind)
	}
	r := &Row{}
	if raw, ok := top["command"]; !ok || isNull(raw) {
		return nil, invalid("command", "command is required: the program to run, e.g. \"mytool\"")
	}
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"command", &r.Command},
		{"description", &r.Description},
		{"output_format", &r.OutputFormat},
		{"invocation_method", &r.InvocationMethod},
		{"source_url", &r.SourceURL},
	} {
		if err := str(top, f.key, f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if raw, ok := top["timeout"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &r.Timeout); err != nil {
			return nil, invalid("timeout", "timeout must be a number of seconds, got %s", rawKind(raw))
		}
	}
	if raw, ok := top["schema"]; ok && !isNull(raw) {
		r.Schema = append(json.RawMessage(nil), raw...)
	}
	if r.Args, err = params(top, "args", false); err != nil {
		return nil, err
	}
	if r.Flags, err = params(top, "flags", true); err != nil {
		return nil, err
	}
	if r.OutputFormat == "" {
		r.OutputFormat = FormatText
	}
	if r.InvocationMethod == "" {
		r.InvocationMethod = MethodExec
	}
	if err := Validate(r); err != nil {
		return nil, err
	}
	return r, nil
}

func params(top map[string]json.RawMessage, key string, flag bool) ([]Param, error) {
	raw, ok := top[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid(key, "%s must be an array of objects, got %s", key, rawKind(raw))
	}
	if len(items) == 0 {
		return nil, nil
	}
	keys, set := argKeys, argKeySet
	if flag {
		keys, set = flagKeys, flgKeySet
	}
	out := make([]Param, len(items))
	for i, item := range items {
		path := fmt.Sprintf("%s[%d]", key, i)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(item, &m); err != nil || m == nil {
			return nil, invalid(path, "%s must be an object, got %s", path, rawKind(item))
		}
		if !flag {
			if _, ok := m["short_alias"]; ok {
				return nil, invalid(path+".short_alias", "%s.short_alias: positional args take no short alias; make it a flag to give it one", path)
			}
		}
		if err := unknownKeys(m, set, keys, path+".", path); err != nil {
			return nil, err
		}
		p := &out[i]
		for _, f := range []struct {
			key string
			dst *string
		}{{"name", &p.Name}, {"type", &p.Type}, {"description", &p.Description}, {"short_alias", &p.ShortAlias}} {
			if err := str(m, f.key, path+"."+f.key, f.dst); err != nil {
				return nil, err
			}
		}
		if raw, ok := m["required"]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &p.Required); err != nil {
				return nil, invalid(path+".required", "%s.required must be true or false, got %s", path, rawKind(raw))
			}
		}
		if raw, ok := m["default"]; ok {
			p.Default = append(json.RawMessage(nil), raw...)
		}
	}
	return out, nil
}

// unknownKeys refuses the alphabetically first key of m that is not in set.
func unknownKeys(m map[string]json.RawMessage, set map[string]bool, allowed []string, prefix, where string) error {
	var bad []string
	for k := range m {
		if !set[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return invalid(prefix+bad[0], "unknown key %s in %s; allowed keys: %s", quoted(bad[0]), where, strings.Join(allowed, ", "))
}

// str decodes the optional string m[key] into dst; null counts as absent.
func str(m map[string]json.RawMessage, key, path string, dst *string) error {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return invalid(path, "%s must be a string, got %s", path, rawKind(raw))
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// rawKind names the JSON type of a raw value by its first byte.
func rawKind(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
