package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// EnqueueDeliveries implements store.WebhookStore: one write of the
// writer, which checks the run's version and the ids first.
func (s *Store) EnqueueDeliveries(ctx context.Context, runID string, seq int64, at time.Time, ds []store.Delivery) error {
	out, err := store.PrepareEnqueue(runID, seq, at, ds)
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx wtx) error {
		var v int64
		err := tx.QueryRow(`SELECT version FROM runs WHERE id = ?`, runID).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: run %s: %w", runID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: run %s: %w", runID, err)
		}
		if v != seq {
			return fmt.Errorf("sqlite: run %s at version %d, not %d: %w", runID, v, seq, store.ErrConflict)
		}
		for _, d := range out {
			var one int
			err := tx.QueryRow(`SELECT 1 FROM webhook_deliveries WHERE id = ?`, d.ID).Scan(&one)
			if err == nil {
				return fmt.Errorf("sqlite: delivery %s: %w", d.ID, store.ErrExists)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite: delivery %s: %w", d.ID, err)
			}
		}
		return applyOutbox(tx, &store.Commit{Outbox: out})
	})
}
