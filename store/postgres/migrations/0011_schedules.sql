-- Schedules (SPEC section 17): cron expressions that start runs. source
-- is 'file' (a served workflow file's schedules: entry, written at start)
-- or 'api' (POST /schedules). last_tick is the latest tick that started a
-- run, created_at until one has; a compare-and-set on it decides which
-- replica starts a tick's run.
CREATE TABLE schedules (
    id          text COLLATE "C" PRIMARY KEY,
    workflow_id text NOT NULL,
    cron        text NOT NULL,
    timezone    text NOT NULL DEFAULT '',
    data        json NOT NULL,
    source      text NOT NULL,
    created_at  timestamptz NOT NULL,
    last_tick   timestamptz NOT NULL
);
CREATE INDEX schedules_source ON schedules (source, workflow_id);
