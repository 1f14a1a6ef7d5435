-- A schedule's last failure (store.Schedule LastFailure): the latest tick
-- whose run could not be started (NULL: none) and why.
ALTER TABLE schedules ADD COLUMN failed_tick timestamptz;
ALTER TABLE schedules ADD COLUMN failed_error text NOT NULL DEFAULT '';
