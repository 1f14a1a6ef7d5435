package oip

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// VerifyReceipt checks offline that record is in the ledger: that its
// entry_hash is the SHA-256 of its canonical JSON, that p is an inclusion
// proof of its leaf hash at index seq-1, and that the proof leads to the
// root of checkpointNote, a checkpoint signed by verifierKey (the server's
// GET /api/ledger/key). It returns nil when everything holds and an error
// saying what failed otherwise.
func VerifyReceipt(record Record, p Proof, checkpointNote []byte, verifierKey string) error {
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

// VerifyConsistency checks that p proves the tree of p.To records, with
// root p.RootTo, extends the tree of p.From records with root p.RootFrom.
// Callers compare those roots with checkpoints they trust (for example
// with OpenCheckpoint on an old and a new checkpoint).
func VerifyConsistency(p ConsistencyProof) error {
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

// VerifyCheckpointConsistency checks a consistency proof against two
// signed checkpoints: the old one of p.From records and the new one of
// p.To records, both signed by verifierKey.
func VerifyCheckpointConsistency(p ConsistencyProof, oldNote, newNote []byte, verifierKey string) error {
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
	return VerifyConsistency(p)
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
