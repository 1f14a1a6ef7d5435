-- Run lists (GET /runs): newest first by (updated_at, id), one index per
-- filter so that a page costs the same however many runs are stored.
-- runs_updated (0002) serves the unfiltered list and updated_after.
CREATE INDEX runs_list_workflow ON runs (workflow_id, updated_at, id);
CREATE INDEX runs_list_state ON runs (state, updated_at, id);
CREATE INDEX runs_list_status ON runs (status, updated_at, id);
CREATE INDEX runs_list_workflow_state ON runs (workflow_id, state, updated_at, id);
