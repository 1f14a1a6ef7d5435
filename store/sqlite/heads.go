package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// headsCheckQuery finds a key whose ledger_heads entry is missing or names
// another record or type than the key's newest record, or an entry that
// names no record of its key.
const headsCheckQuery = `SELECT k FROM (
	SELECT g.key AS k FROM (SELECT key, MAX(seq) AS seq FROM ledger GROUP BY key) g
		JOIN ledger l ON l.seq = g.seq
		LEFT JOIN ledger_heads h ON h.key = g.key
		WHERE h.key IS NULL OR h.seq != g.seq OR h.type != l.type
	UNION ALL
	SELECT h.key AS k FROM ledger_heads h LEFT JOIN ledger l ON l.seq = h.seq AND l.key = h.key WHERE l.seq IS NULL
	UNION ALL
	SELECT key AS k FROM ledger WHERE seq < 1
) LIMIT 1`

// CheckLedgerHeads implements store.LedgerStore.
func (s *Store) CheckLedgerHeads(ctx context.Context) (string, error) {
	var key string
	err := s.queryRow(ctx, headsCheckQuery).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: check ledger heads: %w", err)
	}
	return key, nil
}
