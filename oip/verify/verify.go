package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/asmp-dev/asmp/oip/wire"
)

// hashSize is the size of every tree hash (SHA-256).
const hashSize = sha256.Size

// emptyEntryHash is the entry_hash member of a record's wire form
// (wire.Record) when it is empty: the one member that form holds that
// entry_hash and the Merkle leaf do not commit to (entry_hash is derived
// from the rest; replayed_by and replayed_by_more, computed on read, are
// left out when empty).
var emptyEntryHash = []byte(`,"entry_hash":""`)

// CanonicalJSON returns the bytes a record's entry_hash and Merkle leaf are
// computed from: the RFC 8785 (JCS) canonical JSON of the object
//
//	{"body", "inv_ID", "key", "seq", "source", "supersedes", "timestamp",
//	 "type"} plus "result_of" and "replay_of" when they are not empty
//
// with supersedes null when the record supersedes nothing. entry_hash and
// replayed_by are not hashed. In canonical JSON object keys are sorted,
// insignificant whitespace is removed, strings are minimally escaped and
// numbers are written in their shortest IEEE-754 double form.
func CanonicalJSON(r wire.Record) ([]byte, error) {
	// The record's one declared shape, wire.Record, less what is not
	// hashed; the order of members does not matter, RFC 8785 sorts them.
	r.EntryHash, r.ReplayedBy, r.ReplayedByMore = "", nil, false
	if len(r.Body) == 0 {
		r.Body = json.RawMessage("null")
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("oip: encode record %s: %w", r.InvID, err)
	}
	// entry_hash follows body, timestamp and source and precedes only
	// string and null members, in which its quotes would be escaped: its
	// last occurrence is the member, whatever the body holds.
	i := bytes.LastIndex(b, emptyEntryHash)
	if i < 0 {
		return nil, fmt.Errorf("oip: encode record %s: no entry_hash member in %.80s", r.InvID, b)
	}
	b = append(b[:i], b[i+len(emptyEntryHash):]...)
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("oip: canonicalise record %s: %w", r.InvID, err)
	}
	return c, nil
}

// DecodeCanonical is the inverse of CanonicalJSON: the record whose
// canonical bytes data are, with EntryHash set to their SHA-256. It does
// not check that data is canonical; comparing CanonicalJSON of the result
// with data does.
func DecodeCanonical(data []byte) (wire.Record, error) {
	var r wire.Record
	if err := json.Unmarshal(data, &r); err != nil {
		return wire.Record{}, fmt.Errorf("oip: decode canonical record: %w", err)
	}
	sum := sha256.Sum256(data)
	r.EntryHash, r.ReplayedBy, r.ReplayedByMore = hex.EncodeToString(sum[:]), nil, false
	return r, nil
}

// EntryHash returns the hex SHA-256 of CanonicalJSON(r), the value a
// genuine record carries as entry_hash.
func EntryHash(r wire.Record) (string, error) {
	c, err := CanonicalJSON(r)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// LeafHash returns the record's RFC 6962 Merkle leaf hash:
// SHA-256(0x00 || CanonicalJSON(r)).
func LeafHash(r wire.Record) ([]byte, error) {
	c, err := CanonicalJSON(r)
	if err != nil {
		return nil, err
	}
	h := LeafHashOf(c)
	return h[:], nil
}

// LeafHashOf is the RFC 6962 hash of a leaf holding data:
// SHA-256(0x00 || data).
func LeafHashOf(data []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(data)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// OpenCheckpoint verifies a signed checkpoint note with the verifier key
// and parses its body. The note must carry a valid signature by that key.
func OpenCheckpoint(signed []byte, verifierKey string) (wire.Checkpoint, error) {
	v, err := note.NewVerifier(strings.TrimSpace(verifierKey))
	if err != nil {
		return wire.Checkpoint{}, fmt.Errorf("oip: verifier key: %w", err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return wire.Checkpoint{}, fmt.Errorf("oip: checkpoint signature: %w", err)
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 {
		return wire.Checkpoint{}, errors.New("oip: checkpoint body has fewer than three lines")
	}
	origin, sizeText, rootText := lines[0], lines[1], lines[2]
	if origin == "" {
		return wire.Checkpoint{}, errors.New("oip: checkpoint has an empty origin")
	}
	size, err := strconv.ParseUint(sizeText, 10, 63)
	if err != nil || (sizeText != "0" && strings.HasPrefix(sizeText, "0")) {
		return wire.Checkpoint{}, fmt.Errorf("oip: checkpoint tree size %q is not a decimal number", sizeText)
	}
	root, err := base64.StdEncoding.DecodeString(rootText)
	if err != nil || len(root) != hashSize {
		return wire.Checkpoint{}, fmt.Errorf("oip: checkpoint root hash %q is not base64 of %d bytes", rootText, hashSize)
	}
	return wire.Checkpoint{
		Origin:    origin,
		TreeSize:  int64(size),
		RootHash:  hex.EncodeToString(root),
		Note:      string(signed),
		PublicKey: strings.TrimSpace(verifierKey),
	}, nil
}

// Receipt checks offline that record is in the ledger: that its
// entry_hash is the SHA-256 of its canonical JSON, that p is an inclusion
// proof of its leaf hash at index seq-1, and that the proof leads to the
// root of checkpointNote, a checkpoint signed by verifierKey (the server's
// GET /api/ledger/key). It returns nil when everything holds and an error
// saying what failed otherwise.
func Receipt(record wire.Record, p wire.Proof, checkpointNote []byte, verifierKey string) error {
	entry, err := EntryHash(record)
	if err != nil {
		return err
	}
	if entry != record.EntryHash {
		return fmt.Errorf("oip: record %s: entry_hash %s does not match its content (%s)", record.InvID, record.EntryHash, entry)
	}
	if p.EntryHash != "" && p.EntryHash != entry {
		return fmt.Errorf("oip: proof is for entry_hash %s, the record has %s", p.EntryHash, entry)
	}
	if p.InvID != "" && p.InvID != record.InvID {
		return fmt.Errorf("oip: proof is for %s, not %s", p.InvID, record.InvID)
	}
	if record.Seq < 1 || p.LeafIndex != record.Seq-1 {
		return fmt.Errorf("oip: proof is for leaf %d, the record's seq is %d", p.LeafIndex, record.Seq)
	}
	leaf, err := LeafHash(record)
	if err != nil {
		return err
	}
	if p.LeafHash != "" && p.LeafHash != hex.EncodeToString(leaf) {
		return fmt.Errorf("oip: proof's leaf hash %s is not the record's (%x)", p.LeafHash, leaf)
	}
	ck, err := OpenCheckpoint(checkpointNote, verifierKey)
	if err != nil {
		return err
	}
	if ck.TreeSize != p.TreeSize {
		return fmt.Errorf("oip: proof is for tree size %d, the checkpoint has %d", p.TreeSize, ck.TreeSize)
	}
	root, _ := hex.DecodeString(ck.RootHash)
	if p.RootHash != "" && p.RootHash != ck.RootHash {
		return fmt.Errorf("oip: proof's root %s is not the checkpoint's %s", p.RootHash, ck.RootHash)
	}
	path, err := unhexAll(p.Proof)
	if err != nil {
		return err
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(p.LeafIndex), uint64(ck.TreeSize), leaf, path, root); err != nil {
		return fmt.Errorf("oip: inclusion proof: %w", err)
	}
	return nil
}

// Consistency checks that p proves the tree of p.To records, with
// root p.RootTo, extends the tree of p.From records with root p.RootFrom.
// Callers compare those roots with checkpoints they trust (for example
// with OpenCheckpoint on an old and a new checkpoint).
func Consistency(p wire.ConsistencyProof) error {
	if p.From < 1 || p.From > p.To {
		return fmt.Errorf("oip: consistency proof sizes %d..%d are not 1 <= from <= to", p.From, p.To)
	}
	r1, err1 := hex.DecodeString(p.RootFrom)
	r2, err2 := hex.DecodeString(p.RootTo)
	if err := errors.Join(err1, err2); err != nil || len(r1) != hashSize || len(r2) != hashSize {
		return errors.New("oip: consistency proof roots are not hex SHA-256 hashes")
	}
	path, err := unhexAll(p.Proof)
	if err != nil {
		return err
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(p.From), uint64(p.To), path, r1, r2); err != nil {
		return fmt.Errorf("oip: consistency proof: %w", err)
	}
	return nil
}

// CheckpointConsistency checks a consistency proof against two
// signed checkpoints: the old one of p.From records and the new one of
// p.To records, both signed by verifierKey.
func CheckpointConsistency(p wire.ConsistencyProof, oldNote, newNote []byte, verifierKey string) error {
	c1, err := OpenCheckpoint(oldNote, verifierKey)
	if err != nil {
		return err
	}
	c2, err := OpenCheckpoint(newNote, verifierKey)
	if err != nil {
		return err
	}
	if c1.TreeSize != p.From || c2.TreeSize != p.To {
		return fmt.Errorf("oip: proof is for sizes %d..%d, the checkpoints are of %d and %d", p.From, p.To, c1.TreeSize, c2.TreeSize)
	}
	if c1.Origin != c2.Origin {
		return fmt.Errorf("oip: checkpoints are of different logs (%q, %q)", c1.Origin, c2.Origin)
	}
	p.RootFrom, p.RootTo = c1.RootHash, c2.RootHash
	return Consistency(p)
}

func unhexAll(hs []string) ([][]byte, error) {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != hashSize {
			return nil, fmt.Errorf("oip: proof hash %d is not a hex SHA-256 hash", i)
		}
		out[i] = b
	}
	return out, nil
}

// Ledger is what ReceiptFrom reads from a ledger server; *client.Client
// implements it over HTTP.
type Ledger interface {
	// Receipt returns the record of a receipt by inv_ID.
	Receipt(ctx context.Context, invID string) (*wire.Record, error)
	// Proof returns the inclusion proof of invID in the tree of treeSize
	// records (0 = the current tree), with its signed checkpoint.
	Proof(ctx context.Context, invID string, treeSize int64) (*wire.Proof, error)
	// LedgerKey returns the verifier key of the ledger's checkpoints and
	// its origin.
	LedgerKey(ctx context.Context) (publicKey, origin string, err error)
}

// ReceiptFrom fetches invID's record, its inclusion proof and (unless
// trustedKey is given) the ledger's verifier key from l, and checks them
// offline with Receipt: the record's entry_hash, its leaf in the Merkle
// tree, and the checkpoint's signature. trustedKey, when not "", is the
// verifier key the caller already trusts (the server's answer is then not
// believed). It returns the verified record and proof.
func ReceiptFrom(ctx context.Context, l Ledger, invID, trustedKey string) (*wire.Record, *wire.Proof, error) {
	rec, err := l.Receipt(ctx, invID)
	if err != nil {
		return nil, nil, err
	}
	p, err := l.Proof(ctx, invID, 0)
	if err != nil {
		return nil, nil, err
	}
	key := trustedKey
	if key == "" {
		if key, _, err = l.LedgerKey(ctx); err != nil {
			return nil, nil, err
		}
	}
	if p.Checkpoint == "" {
		return nil, nil, errors.New("the server's proof carries no signed checkpoint")
	}
	verified := *rec
	verified.ReplayedBy = nil // computed on read, not hashed
	if err := Receipt(verified, *p, []byte(p.Checkpoint), key); err != nil {
		return nil, nil, fmt.Errorf("receipt %s does not verify: %w", invID, err)
	}
	return rec, p, nil
}

// Log is what Extends reads from a ledger server; *client.Client
// implements it over HTTP.
type Log interface {
	// Checkpoint returns the ledger's newest signed checkpoint.
	Checkpoint(ctx context.Context) (*wire.Checkpoint, error)
	// Consistency returns the consistency proof between the trees of from
	// and to records.
	Consistency(ctx context.Context, from, to int64) (*wire.ConsistencyProof, error)
}

// Extends is a monitor's check: it fetches the ledger's current
// checkpoint and checks that the ledger still extends old, a checkpoint
// kept from earlier: the current checkpoint is signed by trustedKey (""
// means old's own key), it is of the same log, its tree is not smaller,
// the same size has the same root, and a larger tree comes with a
// consistency proof from old's root to its own. It returns the current
// checkpoint, to keep for the next check.
func Extends(ctx context.Context, l Log, old wire.Checkpoint, trustedKey string) (*wire.Checkpoint, error) {
	key := strings.TrimSpace(trustedKey)
	if key == "" {
		key = old.PublicKey
	}
	prev, err := OpenCheckpoint([]byte(old.Note), old.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("the kept checkpoint: %w", err)
	}
	cur, err := l.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	now, err := OpenCheckpoint([]byte(cur.Note), key)
	if err != nil {
		return nil, fmt.Errorf("the ledger's checkpoint is not signed by the key you trust (%s): %w; if the key was rotated, check the ledger's key_rotation record and keep a new checkpoint", key, err)
	}
	if now.Origin != prev.Origin {
		return nil, fmt.Errorf("the ledger's checkpoint is of the log %q, the kept one of %q", now.Origin, prev.Origin)
	}
	switch {
	case now.TreeSize < prev.TreeSize:
		return nil, fmt.Errorf("the ledger does not extend the kept checkpoint: it has %d records, the kept checkpoint %d (records %d..%d were removed)", now.TreeSize, prev.TreeSize, now.TreeSize+1, prev.TreeSize)
	case now.TreeSize == prev.TreeSize:
		if now.RootHash != prev.RootHash {
			return nil, fmt.Errorf("the ledger does not extend the kept checkpoint: two different roots for tree size %d (%s kept, %s now): the ledger was rewritten", now.TreeSize, prev.RootHash, now.RootHash)
		}
		return &now, nil
	case prev.TreeSize == 0:
		return &now, nil // the empty tree is a prefix of every tree
	}
	p, err := l.Consistency(ctx, prev.TreeSize, now.TreeSize)
	if err != nil {
		return nil, err
	}
	if p.From != prev.TreeSize || p.To != now.TreeSize {
		return nil, fmt.Errorf("the server proved consistency of %d..%d, not %d..%d", p.From, p.To, prev.TreeSize, now.TreeSize)
	}
	q := *p
	q.RootFrom, q.RootTo = prev.RootHash, now.RootHash
	if err := Consistency(q); err != nil {
		return nil, fmt.Errorf("the ledger does not extend the kept checkpoint of tree size %d: %w", prev.TreeSize, err)
	}
	return &now, nil
}
