-- A transition rewrites the entry of its run in every index that holds a
-- column it sets. Most runs have no stored status override (status = ''):
-- their status is derived from their state, and lists filter them by
-- workflow and state (runs_list_workflow_state). The override list
-- (processing, failed) needs only the runs that have one, so its index
-- keeps only those, and a transition of a run without an override no
-- longer touches it. Its queries repeat the condition (status != '') so
-- that SQLite uses it.
DROP INDEX runs_list_status;
CREATE INDEX runs_list_status ON runs (status, updated_at, id) WHERE status != '';
-- A state without a workflow is listed one workflow at a time through
-- runs_list_workflow_state (runlist.go), so runs_list_state, which every
-- transition rewrote, goes.
DROP INDEX runs_list_state;
