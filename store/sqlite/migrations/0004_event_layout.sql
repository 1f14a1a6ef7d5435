-- The event layout of store.Event: an event keeps what changed, not the
-- run's whole data.
--
-- A whole event (data != '') keeps the run's full data and milestones, as
-- every event did before; a delta event (data = '') keeps the merge patch
-- of the data (patch) and, in milestones, only the milestones it added.
-- Existing events are all whole, so their replays stay exact.
ALTER TABLE events ADD COLUMN patch TEXT NOT NULL DEFAULT '';
-- The actions offered right after the event, a JSON array ('' = not
-- recorded: computed again on replay).
ALTER TABLE events ADD COLUMN offered TEXT NOT NULL DEFAULT '';
-- The workflow version the run follows after the event ('' before versions).
ALTER TABLE events ADD COLUMN workflow_version TEXT NOT NULL DEFAULT '';
-- Why a failing event failed.
ALTER TABLE events ADD COLUMN reason TEXT NOT NULL DEFAULT '';
UPDATE events SET reason = error WHERE kind = 'failed';
-- The last whole event at or before a seq: where a replay starts.
CREATE INDEX events_whole ON events (run_id, seq) WHERE data != '';

-- Patch bytes kept since the run's last whole event (store.WholeDue).
ALTER TABLE runs ADD COLUMN patch_bytes INTEGER NOT NULL DEFAULT 0;

-- Runs by workflow and stored status, kept by triggers in the transaction
-- of every change, so /metrics never counts the runs table.
CREATE TABLE run_counts (
    workflow_id TEXT NOT NULL,
    status      TEXT NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, status)
) WITHOUT ROWID;
INSERT INTO run_counts (workflow_id, status, n) SELECT workflow_id, status, COUNT(*) FROM runs GROUP BY workflow_id, status;

CREATE TRIGGER run_counts_insert AFTER INSERT ON runs BEGIN
    INSERT INTO run_counts (workflow_id, status, n) VALUES (new.workflow_id, new.status, 1)
        ON CONFLICT (workflow_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER run_counts_delete AFTER DELETE ON runs BEGIN
    UPDATE run_counts SET n = n - 1 WHERE workflow_id = old.workflow_id AND status = old.status;
END;
CREATE TRIGGER run_counts_update AFTER UPDATE OF status, workflow_id ON runs
    WHEN old.status != new.status OR old.workflow_id != new.workflow_id BEGIN
    UPDATE run_counts SET n = n - 1 WHERE workflow_id = old.workflow_id AND status = old.status;
    INSERT INTO run_counts (workflow_id, status, n) VALUES (new.workflow_id, new.status, 1)
        ON CONFLICT (workflow_id, status) DO UPDATE SET n = n + 1;
END;
