-- Retention: stale runs in (updated_at, id) order.
CREATE INDEX runs_updated ON runs (updated_at, id);
