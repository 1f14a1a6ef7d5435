package oip

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// readLedger is a SQLite ledger of two directory rows and an invocation,
// with raw SQL access to its file (an attacker's write access while the
// server runs).
type readLedger struct {
	svc      *Service
	st       store.Store
	db       *sql.DB
	tampered error
	rows     []Receipt // row-0, row-1
	inv      Receipt   // an invocation of row-0
}

func newReadLedger(t *testing.T) *readLedger {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	l := &readLedger{st: openSQLite(t, path)}
	l.svc = newService(t, l.st, &Options{OnTamper: func(err error) { l.tampered = err }})
	l.rows = dispatchN(t, l.svc, 0, 2)
	var err error
	if l.inv, err = l.svc.Dispatch(context.Background(), "inv-1", json.RawMessage(`{"type":"invocation","object_key":"row-0","input":{"word":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	if l.db, err = sql.Open("sqlite", path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.db.Close() })
	return l
}

func (l *readLedger) exec(t *testing.T, stmt string, args ...any) {
	t.Helper()
	if _, err := l.db.Exec(stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// Every read that serves or runs a record checks it against its stored
// canonical bytes: a record whose body (or any other column) was edited
// in the database is refused with the tamper error, never served or run,
// and the server is stopped (OnTamper).
func TestEveryReadChecksTheRecord(t *testing.T) {
	editBody := func(seq int64) func(t *testing.T, l *readLedger) {
		return func(t *testing.T, l *readLedger) {
			l.exec(t, `UPDATE ledger SET body = replace(replace(body, 'Say it.', 'Say no.'), '"x"', '"rm -rf"') WHERE seq = ?`, seq)
		}
	}
	column := func(seq int64, col, value string) func(t *testing.T, l *readLedger) {
		return func(t *testing.T, l *readLedger) {
			l.exec(t, `UPDATE ledger SET `+col+` = ? WHERE seq = ?`, value, seq)
		}
	}
	records := func(t *testing.T, l *readLedger) error {
		r := do(t, l.svc.Handler(), nil, "GET", "/api/ledger/records", "")
		if r.Code != 503 {
			t.Errorf("GET /api/ledger/records: %d %s", r.Code, r.Body)
		}
		_, err := l.svc.Records(context.Background(), 0, 0)
		return err
	}
	pinned := func(t *testing.T, l *readLedger) error {
		n := size(t, l.st)
		_, _, _, err := NewInvoker(l.svc).InvokeRow(context.Background(), engine.RowCall{Key: "row-1@" + l.rows[1].InvID, Input: map[string]any{"word": "x"}, RunID: "r", Tool: "t", Actor: "alice"})
		if size(t, l.st) != n {
			t.Error("an invocation of the edited row was recorded")
		}
		return err
	}
	ensure := func(t *testing.T, l *readLedger) error {
		_, _, err := l.svc.EnsureRow(context.Background(), "row-1", json.RawMessage(simpleRow))
		return err
	}
	replay := func(t *testing.T, l *readLedger) error {
		_, err := l.svc.Dispatch(context.Background(), "inv-2", json.RawMessage(`{"type":"invocation","object_key":"row-0","input":{"word":"x"},"replay_of":"`+l.inv.InvID+`"}`))
		return err
	}
	record := func(id int) func(t *testing.T, l *readLedger) error {
		return func(t *testing.T, l *readLedger) error {
			ids := append([]Receipt{}, l.rows...)
			_, err := l.svc.Record(context.Background(), append(ids, l.inv)[id].InvID)
			return err
		}
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, l *readLedger)
		read   func(t *testing.T, l *readLedger) error
		seq    int64
		want   string
	}{
		{"the record list, an edited body", editBody(2), records, 2, "differs from the bytes it was written with (an edited body)"},
		{"a pinned row, an edited body", editBody(2), pinned, 2, "an edited body"},
		{"a pinned row, an edited type", column(2, "type", "invocation"), pinned, 2, "its type differs"},
		{"EnsureRow, an edited body", editBody(2), ensure, 2, "an edited body"},
		{"a replayed invocation, an edited body", editBody(3), replay, 3, "an edited body"},
		{"a record, an edited source", column(1, "source", "root"), record(0), 1, "its source differs"},
		{"a record, an edited key", column(1, "key", "row-9"), record(0), 1, "its key differs"},
		{"a record, an edited timestamp", column(1, "timestamp", "0"), record(0), 1, "its timestamp differs"},
		{"a record, an edited supersedes", column(2, "supersedes", "inv_X"), record(1), 2, "its supersedes differs"},
		{"a record, an edited entry_hash", column(1, "entry_hash", strings.Repeat("ab", 32)), record(0), 1, "its entry_hash differs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newReadLedger(t)
			c.tamper(t, l)
			err := c.read(t, l)
			var te *TamperError
			if protocol.ErrorCode(err) != protocol.EUnavailable || !errors.As(err, &te) || te.Seq != c.seq || !strings.Contains(te.What, c.want) {
				t.Fatalf("read = %v; want the tamper error of seq %d, %q", err, c.seq, c.want)
			}
			if !errors.As(l.tampered, &te) {
				t.Fatalf("OnTamper got %v", l.tampered)
			}
		})
	}
}

// What is served is what the stored canonical bytes say: a body column
// that matches them in another member order (as an earlier release stored
// bodies) is served in the order of the bytes.
func TestServedFromTheCanonicalBytes(t *testing.T) {
	l := newReadLedger(t)
	var canon []byte
	if err := l.db.QueryRow(`SELECT canonical FROM ledger WHERE seq = 1`).Scan(&canon); err != nil {
		t.Fatal(err)
	}
	l.exec(t, `UPDATE ledger SET body = ? WHERE seq = 1`, simpleRow) // as sent: "type" first
	r, err := l.svc.Record(context.Background(), l.rows[0].InvID)
	if err != nil {
		t.Fatal(err)
	}
	if want := canonicalBody(canon); string(r.Body) != string(want) || string(r.Body) == simpleRow {
		t.Fatalf("served body %s, want the canonical bytes' %s", r.Body, want)
	}
	if l.tampered != nil {
		t.Fatalf("a body stored in another member order was taken for tampering: %v", l.tampered)
	}
}

// The current version of a key is its newest record in the ledger itself:
// pointing the file's ledger_heads at an older version (a quiet rollback
// of a row) changes nothing that is served, built or run.
func TestAnEditedHeadServesNoOlderVersion(t *testing.T) {
	l := newReadLedger(t)
	newer, err := l.svc.Dispatch(context.Background(), "row-0", json.RawMessage(strings.Replace(simpleRow, "Say it.", "Say it twice.", 1)))
	if err != nil {
		t.Fatal(err)
	}
	l.exec(t, `UPDATE ledger_heads SET seq = 1 WHERE key = 'row-0'`)
	latest, err := l.svc.Latest(context.Background(), "row-0")
	if err != nil || latest.InvID != newer.InvID {
		t.Fatalf("Latest(row-0) = %s, %v; want the newer version %s", latest.InvID, err, newer.InvID)
	}
	page, err := l.svc.Directory(context.Background(), "", 0)
	if err != nil || len(page.Rows) != 2 || page.Rows[0].Key != "row-0" || page.Rows[0].InvID != newer.InvID || page.Rows[0].Description != "Say it twice." {
		t.Fatalf("Directory = %+v, %v; want row-0 at its newer version", page, err)
	}
	cmd, err := l.svc.Command(context.Background(), "row-0", map[string]any{"word": "x"})
	if err != nil || cmd.Line != "echo x" {
		t.Fatalf("Command = %+v, %v", cmd, err)
	}
	// A dispatch supersedes the newest version, not the head's.
	third, err := l.svc.Dispatch(context.Background(), "row-0", json.RawMessage(simpleRow))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := l.svc.Record(context.Background(), third.InvID)
	if err != nil || rec.Supersedes != newer.InvID {
		t.Fatalf("the next version supersedes %q (%v), want %s", rec.Supersedes, err, newer.InvID)
	}
}

// forge inserts into the file a well-formed record of seq after the last
// one (its bytes, entry_hash and columns consistent, but no checkpoint
// covers it: an attacker has no signing key) and returns its inv_ID.
func (l *readLedger) forge(t *testing.T, seq int64) string {
	t.Helper()
	r, err := l.svc.template(context.Background(), "row-9", TypeDirectoryRow, []byte(simpleRow))
	if err != nil {
		t.Fatal(err)
	}
	r.Seq = seq
	var canon []byte
	if r.EntryHash, _, canon, err = hashes(r); err != nil {
		t.Fatal(err)
	}
	ts, _ := parseTime(r.Timestamp)
	l.exec(t, `INSERT INTO ledger (seq, inv_id, key, type, body, timestamp, source, entry_hash, supersedes, result_of, replay_of, canonical) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', '', '', ?)`,
		r.Seq, r.InvID, r.Key, r.Type, string(canonicalBody(canon)), ts.UnixNano(), r.Source, r.EntryHash, canon)
	l.exec(t, `INSERT INTO ledger_heads (key, seq, type) VALUES (?, ?, ?)`, r.Key, r.Seq, r.Type)
	return r.InvID
}

// Under a running server, a record inserted after the newest checkpoint
// is neither served nor signed: reading it, or appending after it, stops
// the server with the seq named.
func TestAnInsertedRecordIsNeitherServedNorSigned(t *testing.T) {
	for name, read := range map[string]func(l *readLedger, id string) error{
		"its receipt": func(l *readLedger, id string) error { _, err := l.svc.Record(context.Background(), id); return err },
		"the key": func(l *readLedger, id string) error {
			_, err := l.svc.Latest(context.Background(), "row-9")
			return err
		},
		"an append after it": func(l *readLedger, id string) error {
			_, err := l.svc.Dispatch(context.Background(), "row-10", json.RawMessage(simpleRow))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := newReadLedger(t)
			id := l.forge(t, 4)
			err := read(l, id)
			var te *TamperError
			if err == nil || !errors.As(err, &te) || te.Seq != 4 || !errors.As(l.tampered, &te) {
				t.Fatalf("read = %v (OnTamper %v); want the tamper error of seq 4", err, l.tampered)
			}
			var cps int
			if err := l.db.QueryRow(`SELECT COUNT(*) FROM ledger_checkpoints WHERE tree_size > 3`).Scan(&cps); err != nil || cps != 0 {
				t.Fatalf("%d checkpoints beyond the signed tree (%v)", cps, err)
			}
		})
	}
}

// Under a running server, removing the newest records (with or without
// their checkpoints) is seen by the next read or append: a receipt handed
// out is never answered 404, an older version is never served as the
// current one, and no seq is issued again.
func TestRemovedRecordsAreSeenByReadsAndAppends(t *testing.T) {
	for name, c := range map[string]struct {
		remove string
		read   func(l *readLedger) error
	}{
		"the last record, a receipt": {`DELETE FROM ledger WHERE seq = 3`, func(l *readLedger) error {
			_, err := l.svc.Record(context.Background(), l.inv.InvID)
			return err
		}},
		"the last record, an append": {`DELETE FROM ledger WHERE seq = 3`, func(l *readLedger) error {
			_, err := l.svc.Dispatch(context.Background(), "row-5", json.RawMessage(simpleRow))
			return err
		}},
		"records and checkpoints, the directory": {`DELETE FROM ledger WHERE seq >= 2; DELETE FROM ledger_checkpoints WHERE tree_size >= 2`, func(l *readLedger) error {
			_, err := l.svc.Directory(context.Background(), "", 0)
			return err
		}},
		"records and checkpoints, the record list": {`DELETE FROM ledger WHERE seq >= 2; DELETE FROM ledger_checkpoints WHERE tree_size >= 2`, func(l *readLedger) error {
			_, err := l.svc.Records(context.Background(), 0, 0)
			return err
		}},
		"records and checkpoints, a key": {`DELETE FROM ledger WHERE seq >= 2; DELETE FROM ledger_checkpoints WHERE tree_size >= 2`, func(l *readLedger) error {
			_, err := l.svc.Latest(context.Background(), "row-0")
			return err
		}},
	} {
		t.Run(name, func(t *testing.T) {
			l := newReadLedger(t)
			l.exec(t, c.remove)
			err := c.read(l)
			var te *TamperError
			if err == nil || !errors.As(err, &te) || !errors.As(l.tampered, &te) {
				t.Fatalf("read = %v (OnTamper %v); want a tamper error", err, l.tampered)
			}
			var n int64
			if err := l.db.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM ledger`).Scan(&n); err != nil || n > 2 {
				t.Fatalf("the ledger ends at %d after the refusal (%v): a seq was issued again", n, err)
			}
		})
	}
}

// The scopes a dispatcher held are kept beside the ledger, signed by the
// server: granting a dispatcher exec by editing the table in the file
// does not let workflows run its row version.
func TestEditedDispatcherScopesGrantNothing(t *testing.T) {
	l := newReadLedger(t)
	ctx := context.Background()
	dispatch := func(key string, scopes ...string) store.LedgerRecord {
		t.Helper()
		pctx := auth.WithPrincipal(ctx, auth.Principal{Name: "p-" + key, Scopes: scopes})
		rc, err := l.svc.Dispatch(pctx, key, json.RawMessage(simpleRow))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := l.st.LedgerRecord(ctx, rc.InvID)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	mayRun := func(rec store.LedgerRecord) bool {
		t.Helper()
		ok, _, err := l.svc.mayRunForWorkflow(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	execRow := dispatch("exec-row", auth.ScopeRead, auth.ScopeDispatch, auth.ScopeExec)
	plain := dispatch("plain-row", auth.ScopeRead, auth.ScopeDispatch)
	if !mayRun(execRow) || mayRun(plain) {
		t.Fatalf("before any edit: exec holder's row %v, dispatch-only row %v", mayRun(execRow), mayRun(plain))
	}
	// Granting exec in the file: with the old signature, and without one.
	var recorded string
	if err := l.db.QueryRow(`SELECT scopes FROM ledger_scopes WHERE inv_id = ?`, plain.InvID).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	for _, forged := range []string{
		strings.Replace(recorded, "dispatch,", "dispatch,exec,", 1),
		"read,dispatch,exec",
	} {
		l.exec(t, `UPDATE ledger_scopes SET scopes = ? WHERE inv_id = ?`, forged, plain.InvID)
		if mayRun(plain) {
			t.Fatalf("scopes edited to %q let a workflow run the row", forged)
		}
	}
	// Another record's signed scopes copied over do not fit this record.
	var signed string
	if err := l.db.QueryRow(`SELECT scopes FROM ledger_scopes WHERE inv_id = ?`, execRow.InvID).Scan(&signed); err != nil {
		t.Fatal(err)
	}
	l.exec(t, `UPDATE ledger_scopes SET scopes = ? WHERE inv_id = ?`, signed, plain.InvID)
	if mayRun(plain) {
		t.Fatal("another record's signed scopes let a workflow run the row")
	}
}

// The index of each key's latest record is outside the tree: the full
// check (and so `asmp ledger check` and the background pass) compares it
// with the ledger, so an entry removed or retyped to hide a row is found.
func TestEditedHeadsAreFoundByTheFullCheck(t *testing.T) {
	for name, edit := range map[string]string{
		"an entry removed":       `DELETE FROM ledger_heads WHERE key = 'row-1'`,
		"an entry retyped":       `UPDATE ledger_heads SET type = 'invocation' WHERE key = 'row-0'`,
		"an entry for no record": `INSERT INTO ledger_heads (key, seq, type) VALUES ('ghost', 2, 'directory_row')`,
	} {
		t.Run(name, func(t *testing.T) {
			l := newReadLedger(t)
			if rep, err := Check(context.Background(), l.st, nil); err != nil || !rep.OK {
				t.Fatalf("before the edit: %+v %v", rep, err)
			}
			l.exec(t, edit)
			rep, err := Check(context.Background(), l.st, nil)
			var te *TamperError
			if err == nil || rep.OK || !errors.As(err, &te) || !strings.Contains(te.What, "ledger_heads") {
				t.Fatalf("after the edit: %+v %v", rep, err)
			}
		})
	}
}

// A record with a seq below 1 is outside every range the checks walk: it
// is refused when read, and the full check finds it.
func TestARecordBelowSeqOneIsRefused(t *testing.T) {
	for _, seq := range []int64{0, -5} {
		l := newReadLedger(t)
		id := l.forge(t, seq)
		_, err := l.svc.Record(context.Background(), id)
		var te *TamperError
		if err == nil || !errors.As(err, &te) || te.Seq != seq || protocol.ErrorCode(err) != protocol.EUnavailable {
			t.Fatalf("seq %d: read = %v; want the tamper error", seq, err)
		}
		if _, err := l.svc.Latest(context.Background(), "row-9"); err == nil {
			t.Fatalf("seq %d: the key's forged record was served", seq)
		}
		if rep, err := Check(context.Background(), l.st, nil); err == nil || rep.OK {
			t.Fatalf("seq %d: the full check passed: %+v", seq, rep)
		}
	}
}
