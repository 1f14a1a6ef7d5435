package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/asmp-dev/asmp/store"
)

var _ store.DispatcherScopes = (*Store)(nil)

// PutDispatcherScopes implements store.DispatcherScopes.
func (s *Store) PutDispatcherScopes(ctx context.Context, invID string, scopes []string) error {
	s.scopes.LoadOrStore(invID, slices.Clone(scopes)) // the first answer stands
	return nil
}

// DispatcherScopes implements store.DispatcherScopes.
func (s *Store) DispatcherScopes(ctx context.Context, invID string) ([]string, error) {
	v, ok := s.scopes.Load(invID)
	if !ok {
		return nil, fmt.Errorf("memstore: dispatcher scopes of %s: %w", invID, store.ErrNotFound)
	}
	return slices.Clone(v.([]string)), nil
}
