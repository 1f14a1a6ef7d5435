-- Webhooks (SPEC section 18): subscriptions, and the outbox of their
-- deliveries, written by the run commits whose changes they report, in
-- the commit's statement. ready_at is when a pending delivery may be
-- claimed: next_at, or the end of its lease while a claimer holds it
-- (lease_until, NULL when none); claims (FOR UPDATE SKIP LOCKED) and the
-- delivery loop's wake-up walk webhook_deliveries_ready from its start and
-- check each candidate's queue (the pending deliveries of its
-- subscription and run, by seq) through webhook_deliveries_queue. Both
-- indexes hold only pending deliveries. webhook_deliveries_sub serves the
-- subscription's list of deliveries. Deliveries outlive their run (no
-- reference to runs: DeleteRun keeps them) and go with their subscription
-- (ON DELETE CASCADE, also for a commit racing the deletion: its insert
-- then fails the key check and is retried alone, without the delivery).
-- Bodies and secrets are bytea: kept byte for byte. (0011 is the
-- schedules' migration.)
CREATE TABLE webhook_subscriptions (
    id              text COLLATE "C" PRIMARY KEY,
    url             text NOT NULL,
    events          text[] NOT NULL DEFAULT '{}',
    workflow_id     text NOT NULL DEFAULT '',
    states          text[] NOT NULL DEFAULT '{}',
    secrets         bytea,
    disabled        boolean NOT NULL DEFAULT false,
    disabled_reason text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE TABLE webhook_deliveries (
    id               text COLLATE "C" PRIMARY KEY,
    subscription_id  text COLLATE "C" NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    message_id       text NOT NULL,
    run_id           text COLLATE "C" NOT NULL,
    seq              bigint NOT NULL,
    type             text NOT NULL,
    body             bytea NOT NULL,
    status           text NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    next_at          timestamptz NOT NULL,
    ready_at         timestamptz NOT NULL,
    first_attempt_at timestamptz,
    owner            text NOT NULL DEFAULT '',
    lease_until      timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    last_error       text NOT NULL DEFAULT ''
);
CREATE INDEX webhook_deliveries_ready ON webhook_deliveries (ready_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (subscription_id, run_id, seq, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_sub ON webhook_deliveries (subscription_id, id);
CREATE TABLE webhook_attempts (
    delivery_id text COLLATE "C" NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    n           integer NOT NULL,
    at          timestamptz NOT NULL,
    status      integer NOT NULL,
    class       text NOT NULL,
    duration    bigint NOT NULL,
    answer      text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, n)
);
