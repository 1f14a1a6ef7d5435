package verify_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/oip/wire"
	"github.com/asmp-dev/asmp/store/memstore"
)

// genuine is a ledger of five records with one record's receipt evidence
// and a consistency proof between two checkpoints, all valid.
type genuine struct {
	rec        wire.Record
	proof      wire.Proof
	note       []byte
	key        string
	cons       wire.ConsistencyProof
	oldN, newN []byte
}

func newGenuine(t *testing.T) genuine {
	t.Helper()
	ctx := t.Context()
	svc, err := oip.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		rc, err := svc.Dispatch(ctx, k, json.RawMessage(`{"type":"directory_row","command":"echo"}`))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rc.InvID)
	}
	rec, err := svc.Record(ctx, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	rec.ReplayedBy = nil
	p, err := svc.Proof(ctx, ids[2], 5)
	if err != nil {
		t.Fatal(err)
	}
	old, err := svc.Proof(ctx, ids[0], 3)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := svc.Consistency(ctx, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	g := genuine{rec: rec, proof: p, note: []byte(p.Checkpoint), key: svc.VerifierKey(), cons: cons, oldN: []byte(old.Checkpoint), newN: []byte(cons.Checkpoint)}
	if err := verify.Receipt(g.rec, g.proof, g.note, g.key); err != nil {
		t.Fatalf("the genuine receipt: %v", err)
	}
	if err := verify.Consistency(g.cons); err != nil {
		t.Fatalf("the genuine consistency proof: %v", err)
	}
	if err := verify.CheckpointConsistency(g.cons, g.oldN, g.newN, g.key); err != nil {
		t.Fatalf("the genuine checkpoints: %v", err)
	}
	return g
}

// Every check of Receipt refuses its own forgery, with its own reason.
func TestReceiptRefusesEachForgery(t *testing.T) {
	g := newGenuine(t)
	other, err := oip.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(h string) string { // another valid hex hash
		b, _ := hex.DecodeString(h)
		b[0] ^= 1
		return hex.EncodeToString(b)
	}
	rehash := func(r *wire.Record) { r.EntryHash, _ = verify.EntryHash(*r) }
	cases := []struct {
		name string
		rec  func(*wire.Record)
		p    func(*wire.Proof)
		note func([]byte) []byte
		key  string
		want string
	}{
		{name: "a body that is not JSON", rec: func(r *wire.Record) { r.Body = json.RawMessage(`{`) }, want: "encode record"},
		{name: "an edited record", rec: func(r *wire.Record) { r.Key = "z" }, want: "does not match its content"},
		{name: "a proof of another entry_hash", p: func(p *wire.Proof) { p.EntryHash = flip(p.EntryHash) }, want: "proof is for entry_hash"},
		{name: "a proof of another inv_ID", p: func(p *wire.Proof) { p.InvID = "inv_other" }, want: "proof is for inv_other"},
		{name: "a record of seq 0", rec: func(r *wire.Record) { r.Seq = 0; rehash(r) }, p: func(p *wire.Proof) { p.EntryHash = "" }, want: "the record's seq is 0"},
		{name: "a proof of another leaf", p: func(p *wire.Proof) { p.LeafIndex++ }, want: "proof is for leaf 3"},
		{name: "a proof of another leaf hash", p: func(p *wire.Proof) { p.LeafHash = flip(p.LeafHash) }, want: "leaf hash"},
		{name: "a checkpoint signed by another key", key: other.VerifierKey(), want: "checkpoint signature"},
		{name: "an unsigned checkpoint", note: func(n []byte) []byte { return []byte(strings.SplitN(string(n), "\n\n", 2)[0] + "\n") }, want: "checkpoint signature"},
		{name: "a proof of another tree size", p: func(p *wire.Proof) { p.TreeSize = 4 }, want: "proof is for tree size 4"},
		{name: "a proof of another root", p: func(p *wire.Proof) { p.RootHash = flip(p.RootHash) }, want: "is not the checkpoint's"},
		{name: "a proof hash that is not hex", p: func(p *wire.Proof) { p.Proof[0] = "zz" }, want: "is not a hex SHA-256 hash"},
		{name: "a forged proof hash", p: func(p *wire.Proof) { p.Proof[0] = flip(p.Proof[0]) }, want: "inclusion proof"},
		{name: "a proof with a hash missing", p: func(p *wire.Proof) { p.Proof = p.Proof[1:] }, want: "inclusion proof"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, p, note, key := g.rec, g.proof, append([]byte(nil), g.note...), g.key
			p.Proof = append([]string(nil), g.proof.Proof...)
			if c.rec != nil {
				c.rec(&rec)
			}
			if c.p != nil {
				c.p(&p)
			}
			if c.note != nil {
				note = c.note(note)
			}
			if c.key != "" {
				key = c.key
			}
			err := verify.Receipt(rec, p, note, key)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Receipt = %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// Every check of Consistency and CheckpointConsistency refuses its own
// forgery. A proof from the empty tree is refused: the Merkle library
// accepts any pair of roots for it.
func TestConsistencyRefusesEachForgery(t *testing.T) {
	g := newGenuine(t)
	flip := func(h string) string {
		b, _ := hex.DecodeString(h)
		b[0] ^= 1
		return hex.EncodeToString(b)
	}
	cases := []struct {
		name string
		p    func(*wire.ConsistencyProof)
		want string
	}{
		{name: "from the empty tree", p: func(p *wire.ConsistencyProof) { p.From, p.Proof, p.RootFrom = 0, nil, flip(p.RootFrom) }, want: "not 1 <= from <= to"},
		{name: "from beyond to", p: func(p *wire.ConsistencyProof) { p.From, p.To = p.To, p.From }, want: "not 1 <= from <= to"},
		{name: "a root that is not hex", p: func(p *wire.ConsistencyProof) { p.RootTo = "zz" }, want: "roots are not hex"},
		{name: "a root of the wrong length", p: func(p *wire.ConsistencyProof) { p.RootFrom = "abcd" }, want: "roots are not hex"},
		{name: "a proof hash that is not hex", p: func(p *wire.ConsistencyProof) { p.Proof[0] = "zz" }, want: "is not a hex SHA-256 hash"},
		{name: "a forged proof hash", p: func(p *wire.ConsistencyProof) { p.Proof[0] = flip(p.Proof[0]) }, want: "consistency proof:"},
		{name: "another old root", p: func(p *wire.ConsistencyProof) { p.RootFrom = flip(p.RootFrom) }, want: "consistency proof:"},
		{name: "another new root", p: func(p *wire.ConsistencyProof) { p.RootTo = flip(p.RootTo) }, want: "consistency proof:"},
		{name: "equal sizes with another root", p: func(p *wire.ConsistencyProof) { p.From, p.Proof, p.RootFrom = p.To, nil, flip(p.RootTo) }, want: "consistency proof:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := g.cons
			p.Proof = append([]string(nil), g.cons.Proof...)
			c.p(&p)
			if err := verify.Consistency(p); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Consistency = %v, want an error saying %q", err, c.want)
			}
		})
	}

	other, err := oip.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two checkpoints of different logs under one key.
	skey, vkey, err := note.GenerateKey(rand.Reader, "k")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	root := base64.StdEncoding.EncodeToString(make([]byte, 32))
	logA, _ := note.Sign(&note.Note{Text: "a\n3\n" + root + "\n"}, signer)
	logB, _ := note.Sign(&note.Note{Text: "b\n5\n" + root + "\n"}, signer)
	ckCases := []struct {
		name       string
		oldN, newN []byte
		key        string
		p          func(*wire.ConsistencyProof)
		want       string
	}{
		{name: "an old checkpoint signed by another key", oldN: g.oldN, newN: g.newN, key: other.VerifierKey(), want: "checkpoint signature"},
		{name: "a forged new checkpoint", oldN: g.oldN, newN: []byte(strings.Replace(string(g.newN), "\n5\n", "\n6\n", 1)), key: g.key, want: "checkpoint signature"},
		{name: "checkpoints of other sizes", oldN: g.newN, newN: g.newN, key: g.key, want: "the checkpoints are of 5 and 5"},
		{name: "a proof for other sizes", oldN: g.oldN, newN: g.newN, key: g.key, p: func(p *wire.ConsistencyProof) { p.To = 4 }, want: "proof is for sizes 3..4"},
		{name: "checkpoints of two logs", oldN: logA, newN: logB, key: vkey, want: "different logs"},
		{name: "checkpoints of the empty tree", oldN: g.oldN, newN: g.newN, key: g.key, p: func(p *wire.ConsistencyProof) { p.From = 0 }, want: "proof is for sizes 0..5"},
	}
	for _, c := range ckCases {
		t.Run(c.name, func(t *testing.T) {
			p := g.cons
			if c.p != nil {
				c.p(&p)
			}
			if err := verify.CheckpointConsistency(p, c.oldN, c.newN, c.key); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckpointConsistency = %v, want an error saying %q", err, c.want)
			}
		})
	}
}
