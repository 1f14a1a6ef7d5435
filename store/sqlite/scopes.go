package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/asmp-dev/asmp/store"
)

// DispatcherScopes implements store.LedgerStore.
func (s *Store) DispatcherScopes(ctx context.Context, invID string) ([]string, error) {
	var v string
	err := s.queryRow(ctx, `SELECT scopes FROM ledger_scopes WHERE inv_id = ?`, invID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: dispatcher scopes of %s: %w", invID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: dispatcher scopes of %s: %w", invID, err)
	}
	return splitScopes(v), nil
}

func splitScopes(v string) []string {
	if v == "" {
		return []string{}
	}
	return strings.Split(v, ",")
}
