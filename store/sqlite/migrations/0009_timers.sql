-- Timers of states (SPEC section 17): the pending timers of each run's
-- current entry into its state, written by the commit that enters it and
-- deleted by the one that leaves it (or by DeleteRun, or once handled).
-- Times are Unix nanoseconds, as elsewhere. ready_at is when the timer
-- may be claimed: due_at, or the end of its lease while a claimer holds
-- it (lease_until, 0 when none); claims and the engine's wake-up walk
-- timers_ready from its start, so they cost the due timers, not the
-- pending ones. timers_due serves GET /runs?due_before= (the runs of the
-- timers due before a time), timers_run the commits that replace a run's.
CREATE TABLE timers (
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
);
CREATE INDEX timers_ready ON timers (ready_at, id);
CREATE INDEX timers_due ON timers (due_at, run_id);
CREATE INDEX timers_run ON timers (run_id);
