// Package verify checks OIP ledger records, inclusion and consistency
// proofs and signed checkpoints offline, with nothing but what the ledger
// served and the verifier key the caller trusts.
//
// A record's entry_hash is the hex SHA-256 of its canonical JSON (RFC 8785,
// see CanonicalJSON), and the same bytes are its leaf in the ledger's
// RFC 6962 Merkle tree; checkpoints are Ed25519 signed notes
// (golang.org/x/mod/sumdb/note) of the tree's size and root. Receipt checks
// one record against a proof and a checkpoint; ReceiptFrom fetches them
// from a server first:
//
//	c, _ := client.New("http://127.0.0.1:8000", nil)
//	rec, proof, err := verify.ReceiptFrom(ctx, c, invID, pinnedKey)
//
// The package is opt-in for SDK users: it needs RFC 8785 canonicalisation,
// signed notes and Merkle proofs (github.com/gowebpki/jcs,
// golang.org/x/mod and github.com/transparency-dev/merkle), which package
// client, kept to the standard library, does not import. It imports
// nothing else outside the standard library; package oip uses it for its
// own hashing, so the server and every verifier compute the same bytes.
package verify
