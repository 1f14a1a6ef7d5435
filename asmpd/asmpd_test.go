package asmpd_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/asmpd"
	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/store"
)

func open(t *testing.T, cfg asmpd.Config) *asmpd.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	d, err := asmpd.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// A busy address is reported (as EADDRINUSE, for the caller to explain)
// before anything is created: no database, no signing key.
func TestBusyAddressCreatesNothing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db := filepath.Join(t.TempDir(), "busy.db")
	_, err = asmpd.Open(context.Background(), asmpd.Config{Addr: ln.Addr().String(), DB: db})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Open on a busy address = %v, want EADDRINUSE", err)
	}
	if left, _ := filepath.Glob(db + "*"); len(left) != 0 {
		t.Fatalf("a refused Open created %v", left)
	}
}

// An Open that fails after binding closes what it opened: the address
// is free again.
func TestFailedOpenReleasesTheAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	notADB := t.TempDir() // a directory: SQLite cannot open it
	if _, err := asmpd.Open(context.Background(), asmpd.Config{Addr: addr, DB: notADB}); err == nil {
		t.Fatal("Open on a directory as the database succeeded")
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is still bound after a failed Open: %v", err)
	}
	ln.Close()
}

// Token names that name the server's own actions are refused (a token
// named asmp-serve would dispatch rows that run as the server's own).
func TestReservedTokenNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"asmp-serve", "task"} {
		tokens, err := auth.NewTokens([]string{name + "=a-secret-of-24-characters"}, "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = asmpd.Open(context.Background(), asmpd.Config{Addr: "127.0.0.1:0", Tokens: tokens})
		if err == nil || !strings.Contains(err.Error(), "is reserved") {
			t.Fatalf("token %s: Open = %v, want it refused as reserved", name, err)
		}
	}
}

// What the server does by its store comes from the store's own answer:
// a SQLite file commits in groups and survives a restart, beside its
// signing key; memory does neither.
func TestCapabilitiesComeFromTheStore(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "caps.db")
	d := open(t, asmpd.Config{DB: db, Workflows: examples.All()})
	if got, want := d.Capabilities(), (store.Capabilities{Durable: true, GroupCommit: true}); got != want {
		t.Fatalf("SQLite: Capabilities = %+v, want %+v", got, want)
	}
	if d.StoreInfo().KeyPath != db+".key" {
		t.Fatalf("SQLite: key path %q, want %q", d.StoreInfo().KeyPath, db+".key")
	}
	if _, err := os.Stat(db + ".key"); err != nil {
		t.Fatalf("the signing key beside the database: %v", err)
	}
	m := open(t, asmpd.Config{Workflows: examples.All()})
	if got := m.Capabilities(); got != (store.Capabilities{}) {
		t.Fatalf("memory: Capabilities = %+v, want none", got)
	}
}

// Workflows of one's own are served without the examples' rows; no
// Workflows serves the examples and dispatches their rows.
func TestExampleRowsOnlyWithTheExamples(t *testing.T) {
	t.Parallel()
	own := open(t, asmpd.Config{Workflows: examples.All()})
	if n, err := own.Ledger().Size(t.Context()); err != nil || n != 0 {
		t.Fatalf("own workflows: ledger size %d, %v; want 0", n, err)
	}
	if got := len(own.Engine().Workflows()); got != 2 {
		t.Fatalf("own workflows: %d served, want 2", got)
	}
	ex := open(t, asmpd.Config{})
	if n, err := ex.Ledger().Size(t.Context()); err != nil || n == 0 {
		t.Fatalf("the examples: ledger size %d, %v; want their rows", n, err)
	}
}

// A negative retention, of runs or of webhook deliveries, is refused
// before anything is opened, with the way to keep everything.
func TestNegativeRetentionsRefused(t *testing.T) {
	t.Parallel()
	for _, cfg := range []asmpd.Config{{Retention: -time.Second}, {WebhookRetention: -time.Second}} {
		cfg.Addr, cfg.DB = "127.0.0.1:0", ":memory:"
		if _, err := asmpd.Open(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "or 0 to keep every") {
			t.Errorf("Open with %+v = %v, want it refused", cfg, err)
		}
	}
}
