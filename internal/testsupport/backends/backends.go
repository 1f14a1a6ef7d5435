// Package backends opens every Store backend for tests above the store
// (the engine's timers, retries and schedules; the server's black-box
// tests): the in-memory store, SQLite in a test's temporary directory, and
// PostgreSQL in a fresh schema of the server ASMP_TEST_POSTGRES names.
//
// Without ASMP_TEST_POSTGRES the Postgres backend is skipped locally and
// fails the test in CI (CI set), where skipping would hide it; -short
// skips it too.
package backends

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/sqlite"
)

// Backend is one store backend a test runs on.
type Backend struct {
	// Name is memory, sqlite or postgres.
	Name string
	// Durable is true for the backends that keep their data across a
	// reopen (sqlite, postgres).
	Durable bool
	// New returns a place for the test's data (a file, a schema), made
	// fresh for each call and removed when the test ends.
	New func(t testing.TB) Place
}

// Place is where one test's data lives; Open opens a store on it, as many
// times as the test wants (each is closed when the test ends, or by the
// test): a reopen after Close sees what was committed, for the durable
// backends, and two stores open at once share the data (Postgres; SQLite
// allows one process, so a second Open of the same file waits for or
// refuses it). The in-memory backend's Open always returns the same store.
type Place interface {
	Open(t testing.TB) store.Store
}

// All returns the three backends.
func All() []Backend {
	return []Backend{
		{Name: "memory", New: func(testing.TB) Place { return &memPlace{s: memstore.New()} }},
		{Name: "sqlite", Durable: true, New: func(t testing.TB) Place {
			return sqlitePlace(filepath.Join(t.TempDir(), "asmp.db"))
		}},
		{Name: "postgres", Durable: true, New: func(t testing.TB) Place {
			u := URL(t)
			return pgPlace{url: u, schema: freshSchema(t, u)}
		}},
	}
}

// Each runs f as a subtest on every backend.
func Each(t *testing.T, f func(t *testing.T, b Backend)) {
	for _, b := range All() {
		t.Run(b.Name, func(t *testing.T) { f(t, b) })
	}
}

type memPlace struct{ s *memstore.Store }

func (p *memPlace) Open(testing.TB) store.Store { return p.s }

type sqlitePlace string

func (p sqlitePlace) Open(t testing.TB) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), string(p), nil)
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type pgPlace struct{ url, schema string }

func (p pgPlace) Open(t testing.TB) store.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), p.url, &postgres.Options{Schema: p.schema})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// URL returns the server ASMP_TEST_POSTGRES names, skipping (locally) or
// failing (in CI) the test without it.
func URL(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the Postgres backend needs a server (scripts/test starts one)")
	}
	if u := os.Getenv("ASMP_TEST_POSTGRES"); u != "" {
		return u
	}
	if os.Getenv("CI") != "" {
		t.Fatal(`ASMP_TEST_POSTGRES is not set, and CI is: start a server first with eval "$(scripts/postgres-up | tail -n1)"`)
	}
	t.Skip(`ASMP_TEST_POSTGRES is not set; run eval "$(scripts/postgres-up | tail -n1)" to test on Postgres`)
	return ""
}

// freshSchema returns a new schema name, dropped when the test ends (after
// the stores opened on it are closed: cleanups run last-registered first).
func freshSchema(t testing.TB, u string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "asmp_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}
