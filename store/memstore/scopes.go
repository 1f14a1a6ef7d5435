package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/asmp-dev/asmp/store"
)

// DispatcherScopes implements store.LedgerStore.
func (s *Store) DispatcherScopes(ctx context.Context, invID string) ([]string, error) {
	s.mu.RLock()
	v, ok := s.scopes[invID]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("memstore: dispatcher scopes of %s: %w", invID, store.ErrNotFound)
	}
	return slices.Clone(v), nil
}

// CheckLedgerHeads implements store.LedgerStore: the index of each key's
// records lives in this process only, written by the appends themselves,
// so it always agrees.
func (s *Store) CheckLedgerHeads(ctx context.Context) (string, error) { return "", nil }
