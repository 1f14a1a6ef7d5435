-- Runs, their event logs, background tasks and the OIP ledger.
CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    state       TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT '',
    data        TEXT NOT NULL,
    milestones  TEXT NOT NULL DEFAULT '[]',
    error       TEXT NOT NULL DEFAULT '',
    version     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE events (
    run_id     TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    time       INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    action     TEXT NOT NULL DEFAULT '',
    from_state TEXT NOT NULL DEFAULT '',
    to_state   TEXT NOT NULL DEFAULT '',
    actor      TEXT NOT NULL DEFAULT '',
    state      TEXT NOT NULL,
    status     TEXT NOT NULL DEFAULT '',
    data       TEXT NOT NULL,
    milestones TEXT NOT NULL DEFAULT '[]',
    error      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    state       TEXT NOT NULL,
    version     INTEGER NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL,
    owner       TEXT NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX tasks_open ON tasks (created_at) WHERE status != 'done';

CREATE TABLE ledger (
    seq        INTEGER PRIMARY KEY,
    inv_id     TEXT NOT NULL UNIQUE,
    key        TEXT NOT NULL,
    type       TEXT NOT NULL,
    body       TEXT NOT NULL,
    timestamp  INTEGER NOT NULL,
    source     TEXT NOT NULL,
    entry_hash TEXT NOT NULL,
    supersedes TEXT NOT NULL DEFAULT '',
    result_of  TEXT NOT NULL DEFAULT '',
    replay_of  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX ledger_key ON ledger (key, seq);
CREATE INDEX ledger_replay ON ledger (replay_of) WHERE replay_of != '';

-- The latest record of every key, for directory listings.
CREATE TABLE ledger_heads (
    key  TEXT PRIMARY KEY,
    seq  INTEGER NOT NULL,
    type TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX ledger_heads_type ON ledger_heads (type, key);
