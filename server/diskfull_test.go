package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

// fullDisk is a store whose writes fail with ENOSPC while full is set.
type fullDisk struct {
	store.Store
	full atomic.Bool
}

func (f *fullDisk) CreateRun(ctx context.Context, c store.Commit) error {
	if f.full.Load() {
		return fmt.Errorf("sqlite: create run: write asmp.db-wal: %w", syscall.ENOSPC)
	}
	return f.Store.CreateRun(ctx, c)
}

// A full disk answers 507 with a hint (not a generic 500, and without the
// cause), and /readyz is not ready until a write succeeds again.
func TestDiskFull(t *testing.T) {
	disk := &fullDisk{Store: memstore.New()}
	e := start(t, setup{newStor: func(*testing.T) store.Store { return disk }})
	e.startRun("")
	if r := e.do("GET", "/readyz", nil); r.status != 200 {
		t.Fatalf("readyz before: %d %s", r.status, r.body)
	}
	disk.full.Store(true)
	r := e.do("POST", "/runs", nil)
	if h := r.hint(t); r.status != 507 || !strings.Contains(h, "disk is full") || strings.Contains(string(r.body), "ENOSPC") || strings.Contains(string(r.body), "wal") {
		t.Fatalf("a write on a full disk: %d %s", r.status, r.body)
	}
	if m := r.json(t); m["error"] != "insufficient_storage" {
		t.Fatalf("507 body: %s", r.body)
	}
	r = e.do("GET", "/readyz", nil)
	if h := r.hint(t); r.status != 503 || !strings.Contains(h, "disk was full") {
		t.Fatalf("readyz while full: %d %s", r.status, r.body)
	}
	// Reads still work and do not make the server ready.
	e.do("GET", "/workflows", nil)
	if r := e.do("GET", "/readyz", nil); r.status != 503 {
		t.Fatalf("readyz after a read: %d", r.status)
	}
	disk.full.Store(false)
	e.startRun("")
	if r := e.do("GET", "/readyz", nil); r.status != 200 {
		t.Fatalf("readyz once writes succeed: %d %s", r.status, r.body)
	}
}
