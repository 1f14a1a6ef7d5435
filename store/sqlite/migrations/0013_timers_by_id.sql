-- The timers table keyed by its id alone (WITHOUT ROWID), and without
-- timers_run: a timer's id begins with its run's id and "/"
-- (store.TimerID), so a run's timers are a range of the primary key
-- (id >= run_id || '/' AND id < run_id || '0', then run_id = the run, for
-- the run ids that begin with another's and "/"). Storing or deleting a
-- timer writes three B-trees (the table, timers_ready, timers_due), not
-- five (the table by rowid, its id index, and the three indexes).
CREATE TABLE timers_new (
    id          TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    state       TEXT NOT NULL,
    version     INTEGER NOT NULL,
    action      TEXT NOT NULL,
    due_at      INTEGER NOT NULL,
    ready_at    INTEGER NOT NULL,
    data        TEXT NOT NULL DEFAULT '{}',
    owner       TEXT NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO timers_new (id, run_id, workflow_id, state, version, action, due_at, ready_at, data, owner, lease_until)
    SELECT id, run_id, workflow_id, state, version, action, due_at, ready_at, data, owner, lease_until FROM timers;
DROP TABLE timers;
ALTER TABLE timers_new RENAME TO timers;
CREATE INDEX timers_ready ON timers (ready_at, id);
CREATE INDEX timers_due ON timers (due_at, run_id);
