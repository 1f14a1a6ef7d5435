-- Workflow versions: every definition served, and the version each run is
-- pinned to ('' for runs stored before versions existed, until the first
-- start after the upgrade pins them). The column events.workflow_version
-- (the version created and migrated events pin) comes from 0004.
CREATE TABLE definitions (
    workflow_id  TEXT NOT NULL,
    version      TEXT NOT NULL,
    body         TEXT NOT NULL,
    first_served INTEGER NOT NULL,
    legacy_runs  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow_id, version)
) WITHOUT ROWID;
ALTER TABLE runs ADD COLUMN workflow_version TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_workflow_version ON runs (workflow_id, workflow_version, id);
-- Standing migrations: runs that were processing when migrated move once
-- their tasks settle (states and runs are JSON).
CREATE TABLE workflow_migrations (
    workflow_id  TEXT NOT NULL,
    from_version TEXT NOT NULL,
    to_version   TEXT NOT NULL,
    states       TEXT NOT NULL,
    runs         TEXT NOT NULL,
    actor        TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, from_version)
) WITHOUT ROWID;
