package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/server"
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

func (f *fullDisk) CommitRun(ctx context.Context, expected int64, c store.Commit) store.Pending {
	if f.full.Load() {
		return store.Settled(fmt.Errorf("sqlite: commit: write asmp.db-wal: %w", syscall.ENOSPC))
	}
	return f.Store.CommitRun(ctx, expected, c)
}

func (f *fullDisk) AppendLedgerSigned(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error), sign store.LedgerSigner) (store.LedgerRecord, store.LedgerCheckpoint, error) {
	if f.full.Load() {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, fmt.Errorf("sqlite: append: write asmp.db-wal: %w", syscall.ENOSPC)
	}
	return f.Store.AppendLedgerSigned(ctx, key, build, sign)
}

// A full disk answers 507 with a hint (not a generic 500, and without the
// cause), and /readyz is not ready until a write succeeds again.
func TestDiskFull(t *testing.T) {
	disk := &fullDisk{Store: memstore.New()}
	ledger, err := oip.New(disk, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{newStor: func(*testing.T) store.Store { return disk }, opts: &server.Options{API: ledger.API()}})
	run := e.startRun("config-wizard-v1")
	if r := e.do("GET", "/readyz", nil); r.status != 200 {
		t.Fatalf("readyz before: %d %s", r.status, r.body)
	}
	disk.full.Store(true)
	// Every kind of write: a new run, a transition, a ledger record.
	for _, w := range []struct {
		path string
		body any
	}{
		{"/runs", nil},
		{"/runs/" + run.RunID + "/transitions/start", nil},
		{"/api/dispatch", map[string]any{"key": "echo", "body": map[string]any{"type": "directory_row", "command": "echo", "description": "Echo."}}},
	} {
		r := e.do("POST", w.path, w.body)
		if h := r.hint(t); r.status != 507 || !strings.Contains(h, "disk is full") || strings.Contains(string(r.body), "ENOSPC") || strings.Contains(string(r.body), "wal") {
			t.Fatalf("POST %s on a full disk: %d %s", w.path, r.status, r.body)
		}
		if m := r.json(t); m["error"] != "insufficient_storage" {
			t.Fatalf("507 body: %s", r.body)
		}
	}
	if f, err := disk.GetRun(t.Context(), run.RunID); err != nil || f.State != "INITIAL" {
		t.Fatalf("the run after a refused transition: %+v %v", f, err)
	}
	r := e.do("GET", "/readyz", nil)
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
	// The refused writes left nothing half done: the same ones succeed now.
	if r := e.do("POST", "/runs/"+run.RunID+"/transitions/start", nil); r.status != 200 {
		t.Fatalf("the transition once the disk has room: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/dispatch", map[string]any{"key": "echo", "body": map[string]any{"type": "directory_row", "command": "echo", "description": "Echo."}}); r.status != 201 {
		t.Fatalf("the dispatch once the disk has room: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/readyz", nil); r.status != 200 {
		t.Fatalf("readyz once writes succeed: %d %s", r.status, r.body)
	}
}
