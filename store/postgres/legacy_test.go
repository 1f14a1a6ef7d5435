package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/internal/testsupport/legacyfixture"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/store/postgres"
)

// loadLegacyDump creates a new database, dropped when the test ends, loads
// the previous release's dump into it (plain SQL, run through the simple
// query protocol as psql would) and returns its URL. A database of its
// own, rather than a schema, because the dump names its schema (public).
func loadLegacyDump(t *testing.T, admin string) string {
	t.Helper()
	dump, err := os.ReadFile(filepath.Join(legacyfixture.Dir(t), legacyfixture.PostgresDump))
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "asmp_legacy_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("CREATE DATABASE (the test's user needs CREATEDB): %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	db, err := pgx.Connect(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(t.Context(), string(dump), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("loading %s: %v", legacyfixture.PostgresDump, err)
	}
	return u.String()
}

// TestLegacyFixture opens a database written by the previous release
// (store/testdata/legacy) with the current code: the migrations apply to
// it, twice without harm, and every run, event, the task in flight and the
// ledger the release left are read back as the release's server reported
// them, down to the signed checkpoint.
func TestLegacyFixture(t *testing.T) {
	admin := testURL(t)
	m := legacyfixture.Load(t, legacyfixture.PostgresManifest)
	u := loadLegacyDump(t, admin)
	key := filepath.Join(t.TempDir(), "ledger.key")
	legacyfixture.Copy(t, legacyfixture.PostgresKey, key)

	s, err := postgres.Open(t.Context(), u, nil)
	if err != nil {
		t.Fatalf("opening the release's database: %v", err)
	}
	s.Close()
	s, err = postgres.Open(t.Context(), u, nil) // the migrations, again
	if err != nil {
		t.Fatalf("opening the release's database a second time: %v", err)
	}
	t.Cleanup(func() { s.Close() })

	legacyfixture.CheckStore(t, s, m)
	legacyfixture.CheckPinning(t, s)
	ledger, err := oip.New(s, &oip.Options{KeyPath: key})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := ledger.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	legacyfixture.CheckCheckpoint(t, ck, m)
}
