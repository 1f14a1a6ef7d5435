-- Workflow versions: every definition served (body is json, not jsonb: the
-- exact canonical bytes its version hashes), and the version each run is
-- pinned to ('' for runs stored before versions existed, until the first
-- start after the upgrade pins them). events.workflow_version (the
-- version created and migrated events pin) comes from 0004.
CREATE TABLE definitions (
    workflow_id  text COLLATE "C" NOT NULL,
    version      text COLLATE "C" NOT NULL,
    body         json NOT NULL,
    first_served timestamptz NOT NULL,
    legacy_runs  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow_id, version)
);
ALTER TABLE runs ADD COLUMN workflow_version text COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX runs_workflow_version ON runs (workflow_id, workflow_version, id);
-- Standing migrations: runs that were processing when migrated move once
-- their tasks settle.
CREATE TABLE workflow_migrations (
    workflow_id  text COLLATE "C" NOT NULL,
    from_version text COLLATE "C" NOT NULL,
    to_version   text NOT NULL,
    states       jsonb NOT NULL,
    runs         text[] NOT NULL,
    actor        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (workflow_id, from_version)
);
