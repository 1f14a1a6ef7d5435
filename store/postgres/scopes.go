package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

var _ store.DispatcherScopes = (*Store)(nil)

// PutDispatcherScopes implements store.DispatcherScopes.
func (s *Store) PutDispatcherScopes(ctx context.Context, invID string, scopes []string) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO ledger_scopes (inv_id, scopes) VALUES ($1, $2) ON CONFLICT (inv_id) DO NOTHING`, invID, strings.Join(scopes, ",")); err != nil {
		return fmt.Errorf("postgres: dispatcher scopes of %s: %w", invID, err)
	}
	return nil
}

// DispatcherScopes implements store.DispatcherScopes.
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
