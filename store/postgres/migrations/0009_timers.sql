-- Timers of states (SPEC section 17): the pending timers of each run's
-- current entry into its state, written by the commit that enters it and
-- deleted by the one that leaves it, with their run (ON DELETE CASCADE),
-- or once handled. ready_at is when the timer may be claimed: due_at, or
-- the end of its lease while a claimer holds it (lease_until, NULL when
-- none); claims (FOR UPDATE SKIP LOCKED) and the engine's wake-up walk
-- timers_ready from its start, so they cost the due timers, not the
-- pending ones. timers_due serves GET /runs?due_before= (the runs of the
-- timers due before a time), timers_run the commits that replace a run's.
CREATE TABLE timers (
    id          text COLLATE "C" PRIMARY KEY,
    run_id      text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    workflow_id text NOT NULL,
    state       text NOT NULL,
    version     bigint NOT NULL,
    action      text NOT NULL,
    due_at      timestamptz NOT NULL,
    ready_at    timestamptz NOT NULL,
    data        json NOT NULL,
    owner       text NOT NULL DEFAULT '',
    lease_until timestamptz
);
CREATE INDEX timers_ready ON timers (ready_at, id);
CREATE INDEX timers_due ON timers (due_at, run_id);
CREATE INDEX timers_run ON timers (run_id);
