-- The event layout of store.Event (see store/sqlite/migrations/0004): an
-- event keeps what changed, not the run's whole data.
--
-- A whole event (data IS NOT NULL) keeps the run's full data and
-- milestones, as every event did before; a delta event (data IS NULL)
-- keeps the merge patch of the data (patch) and, in milestones, only the
-- milestones it added. Existing events are all whole.
ALTER TABLE events ALTER COLUMN data DROP NOT NULL;
ALTER TABLE events ADD COLUMN patch json;
-- The actions offered right after the event, a JSON array ('' = not
-- recorded: computed again on replay).
ALTER TABLE events ADD COLUMN offered text NOT NULL DEFAULT '';
-- The workflow version the run follows after the event ('' before versions).
ALTER TABLE events ADD COLUMN workflow_version text NOT NULL DEFAULT '';
-- Why a failing event failed.
ALTER TABLE events ADD COLUMN reason text NOT NULL DEFAULT '';
UPDATE events SET reason = error WHERE kind = 'failed';
-- The last whole event at or before a seq: where a replay starts.
CREATE INDEX events_whole ON events (run_id, seq) WHERE data IS NOT NULL;

-- Patch bytes kept since the run's last whole event (store.WholeDue).
ALTER TABLE runs ADD COLUMN patch_bytes bigint NOT NULL DEFAULT 0;

-- Runs by workflow and stored status, kept by triggers in the transaction
-- of every change, so /metrics never counts the runs table. Each count is
-- split over 16 shards (by run id) so that concurrent transactions seldom
-- wait for one another's row; a read sums them.
CREATE TABLE run_counts (
    workflow_id text NOT NULL,
    status      text NOT NULL,
    shard       smallint NOT NULL,
    n           bigint NOT NULL,
    PRIMARY KEY (workflow_id, status, shard)
);
INSERT INTO run_counts (workflow_id, status, shard, n)
    SELECT workflow_id, status, hashtext(id) & 15, COUNT(*) FROM runs GROUP BY 1, 2, 3;

CREATE FUNCTION run_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE run_counts SET n = n - 1
            WHERE workflow_id = OLD.workflow_id AND status = OLD.status AND shard = hashtext(OLD.id) & 15;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO run_counts (workflow_id, status, shard, n) VALUES (NEW.workflow_id, NEW.status, hashtext(NEW.id) & 15, 1)
            ON CONFLICT (workflow_id, status, shard) DO UPDATE SET n = run_counts.n + 1;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER run_counts_insert AFTER INSERT OR DELETE ON runs FOR EACH ROW EXECUTE FUNCTION run_counts_keep();
CREATE TRIGGER run_counts_update AFTER UPDATE OF status, workflow_id ON runs FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.workflow_id IS DISTINCT FROM NEW.workflow_id)
    EXECUTE FUNCTION run_counts_keep();
