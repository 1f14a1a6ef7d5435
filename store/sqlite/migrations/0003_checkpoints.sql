-- Tamper-evident ledger: each record's canonical bytes as written, the
-- signed checkpoint of every append transaction (with the compact Merkle
-- range it ends at) and how far the ledger was last checked in full.
-- Records of earlier releases get their canonical bytes, and the ledger its
-- first checkpoint, when the server next opens it (after checking their
-- entry hashes).
ALTER TABLE ledger ADD COLUMN canonical BLOB;
CREATE INDEX ledger_uncanonical ON ledger (seq) WHERE canonical IS NULL;

CREATE TABLE ledger_checkpoints (
    tree_size  INTEGER PRIMARY KEY,
    prev_size  INTEGER NOT NULL,
    root_hash  TEXT NOT NULL,
    note       TEXT NOT NULL,
    public_key TEXT NOT NULL,
    compact    BLOB NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE ledger_state (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    verified_size INTEGER NOT NULL
);
