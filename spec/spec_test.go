package spec_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/asmp-dev/asmp/spec"
)

// The copies must stay byte-identical to the canonical documents when those
// are present beside the repository.
func TestCopiesMatchCanonical(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "spec")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("canonical spec directory %s not present: %v", dir, err)
	}
	for name, got := range map[string][]byte{
		"STATE_FRAME.json": spec.StateFrameSchema, "CLI_SCHEMA.json": spec.CLISchema,
		"CLIENT_CONFIG.json": spec.ClientConfigSchema, "openapi.json": spec.OpenAPI,
	} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the canonical copy", name)
		}
	}
}

func TestValidate(t *testing.T) {
	good := `{"run_id":"0190f5a4-7b5e-7c3e-9d2a-1b2c3d4e5f60","workflow_id":"config-wizard-v1","state":"INITIAL","status":"active","hint":"h","next_states":[]}`
	if err := spec.Validate(spec.StateFrame, []byte(good)); err != nil {
		t.Fatalf("valid frame rejected: %v", err)
	}
	for name, bad := range map[string]string{
		"extra property": `{"run_id":"0190f5a4-7b5e-7c3e-9d2a-1b2c3d4e5f60","workflow_id":"w1","state":"S","status":"active","hint":"h","next_states":[],"cli":{}}`,
		"bad status":     `{"run_id":"0190f5a4-7b5e-7c3e-9d2a-1b2c3d4e5f60","workflow_id":"w1","state":"S","status":"done","hint":"h","next_states":[]}`,
		"bad uuid":       `{"run_id":"nope","workflow_id":"w1","state":"S","status":"active","hint":"h","next_states":[]}`,
		"missing hint":   `{"run_id":"0190f5a4-7b5e-7c3e-9d2a-1b2c3d4e5f60","workflow_id":"w1","state":"S","status":"active","next_states":[]}`,
	} {
		if err := spec.Validate(spec.StateFrame, []byte(bad)); err == nil {
			t.Errorf("%s: invalid frame accepted", name)
		}
	}
	if err := spec.Validate(spec.CLI, []byte(`{"prompt":"p","options":[{"action":"a","label":"A"}],"run_id":"x","extra":1}`)); err == nil {
		t.Error("CLI object with an extra property accepted")
	}
}
