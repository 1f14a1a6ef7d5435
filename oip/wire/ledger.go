package wire

// Checkpoint is a signed statement of the ledger's Merkle tree at one size
// (GET /api/ledger/checkpoint).
type Checkpoint struct {
	// Origin names the log; it is the checkpoint's first line.
	Origin string `json:"origin"`
	// TreeSize is the number of records the tree covers.
	TreeSize int64 `json:"tree_size"`
	// RootHash is the hex RFC 6962 root hash of those records.
	RootHash string `json:"root_hash"`
	// Note is the signed note: the checkpoint body (origin, size, base64
	// root, each on its own line), a blank line and the signature lines.
	Note string `json:"note"`
	// PublicKey is the note verifier key ("name+hash+base64 key") that
	// checks the signature; it is the same as GET /api/ledger/key.
	PublicKey string `json:"public_key"`
}

// Proof is an inclusion proof of one record in the tree of TreeSize
// records, with the signed checkpoint of that tree (GET /api/ledger/proof).
type Proof struct {
	InvID     string   `json:"inv_ID"`
	Seq       int64    `json:"seq"`
	LeafIndex int64    `json:"leaf_index"` // seq - 1
	TreeSize  int64    `json:"tree_size"`
	LeafHash  string   `json:"leaf_hash"` // hex SHA-256(0x00 || canonical JSON)
	RootHash  string   `json:"root_hash"` // hex
	Proof     []string `json:"proof"`     // hex node hashes, RFC 6962 order
	EntryHash string   `json:"entry_hash"`
	// Checkpoint is the signed note of the tree of TreeSize records.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// ConsistencyProof proves that the tree of To records extends the tree of
// From records (GET /api/ledger/consistency).
type ConsistencyProof struct {
	From     int64    `json:"from"`
	To       int64    `json:"to"`
	Proof    []string `json:"proof"` // hex node hashes, RFC 6962 order
	RootFrom string   `json:"root_from"`
	RootTo   string   `json:"root_to"`
	// Checkpoint is the signed note of the tree of To records.
	Checkpoint string `json:"checkpoint,omitempty"`
}
