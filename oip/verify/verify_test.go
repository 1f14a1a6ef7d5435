package verify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/oip/wire"
	"github.com/asmp-dev/asmp/store/memstore"
)

// ledger serves a Service's answers as verify.Ledger, with knobs to lie.
type ledger struct {
	svc      *oip.Service
	key      string // the key LedgerKey answers
	keyCalls int
	noNote   bool // serve proofs without their checkpoint
	tamper   func(*wire.Record)
}

func (l *ledger) Receipt(ctx context.Context, invID string) (*wire.Record, error) {
	r, err := l.svc.Record(ctx, invID)
	if err != nil {
		return nil, err
	}
	if l.tamper != nil {
		l.tamper(&r)
	}
	return &r, nil
}

func (l *ledger) Proof(ctx context.Context, invID string, treeSize int64) (*wire.Proof, error) {
	p, err := l.svc.Proof(ctx, invID, treeSize)
	if l.noNote {
		p.Checkpoint = ""
	}
	return &p, err
}

func (l *ledger) LedgerKey(ctx context.Context) (string, string, error) {
	l.keyCalls++
	return l.key, l.svc.Origin(), nil
}

func newLedger(t *testing.T) (*ledger, string) {
	t.Helper()
	svc, err := oip.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := svc.Dispatch(ctx, "row", json.RawMessage(`{"type":"directory_row","command":"echo","args":[{"name":"text","type":"string","required":true}]}`)); err != nil {
		t.Fatal(err)
	}
	first, err := svc.Dispatch(ctx, "say-1", json.RawMessage(`{"type":"invocation","object_key":"row","input":{"text":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	// A replay, so that the first invocation's record carries replayed_by.
	if _, err := svc.Dispatch(ctx, "say-2", json.RawMessage(`{"type":"invocation","object_key":"row","input":{"text":"hi"},"replay_of":"`+first.InvID+`"}`)); err != nil {
		t.Fatal(err)
	}
	return &ledger{svc: svc, key: svc.VerifierKey()}, first.InvID
}

func TestReceiptFrom(t *testing.T) {
	ctx := t.Context()
	l, invID := newLedger(t)
	other, _ := newLedger(t)

	rec, p, err := verify.ReceiptFrom(ctx, l, invID, "")
	if err != nil || rec.InvID != invID || len(rec.ReplayedBy) != 1 || p.TreeSize != 3 || l.keyCalls != 1 {
		t.Fatalf("with the server's key: %+v %+v %v (key asked %d times)", rec, p, err, l.keyCalls)
	}

	// A pinned key is used as given; the server is not asked for one.
	l.keyCalls, l.key = 0, other.svc.VerifierKey()
	if _, _, err := verify.ReceiptFrom(ctx, l, invID, l.svc.VerifierKey()); err != nil || l.keyCalls != 0 {
		t.Fatalf("with a pinned key: %v (key asked %d times)", err, l.keyCalls)
	}
	if _, _, err := verify.ReceiptFrom(ctx, l, invID, other.svc.VerifierKey()); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("a checkpoint signed by another key verified: %v", err)
	}
	l.key = l.svc.VerifierKey()

	// A record that differs from what was hashed.
	l.tamper = func(r *wire.Record) { r.Source = "someone else" }
	if _, _, err := verify.ReceiptFrom(ctx, l, invID, ""); err == nil || !strings.Contains(err.Error(), "entry_hash") {
		t.Fatalf("a tampered record verified: %v", err)
	}
	l.tamper = nil

	// A proof without its signed checkpoint proves nothing.
	l.noNote = true
	if _, _, err := verify.ReceiptFrom(ctx, l, invID, ""); err == nil || !strings.Contains(err.Error(), "no signed checkpoint") {
		t.Fatalf("a proof without a checkpoint: %v", err)
	}
	l.noNote = false

	// Errors of the server pass through.
	if _, _, err := verify.ReceiptFrom(ctx, l, "inv_01AAAAAAAAAAAAAAAAAAAAAAAA", ""); err == nil {
		t.Fatal("an unknown receipt verified")
	}
}

// DecodeCanonical undoes CanonicalJSON: every hashed field comes back, a
// null supersedes as "", and EntryHash is the hash of the bytes.
func TestDecodeCanonicalUndoesCanonicalJSON(t *testing.T) {
	for _, r := range []wire.Record{
		{InvID: "inv_A", Seq: 1, Key: "k", Type: "directory_row", Body: json.RawMessage(`{"b":1,"a":[true,null]}`), Timestamp: "2026-01-02T03:04:05.678Z", Source: "alice"},
		{InvID: "inv_B", Seq: 7, Key: "k", Type: "invocation_result", Body: json.RawMessage(`{}`), Timestamp: "2026-01-02T03:04:05.679Z", Source: "bob", Supersedes: "inv_A", ResultOf: "inv_C", ReplayOf: "inv_D"},
	} {
		c, err := verify.CanonicalJSON(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := verify.DecodeCanonical(c)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := verify.EntryHash(r)
		again, _ := verify.CanonicalJSON(got)
		if got.EntryHash != want || string(again) != string(c) || got.InvID != r.InvID || got.Seq != r.Seq || got.Key != r.Key || got.Type != r.Type ||
			got.Timestamp != r.Timestamp || got.Source != r.Source || got.Supersedes != r.Supersedes || got.ResultOf != r.ResultOf || got.ReplayOf != r.ReplayOf {
			t.Fatalf("DecodeCanonical(%s) = %+v", c, got)
		}
	}
	if _, err := verify.DecodeCanonical([]byte(`{"seq":"one"}`)); err == nil {
		t.Fatal("a record whose seq is not a number decoded")
	}
}
