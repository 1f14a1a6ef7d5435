package workflow

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// unknownFields returns a problem for every key of the file that the file
// format does not have, each at its position, so that a file with
// several misspelt keys (and other mistakes) is told all of them at once
// rather than the decoder's first. node is decoded into a value of type t
// at path; types that decode themselves (fileExpect) and free-form values
// (data, any) are not walked.
func unknownFields(node ast.Node, t reflect.Type, path string) []Problem {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	node = unwrap(node)
	if node == nil || reflect.PointerTo(t).Implements(selfDecoding) {
		return nil
	}
	join := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	var out []Problem
	switch t.Kind() {
	case reflect.Struct:
		fields := yamlFields(t)
		for _, kv := range mappingValues(node) {
			key := keyText(kv)
			f, ok := fields[key]
			if !ok {
				p := Problem{Path: join(key), Message: fmt.Sprintf("unknown field %q", key)}
				if tk := kv.Key.GetToken(); tk != nil && tk.Position != nil {
					p.Line, p.Col = tk.Position.Line, tk.Position.Column
				}
				out = append(out, p)
				continue
			}
			out = append(out, unknownFields(kv.Value, f.Type, join(key))...)
		}
	case reflect.Map:
		for _, kv := range mappingValues(node) {
			out = append(out, unknownFields(kv.Value, t.Elem(), join(keyText(kv)))...)
		}
	case reflect.Slice:
		if seq, ok := node.(*ast.SequenceNode); ok {
			for i, v := range seq.Values {
				out = append(out, unknownFields(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return out
}

// selfDecoding is the interface of the file types that decode themselves.
var selfDecoding = reflect.TypeFor[interface {
	UnmarshalYAML(func(any) error) error
}]()

// yamlFields maps a struct's YAML keys to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() && name == "" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

// unwrap returns the node a tag or an anchor holds; an alias is nil (its
// anchor is walked where it is defined).
func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			return nil
		default:
			return n
		}
	}
}

// mappingValues returns the key-value pairs of a mapping node (none for
// another kind).
func mappingValues(n ast.Node) []*ast.MappingValueNode {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}
	}
	return nil
}

func keyText(kv *ast.MappingValueNode) string {
	if tk := kv.Key.GetToken(); tk != nil {
		return tk.Value
	}
	return kv.Key.String()
}
