package oip

import "github.com/asmp-dev/asmp/oip/verify"

// VerifyReceipt checks offline that record is in the ledger: its
// entry_hash, its inclusion proof p, and the checkpoint note signed by
// verifierKey that p leads to (see verify.Receipt).
func VerifyReceipt(record Record, p Proof, checkpointNote []byte, verifierKey string) error {
	return verify.Receipt(record, p, checkpointNote, verifierKey)
}

// VerifyConsistency checks that p proves the tree of p.To records, with
// root p.RootTo, extends the tree of p.From records with root p.RootFrom
// (see verify.Consistency).
func VerifyConsistency(p ConsistencyProof) error { return verify.Consistency(p) }

// VerifyCheckpointConsistency checks a consistency proof against two
// signed checkpoints by verifierKey (see verify.CheckpointConsistency).
func VerifyCheckpointConsistency(p ConsistencyProof, oldNote, newNote []byte, verifierKey string) error {
	return verify.CheckpointConsistency(p, oldNote, newNote, verifierKey)
}
