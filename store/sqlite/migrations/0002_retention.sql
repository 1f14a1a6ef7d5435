-- Retention: stale runs in (updated_at, id) order, and a run's tasks.
CREATE INDEX runs_updated ON runs (updated_at, id);
CREATE INDEX tasks_run ON tasks (run_id);
