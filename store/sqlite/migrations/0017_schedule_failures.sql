-- A schedule's last failure (store.Schedule LastFailure): the latest tick
-- whose run could not be started (0: none) and why.
ALTER TABLE schedules ADD COLUMN failed_tick INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN failed_error TEXT NOT NULL DEFAULT '';
