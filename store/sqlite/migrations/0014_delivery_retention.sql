-- Retention of webhook deliveries (PruneDeliveries): the settled ones
-- (delivered, failed) by the time they settled, their last attempt
-- (updated_at), so a prune walks the oldest from the index's start and
-- reads no pending delivery. A delivery's attempts go with it through
-- webhook_attempts' primary key (delivery_id, n).
CREATE INDEX webhook_deliveries_settled ON webhook_deliveries (updated_at, id) WHERE status <> 'pending';
