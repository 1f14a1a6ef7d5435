-- Tamper-evident ledger: each record's canonical bytes as written, the
-- signed checkpoint of every append transaction (with the compact Merkle
-- range it ends at) and how far the ledger was last checked in full.
-- Records of earlier releases get their canonical bytes, and the ledger its
-- first checkpoint, when a server next opens it (after checking their
-- entry hashes). Replicas share the checkpoints: each is written inside the
-- append's transaction, under the ledger's advisory lock.
ALTER TABLE ledger ADD COLUMN canonical bytea;
CREATE INDEX ledger_uncanonical ON ledger (seq) WHERE canonical IS NULL;

CREATE TABLE ledger_checkpoints (
    tree_size  bigint PRIMARY KEY,
    prev_size  bigint NOT NULL,
    root_hash  text NOT NULL,
    note       text NOT NULL,
    public_key text NOT NULL,
    compact    bytea NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE ledger_state (
    id            integer PRIMARY KEY CHECK (id = 1),
    verified_size bigint NOT NULL
);
