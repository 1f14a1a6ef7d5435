-- Runs, their event logs, background tasks and the OIP ledger.
--
-- The logical schema is the SQLite backend's (store/sqlite/migrations),
-- with Postgres types:
--   * data and body are `json`, not `jsonb`: json validates the text but
--     keeps the exact bytes the engine wrote (key order, whitespace), which
--     entry hashes and byte-for-byte replays rely on;
--   * milestones are text[];
--   * times are timestamptz (microsecond precision; nanoseconds are
--     truncated); a running task's lease_until is NULL when it has none;
--   * identifiers and keys compare with COLLATE "C" (byte order), so that
--     ORDER BY and "key > after" paging agree with SQLite and memstore
--     whatever the database's default collation.

CREATE TABLE runs (
    id          text COLLATE "C" PRIMARY KEY,
    workflow_id text NOT NULL,
    state       text NOT NULL,
    status      text NOT NULL DEFAULT '',
    data        json NOT NULL,
    milestones  text[] NOT NULL DEFAULT '{}',
    error       text NOT NULL DEFAULT '',
    version     bigint NOT NULL CHECK (version > 0),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE events (
    run_id     text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        bigint NOT NULL CHECK (seq > 0),
    time       timestamptz NOT NULL,
    kind       text NOT NULL,
    action     text NOT NULL DEFAULT '',
    from_state text NOT NULL DEFAULT '',
    to_state   text NOT NULL DEFAULT '',
    actor      text NOT NULL DEFAULT '',
    state      text NOT NULL,
    status     text NOT NULL DEFAULT '',
    data       json NOT NULL,
    milestones text[] NOT NULL DEFAULT '{}',
    error      text NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE tasks (
    id          text COLLATE "C" PRIMARY KEY,
    run_id      text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    state       text NOT NULL,
    version     bigint NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    status      text NOT NULL CHECK (status IN ('pending', 'running', 'done')),
    owner       text NOT NULL DEFAULT '',
    lease_until timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
-- The claim queue: open tasks in creation order.
CREATE INDEX tasks_open ON tasks (created_at, id) WHERE status <> 'done';
CREATE INDEX tasks_run ON tasks (run_id);

CREATE TABLE ledger (
    seq        bigint PRIMARY KEY CHECK (seq > 0),
    inv_id     text COLLATE "C" NOT NULL UNIQUE,
    key        text COLLATE "C" NOT NULL,
    type       text NOT NULL,
    body       json NOT NULL,
    timestamp  timestamptz NOT NULL,
    source     text NOT NULL,
    entry_hash text NOT NULL,
    supersedes text COLLATE "C" NOT NULL DEFAULT '',
    result_of  text COLLATE "C" NOT NULL DEFAULT '',
    replay_of  text COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX ledger_key ON ledger (key, seq);
CREATE INDEX ledger_replay ON ledger (replay_of, seq) WHERE replay_of <> '';

-- The latest record of every key, for directory listings.
CREATE TABLE ledger_heads (
    key  text COLLATE "C" PRIMARY KEY,
    seq  bigint NOT NULL REFERENCES ledger (seq),
    type text NOT NULL
);
CREATE INDEX ledger_heads_type ON ledger_heads (type, key);
