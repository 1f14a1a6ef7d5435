package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/asmp-dev/asmp/store"
)

// EnqueueDeliveries implements store.WebhookStore: one transaction that
// holds the run's row (FOR SHARE, so a commit of the run waits for it)
// while it checks the version and inserts the deliveries.
func (s *Store) EnqueueDeliveries(ctx context.Context, runID string, seq int64, at time.Time, ds []store.Delivery) error {
	out, err := store.PrepareEnqueue(runID, seq, at, ds)
	if err != nil {
		return err
	}
	c := &store.Commit{Outbox: out}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var v int64
		err := tx.QueryRow(ctx, `SELECT version FROM runs WHERE id = $1 FOR SHARE`, runID).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: run %s: %w", runID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("postgres: run %s: %w", runID, err)
		}
		if v != seq {
			return fmt.Errorf("postgres: run %s at version %d, not %d: %w", runID, v, seq, store.ErrConflict)
		}
		if len(out) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, outboxSQL(3, 1, 2), append([]any{runID, seq}, outboxArgs(c)...)...)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return fmt.Errorf("postgres: a delivery id of run %s is taken: %w", runID, store.ErrExists)
		}
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrExists) {
		return fmt.Errorf("postgres: enqueue deliveries of run %s: %w", runID, err)
	}
	return err
}
