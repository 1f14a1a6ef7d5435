// Package spec embeds the canonical ASMP JSON Schemas and OpenAPI document
// (MIT licensed, copied verbatim) and validates documents against them.
package spec

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The embedded documents.
var (
	//go:embed STATE_FRAME.json
	StateFrameSchema []byte
	//go:embed CLI_SCHEMA.json
	CLISchema []byte
	//go:embed CLIENT_CONFIG.json
	ClientConfigSchema []byte
	//go:embed openapi.json
	OpenAPI []byte
)

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema
	initErr  error
)

// Schema names accepted by Validate.
const (
	StateFrame   = "STATE_FRAME.json"
	CLI          = "CLI_SCHEMA.json"
	ClientConfig = "CLIENT_CONFIG.json"
)

func compile() {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	docs := map[string][]byte{StateFrame: StateFrameSchema, CLI: CLISchema, ClientConfig: ClientConfigSchema}
	compiled = map[string]*jsonschema.Schema{}
	for name, b := range docs {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			initErr = fmt.Errorf("spec: %s: %w", name, err)
			return
		}
		if err := c.AddResource(name, doc); err != nil {
			initErr = fmt.Errorf("spec: %s: %w", name, err)
			return
		}
	}
	for name := range docs {
		s, err := c.Compile(name)
		if err != nil {
			initErr = fmt.Errorf("spec: %s: %w", name, err)
			return
		}
		compiled[name] = s
	}
}

// Validate checks the JSON document doc against the named schema
// (StateFrame, CLI or ClientConfig), with format assertions on.
func Validate(schema string, doc []byte) error {
	once.Do(compile)
	if initErr != nil {
		return initErr
	}
	s, ok := compiled[schema]
	if !ok {
		return fmt.Errorf("spec: unknown schema %q", schema)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("spec: not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("spec: %s: %w", schema, err)
	}
	return nil
}

// ValidateValue marshals v and validates it against the named schema.
func ValidateValue(schema string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return Validate(schema, b)
}
