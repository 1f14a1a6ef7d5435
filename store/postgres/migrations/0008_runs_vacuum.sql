-- Runs are updated in place on every transition, and each update of
-- updated_at leaves a dead index entry in every run-list index. With the
-- default autovacuum thresholds (20% of the table) a table of 1,000,000
-- runs waits for 200,000 dead rows before it is vacuumed, and the newest
-- page of GET /runs walks tens of thousands of them meanwhile. Vacuum this
-- table after 1% of its rows (plus the default 50) instead, and analyze it
-- after 2%.
ALTER TABLE runs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02
);
