package row

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/asmp-dev/asmp/protocol"
)

// schemaURL is the made-up location a row's schema is compiled at; relative
// references resolve against it and are then refused by noLoader.
const schemaURL = "mem:///oip/row/schema.json"

// Cache limits: compiled schemas are kept per schema text until either
// limit is passed, then the cache starts over.
const (
	cacheMaxEntries = 512
	cacheMaxBytes   = 8 << 20
)

var schemaCache struct {
	sync.RWMutex
	m     map[string]*jsonschema.Schema
	bytes int
}

// noLoader refuses every external document, so compiling a schema never
// reads a file or the network. The draft metaschemas are built in.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s; only references inside the schema itself are allowed", url)
}

// compileSchema compiles raw (which must be a JSON object) or returns it from
// the cache. Errors are EInvalid with field "schema".
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	schemaCache.RLock()
	s, ok := schemaCache.m[string(raw)]
	schemaCache.RUnlock()
	if ok {
		return s, nil
	}
	v, err := protocol.DecodeValue(raw, 0)
	if err != nil {
		return nil, invalid("schema", "schema is not valid JSON: %s", protocol.ErrorHint(err))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, invalid("schema", "schema must be a JSON Schema object, got %s", protocol.TypeOf(v))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid("schema", "schema is not valid JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, schemaError(err)
	}
	s, err = c.Compile(schemaURL)
	if err != nil {
		return nil, schemaError(err)
	}
	schemaCache.Lock()
	if schemaCache.m == nil || len(schemaCache.m) >= cacheMaxEntries || schemaCache.bytes+len(raw) > cacheMaxBytes {
		schemaCache.m = make(map[string]*jsonschema.Schema)
		schemaCache.bytes = 0
	}
	if len(raw) <= cacheMaxBytes {
		schemaCache.m[string(raw)] = s
		schemaCache.bytes += len(raw)
	}
	schemaCache.Unlock()
	return s, nil
}

func schemaError(err error) error {
	msg := err.Error()
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		// The schema breaks its metaschema: name the first failing rule.
		msg = leafError(ve).Error()
	}
	msg = strings.ReplaceAll(msg, schemaURL, "schema")
	msg = strings.Join(strings.Fields(msg), " ")
	e := invalid("schema", "schema does not compile: %s", protocol.Truncate(msg, 300))
	e.Err = err
	return e
}

// ValidateInput checks the whole input object against the row's schema (a
// no-op without one). The error is EInvalid; its hint names the failing
// location and rule, and Fields["field"] holds the top-level input key when
// the failure is inside one. input may hold the types protocol.DecodeValue
// produces, json.Number, and Go integers and floats.
func ValidateInput(r *Row, input map[string]any) error {
	if r.Schema == nil {
		return nil
	}
	s, err := compileSchema(r.Schema)
	if err != nil {
		return err
	}
	var m any = input
	if input == nil {
		m = map[string]any{}
	}
	err = s.Validate(m)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return protocol.Errorf(protocol.EInvalid, "input does not match the row's schema: %s", protocol.Truncate(err.Error(), 300))
	}
	leaf := leafError(ve)
	msg := strings.Join(strings.Fields(readableError(leaf)), " ")
	e := protocol.Errorf(protocol.EInvalid, "input does not match the row's schema: %s", protocol.Truncate(msg, 300))
	e.Err = err
	if len(leaf.InstanceLocation) > 0 {
		e.Fields = map[string]any{"field": leaf.InstanceLocation[0]}
	}
	return e
}

// readableError is leaf's message with numeric bounds written as people
// write them ("got 2000000, want 1000000"): the library's English printer
// renders large numbers as 2×10⁰⁶.
func readableError(leaf *jsonschema.ValidationError) string {
	var name string
	var got, want *big.Rat
	switch k := leaf.ErrorKind.(type) {
	case *kind.Maximum:
		name, got, want = "maximum", k.Got, k.Want
	case *kind.Minimum:
		name, got, want = "minimum", k.Got, k.Want
	case *kind.ExclusiveMaximum:
		name, got, want = "exclusiveMaximum", k.Got, k.Want
	case *kind.ExclusiveMinimum:
		name, got, want = "exclusiveMinimum", k.Got, k.Want
	case *kind.MultipleOf:
		name, got, want = "multipleOf", k.Got, k.Want
	default:
		return leaf.Error()
	}
	loc := "/" + strings.Join(leaf.InstanceLocation, "/")
	return fmt.Sprintf("at '%s': %s: got %s, want %s", loc, name, ratString(got), ratString(want))
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return protocol.FormatNumber(f)
}

// leafError follows the first cause down to the most specific failure.
func leafError(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve
}
