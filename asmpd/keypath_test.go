package asmpd

import (
	"os"
	"path/filepath"
	"testing"
)

// A server on Postgres keeps the ledger's signing key in the user's state
// directory (never the working directory), or where ASMP_LEDGER_KEY says.
func TestLedgerKeyPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	env := map[string]string{"ASMP_STATE_DIR": dir}
	getenv := func(k string) string { return env[k] }
	p, err := LedgerKeyPath(getenv)
	if err != nil || p != filepath.Join(dir, "asmp-ledger.key") {
		t.Fatalf("LedgerKeyPath = %q, %v", p, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir: %v %v", fi, err)
	}
	env["ASMP_LEDGER_KEY"] = "/elsewhere/k.key"
	if p, _ := LedgerKeyPath(getenv); p != "/elsewhere/k.key" {
		t.Fatalf("ASMP_LEDGER_KEY ignored: %q", p)
	}
}
