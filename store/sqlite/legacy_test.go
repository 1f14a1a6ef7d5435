package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/asmp-dev/asmp/internal/testsupport/legacyfixture"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/store/sqlite"
)

// TestLegacyFixture opens a database written by the previous release
// (store/testdata/legacy) with the current code: the migrations apply to
// it, twice without harm, and every run, event, the task in flight and the
// ledger the release left are read back as the release's server reported
// them, down to the signed checkpoint.
func TestLegacyFixture(t *testing.T) {
	t.Parallel()
	m := legacyfixture.Load(t, legacyfixture.SQLiteManifest)
	dir := t.TempDir()
	path := filepath.Join(dir, "legacy.db")
	legacyfixture.Copy(t, legacyfixture.SQLiteDB, path)
	legacyfixture.Copy(t, legacyfixture.SQLiteKey, path+".key")

	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("opening the release's database: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(t.Context(), path, nil) // the migrations, again
	if err != nil {
		t.Fatalf("opening the release's database a second time: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })

	legacyfixture.CheckStore(t, s, m)
	legacyfixture.CheckPinning(t, s)
	ledger, err := oip.New(s, &oip.Options{KeyPath: path + ".key"})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := ledger.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	legacyfixture.CheckCheckpoint(t, ck, m)
}
