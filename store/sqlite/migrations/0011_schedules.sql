-- Schedules (SPEC section 17): cron expressions that start runs. source
-- is 'file' (a served workflow file's schedules: entry, written at start)
-- or 'api' (POST /schedules). last_tick (Unix nanoseconds) is the latest
-- tick that started a run, created_at until one has; a compare-and-set on
-- it decides which process starts a tick's run.
CREATE TABLE schedules (
    id          TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    cron        TEXT NOT NULL,
    timezone    TEXT NOT NULL DEFAULT '',
    data        TEXT NOT NULL,
    source      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    last_tick   INTEGER NOT NULL
);
CREATE INDEX schedules_source ON schedules (source, workflow_id);
