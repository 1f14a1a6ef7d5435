-- A task's place in the claim order (ClaimTask): ready_at is when it
-- became claimable (while pending: its creation, or its retry's
-- not-before time; while running: its lease's end). A claim walks
-- tasks_ready from the start and reads only claimable tasks, however many
-- wait out a retry's backoff or a live lease (tasks_open, by creation,
-- read every one of those before a task created after them).
ALTER TABLE tasks ADD COLUMN ready_at INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET ready_at = CASE
    WHEN status = 'running' THEN lease_until
    WHEN not_before != 0 THEN not_before
    ELSE created_at END
  WHERE status != 'done';
CREATE INDEX tasks_ready ON tasks (ready_at, id) WHERE status != 'done';
DROP INDEX tasks_open;
