-- A delivery's retry_base is its attempts when it was last redelivered:
-- the retry schedule numbers the attempts since from 1 (store.Delivery
-- RetryBase), so a redelivered message waits the first backoff again.
ALTER TABLE webhook_deliveries ADD COLUMN retry_base integer NOT NULL DEFAULT 0;
