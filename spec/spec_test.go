package spec_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/asmp-dev/asmp/spec"
)

// canonicalDir finds the canonical documents: shared/spec beside the
// repository (CI's clone has ../shared/spec) or beside one of its parent
// directories (a git worktree under the main checkout's directory).
func canonicalDir() (string, bool) {
	root, err := filepath.Abs("..") // this package is spec/ of the repository
	if err != nil {
		return "", false
	}
	for dir := filepath.Dir(root); ; dir = filepath.Dir(dir) {
		c := filepath.Join(dir, "shared", "spec")
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return c, true
		}
		if filepath.Dir(dir) == dir {
			return "", false
		}
	}
}

// The copies must stay byte-identical to the canonical documents. Without
// them the test skips, except under CI, where they are always laid out.
func TestCopiesMatchCanonical(t *testing.T) {
	dir, ok := canonicalDir()
	if !ok {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set, and the canonical spec directory shared/spec is not beside the repository (nor beside a parent directory)")
		}
		t.Skip("the canonical spec directory shared/spec is not beside the repository")
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
