-- Webhooks (SPEC section 18): subscriptions, and the outbox of their
-- deliveries, written by the run commits whose changes they report, in
-- the commit's transaction. Times are Unix nanoseconds (0: none), as
-- elsewhere. ready_at is when a pending delivery may be claimed: next_at,
-- or the end of its lease while a claimer holds it; claims and the
-- delivery loop's wake-up walk webhook_deliveries_ready from its start and
-- check each candidate's queue (the pending deliveries of its
-- subscription and run, by seq) through webhook_deliveries_queue. Both
-- indexes hold only pending deliveries. webhook_deliveries_sub serves the
-- subscription's list of deliveries and its deletion. Deliveries outlive
-- their run (DeleteRun keeps them); they go with their subscription.
-- (0011 is the schedules' migration.)
CREATE TABLE webhook_subscriptions (
    id              TEXT PRIMARY KEY,
    url             TEXT NOT NULL,
    events          TEXT NOT NULL DEFAULT '[]',
    workflow_id     TEXT NOT NULL DEFAULT '',
    states          TEXT NOT NULL DEFAULT '[]',
    secrets         BLOB,
    disabled        INTEGER NOT NULL DEFAULT 0,
    disabled_reason TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    subscription_id  TEXT NOT NULL,
    message_id       TEXT NOT NULL,
    run_id           TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    type             TEXT NOT NULL,
    body             BLOB NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_at          INTEGER NOT NULL,
    ready_at         INTEGER NOT NULL,
    first_attempt_at INTEGER NOT NULL DEFAULT 0,
    owner            TEXT NOT NULL DEFAULT '',
    lease_until      INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    last_error       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX webhook_deliveries_ready ON webhook_deliveries (ready_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (subscription_id, run_id, seq, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_sub ON webhook_deliveries (subscription_id, id);
CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL,
    n           INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    status      INTEGER NOT NULL,
    class       TEXT NOT NULL,
    duration    INTEGER NOT NULL,
    answer      TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, n)
);
