-- The scopes each ledger record's dispatcher held when it dispatched it
-- (outside the record and its hash): whether a directory row's current
-- version may run for a workflow.
CREATE TABLE ledger_scopes (
    inv_id TEXT PRIMARY KEY,
    scopes TEXT NOT NULL
);
