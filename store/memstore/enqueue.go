package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// EnqueueDeliveries implements store.WebhookStore.
func (s *Store) EnqueueDeliveries(ctx context.Context, runID string, seq int64, at time.Time, ds []store.Delivery) error {
	out, err := store.PrepareEnqueue(runID, seq, at, ds)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.lookup(runID)
	if !ok {
		return fmt.Errorf("memstore: run %s: %w", runID, store.ErrNotFound)
	}
	if v := s.rec(slot).version; v != seq {
		return fmt.Errorf("memstore: run %s at version %d, not %d: %w", runID, v, seq, store.ErrConflict)
	}
	c := store.Commit{Outbox: out}
	if err := s.checkOutbox(&c); err != nil {
		return err
	}
	s.applyOutbox(&c)
	return nil
}
