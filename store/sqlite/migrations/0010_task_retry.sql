-- Task retries (SPEC section 17): a retried task is enqueued with the
-- attempt it runs (1 = the first) and the time before which it is not
-- claimed (Unix nanoseconds; 0 = at once).
ALTER TABLE tasks ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE tasks ADD COLUMN not_before INTEGER NOT NULL DEFAULT 0;
