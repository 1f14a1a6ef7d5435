package oip

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/asmp-dev/asmp/protocol"
)

// signedLedger writes rows row-0..row-5 into a SQLite ledger in one server
// lifetime, checked in full by the next start: the start after that checks
// nothing of it and leaves it all to the background pass.
func signedLedger(t *testing.T) (path string, opts *Options) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "asmp.db")
	opts = &Options{KeyPath: filepath.Join(dir, "asmp.db.key")}
	st := openSQLite(t, path)
	svc := newService(t, st, opts)
	dispatchN(t, svc, 0, 6)
	st.Close()
	st = openSQLite(t, path)
	newService(t, st, opts)
	if v, err := st.LedgerVerified(context.Background()); err != nil || v != 6 {
		t.Fatalf("verified size %d %v, want 6", v, err)
	}
	st.Close()
	return path, opts
}

// rewrite rewrites record seq in the SQLite file as an attacker without
// the key would: body, canonical bytes and entry_hash all agree, so only
// the signed root tells.
func rewrite(t *testing.T, path string, seq int, old, repl string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var c []byte
	if err := db.QueryRow(`SELECT canonical FROM ledger WHERE seq = ?`, seq).Scan(&c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c), old) {
		t.Fatalf("record %d holds no %q: %s", seq, old, c)
	}
	c = []byte(strings.Replace(string(c), old, repl, 1))
	sum := sha256.Sum256(c)
	if _, err := db.Exec(`UPDATE ledger SET body = replace(body, ?, ?), canonical = ?, entry_hash = ? WHERE seq = ?`, old, repl, c, hex.EncodeToString(sum[:]), seq); err != nil {
		t.Fatal(err)
	}
}

// A row rewritten consistently in the database before a start is refused
// on its first read, before the background pass reached it: not served,
// not built into a command, not executed, and nothing is appended (no
// attempt, no signed result). Untouched old rows are served meanwhile.
func TestRewrittenRowRefusedBeforeTheFullPass(t *testing.T) {
	path, opts := signedLedger(t)
	rewrite(t, path, 3, `"command":"echo"`, `"command":"rm"`)

	st := openSQLite(t, path)
	exec := &fakeExecutor{}
	var (
		mu       sync.Mutex
		tampered []error
	)
	o := *opts
	o.Executor = exec
	o.OnTamper = func(err error) { mu.Lock(); tampered = append(tampered, err); mu.Unlock() }
	svc := newService(t, st, &o) // no Verify: the background pass has not run
	ctx := context.Background()

	if r, err := svc.Latest(ctx, "row-1"); err != nil || r.Seq != 2 {
		t.Fatalf("an untouched old row before the full pass: %+v %v", r, err)
	}
	if svc.Ready() {
		t.Fatal("the full pass ran; the test needs the window before it")
	}

	h := svc.Handler()
	n := size(t, st)
	r := do(t, h, nil, "POST", "/api/dispatch", dispatchBody("run-1", `{"type":"invocation","object_key":"row-2","input":{"word":"x"},"execute":true}`))
	expectError(t, r, 503, "integrity check")
	if exec.calls.Load() != 0 {
		t.Fatal("the rewritten row was executed")
	}
	if got := size(t, st); got != n {
		t.Fatalf("the refused invocation appended %d records", got-n)
	}
	expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=row-2", ""), 503, "integrity check")
	expectError(t, do(t, h, nil, "POST", "/api/commands/row-2", `{"input":{"word":"x"}}`), 503, "integrity check")
	_, err := svc.Command(ctx, "row-2", map[string]any{"word": "x"})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.EUnavailable {
		t.Fatalf("Command of the rewritten row: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var te *TamperError
	if len(tampered) != 1 || !errors.As(tampered[0], &te) || te.Seq != 3 || !strings.Contains(te.What, "do not make the root signed") {
		t.Fatalf("OnTamper got %v", tampered)
	}
}

// Before the full pass, a record read once and rewritten afterwards, while
// the server runs, is refused on its next read; so is one start-up checked.
func TestRecordRewrittenWhileServingIsRefused(t *testing.T) {
	path, opts := signedLedger(t)
	st := openSQLite(t, path)
	svc := newService(t, st, opts)
	dispatchN(t, svc, 6, 2) // checked at the next start
	st.Close()

	st = openSQLite(t, path)
	var tampered error
	o := *opts
	o.OnTamper = func(err error) { tampered = err }
	svc = newService(t, st, &o)
	ctx := context.Background()
	for _, key := range []string{"row-1", "row-6"} {
		if _, err := svc.Latest(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []int{2, 7} {
		tampered = nil
		rewrite(t, path, seq, "Say it.", "Say no.")
		_, err := svc.Latest(ctx, fmt.Sprintf("row-%d", seq-1))
		var te *TamperError
		if err == nil || !errors.As(tampered, &te) || te.Seq != int64(seq) {
			t.Fatalf("seq %d rewritten while serving: %v, OnTamper %v", seq, err, tampered)
		}
		svc.tamperMu = sync.Once{} // report the next one too
	}
}

// A record whose checkpoints were signed by a key rotated out since cannot
// be proven on its read: the read waits for the full pass, then answers
// from the checked tree; a rewritten one is refused by that pass.
func TestRecordSignedBeforeARotationWaitsForTheFullPass(t *testing.T) {
	path, _ := signedLedger(t)
	rotated := &Options{KeyPath: filepath.Join(t.TempDir(), "new.key"), RotateKey: true, ResetHead: true}
	st := openSQLite(t, path)
	newService(t, st, rotated) // appends the key-rotation record, signed by the new key
	st.Close()
	next := &Options{KeyPath: rotated.KeyPath}

	st = openSQLite(t, path)
	svc := newService(t, st, next)
	if svc.Ready() {
		t.Fatal("ready at start")
	}
	if r, err := svc.Latest(context.Background(), "row-1"); err != nil || r.Seq != 2 {
		t.Fatalf("a record signed by the old key: %+v %v", r, err)
	}
	if !svc.Ready() {
		t.Fatal("the read was answered before the full pass checked it")
	}
	st.Close()

	rewrite(t, path, 3, "Say it.", "Say no.")
	st = openSQLite(t, path)
	var tampered error
	o := *next
	o.OnTamper = func(err error) { tampered = err }
	svc = newService(t, st, &o)
	_, err := svc.Latest(context.Background(), "row-2")
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.EUnavailable || tampered == nil {
		t.Fatalf("a rewritten record signed by the old key: %v, OnTamper %v", err, tampered)
	}
}
