package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

const ledgerCols = `seq, inv_id, key, type, body, timestamp, source, entry_hash, supersedes, result_of, replay_of`

func scanRecord(row pgx.Row) (store.LedgerRecord, error) {
	var r store.LedgerRecord
	var body []byte
	var ts time.Time
	if err := row.Scan(&r.Seq, &r.InvID, &r.Key, &r.Type, &body, &ts, &r.Source, &r.EntryHash, &r.Supersedes, &r.ResultOf, &r.ReplayOf); err != nil {
		return store.LedgerRecord{}, err
	}
	r.Body = json.RawMessage(body)
	r.Timestamp = utc(ts)
	return r, nil
}

// AppendLedger implements store.LedgerStore. The transaction first takes an
// advisory lock private to this schema's ledger (pg_advisory_xact_lock,
// released by COMMIT or ROLLBACK), so appends from every process are
// serialised: the next seq read after the lock is the previous holder's
// seq + 1 and no other append can take it. build runs inside the
// transaction; its error rolls everything back.
func (s *Store) AppendLedger(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error)) (store.LedgerRecord, error) {
	var out store.LedgerRecord
	var buildErr error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		buildErr = nil
		// One round trip: the lock, then two statements whose snapshots
		// (READ COMMITTED: one per statement) are taken after the lock.
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, s.ledgerKey)
		b.Queue(`SELECT COALESCE(MAX(seq), 0) + 1 FROM ledger`)
		b.Queue(`SELECT `+ledgerCols+` FROM ledger WHERE seq = (SELECT seq FROM ledger_heads WHERE key = $1)`, key)
		br := tx.SendBatch(ctx, b)
		var p store.LedgerPrev
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("ledger lock: %w", err)
		}
		if err := br.QueryRow().Scan(&p.Seq); err != nil {
			br.Close()
			return fmt.Errorf("ledger seq: %w", err)
		}
		rec, err := scanRecord(br.QueryRow())
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			br.Close()
			return fmt.Errorf("ledger head of %s: %w", key, err)
		default:
			p.Latest = &rec
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("ledger head of %s: %w", key, err)
		}
		out, buildErr = build(p)
		if buildErr != nil {
			return buildErr
		}
		if out.Seq != p.Seq || out.Key != key {
			return fmt.Errorf("built record has seq %d key %q, want %d %q", out.Seq, out.Key, p.Seq, key)
		}
		if len(out.Body) == 0 {
			return fmt.Errorf("built record %s has no body", out.InvID)
		}
		b = &pgx.Batch{}
		b.Queue(`INSERT INTO ledger (`+ledgerCols+`) VALUES ($1, $2, $3, $4, $5::json, $6, $7, $8, $9, $10, $11)`,
			out.Seq, out.InvID, out.Key, out.Type, string(out.Body), out.Timestamp, out.Source, out.EntryHash, out.Supersedes, out.ResultOf, out.ReplayOf)
		b.Queue(`INSERT INTO ledger_heads (key, seq, type) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET seq = excluded.seq, type = excluded.type`, out.Key, out.Seq, out.Type)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("append record %s: %w", out.InvID, err)
		}
		return nil
	})
	if err != nil {
		if buildErr != nil {
			return store.LedgerRecord{}, buildErr // the builder's own error, as is
		}
		return store.LedgerRecord{}, fmt.Errorf("postgres: ledger %s: %w", key, err)
	}
	return out, nil
}

// LedgerRecord implements store.LedgerStore.
func (s *Store) LedgerRecord(ctx context.Context, invID string) (store.LedgerRecord, error) {
	r, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+ledgerCols+` FROM ledger WHERE inv_id = $1`, invID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("postgres: record %s: %w", invID, store.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("postgres: record %s: %w", invID, err)
	}
	return r, nil
}

func (s *Store) records(ctx context.Context, query string, args ...any) ([]store.LedgerRecord, error) {
	return s.recordsBounded(ctx, false, query, args...)
}

// recordsBounded reads records; when bounded, it stops once their bodies
// reach store.MaxPageBytes.
func (s *Store) recordsBounded(ctx context.Context, bounded bool, query string, args ...any) ([]store.LedgerRecord, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: ledger: %w", err)
	}
	defer rows.Close()
	out := []store.LedgerRecord{}
	size := 0
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: ledger: %w", err)
		}
		out = append(out, r)
		if size += len(r.Body); bounded && store.PageFull(size) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: ledger: %w", err)
	}
	return out, nil
}

// LedgerHistory implements store.LedgerStore.
func (s *Store) LedgerHistory(ctx context.Context, key string, after int64, limit int) ([]store.LedgerRecord, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = int64(limit)
	}
	out, err := s.recordsBounded(ctx, true, `SELECT `+ledgerCols+` FROM ledger WHERE key = $1 AND seq > $2 ORDER BY seq LIMIT $3`, key, after, lim)
	if err == nil && len(out) == 0 {
		if _, err := s.LedgerHead(ctx, key); err != nil {
			return nil, err
		}
	}
	return out, err
}

// LedgerHead implements store.LedgerStore.
func (s *Store) LedgerHead(ctx context.Context, key string) (store.LedgerRecord, error) {
	r, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+ledgerCols+` FROM ledger WHERE seq = (SELECT seq FROM ledger_heads WHERE key = $1)`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("postgres: key %s: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("postgres: ledger head: %w", err)
	}
	return r, nil
}

// LedgerRange implements store.LedgerStore.
func (s *Store) LedgerRange(ctx context.Context, from, to int64) ([]store.LedgerRecord, error) {
	return s.records(ctx, `SELECT `+ledgerCols+` FROM ledger WHERE seq >= $1 AND seq < $2 ORDER BY seq`, from, to)
}

// LedgerSize implements store.LedgerStore.
func (s *Store) LedgerSize(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM ledger`).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: ledger size: %w", err)
	}
	return n, nil
}

// LedgerLatest implements store.LedgerStore.
func (s *Store) LedgerLatest(ctx context.Context, typ, after string, limit int) ([]store.LedgerRecord, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = int64(limit)
	}
	return s.recordsBounded(ctx, true, `SELECT l.seq, l.inv_id, l.key, l.type, l.body, l.timestamp, l.source, l.entry_hash, l.supersedes, l.result_of, l.replay_of
		FROM ledger_heads h JOIN ledger l ON l.seq = h.seq
		WHERE h.type = $1 AND h.key > $2 ORDER BY h.key LIMIT $3`, typ, after, lim)
}

// ReplayedBy implements store.LedgerStore.
func (s *Store) ReplayedBy(ctx context.Context, invID string) ([]string, error) {
	// replay_of <> '' lets even a generic plan use the partial index ledger_replay.
	rows, err := s.pool.Query(ctx, `SELECT inv_id FROM ledger WHERE replay_of = $1 AND replay_of <> '' ORDER BY seq`, invID)
	if err != nil {
		return nil, fmt.Errorf("postgres: replayed by %s: %w", invID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: replayed by %s: %w", invID, err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}
