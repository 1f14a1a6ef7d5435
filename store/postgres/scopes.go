package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

// DispatcherScopes implements store.LedgerStore.
func (s *Store) DispatcherScopes(ctx context.Context, invID string) ([]string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SELECT scopes FROM ledger_scopes WHERE inv_id = $1`, invID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: dispatcher scopes of %s: %w", invID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: dispatcher scopes of %s: %w", invID, err)
	}
	if v == "" {
		return []string{}, nil
	}
	return strings.Split(v, ","), nil
}
