package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/asmp-dev/asmp/store"
)

const ledgerCols = `seq, inv_id, key, type, body, timestamp, source, entry_hash, supersedes, result_of, replay_of`

type scanner interface{ Scan(...any) error }

func scanRecord(sc scanner) (store.LedgerRecord, error) {
	var r store.LedgerRecord
	var body string
	var ts int64
	if err := sc.Scan(&r.Seq, &r.InvID, &r.Key, &r.Type, &body, &ts, &r.Source, &r.EntryHash, &r.Supersedes, &r.ResultOf, &r.ReplayOf); err != nil {
		return r, err
	}
	r.Body = json.RawMessage(body)
	r.Timestamp = fromNanos(ts)
	return r, nil
}

// AppendLedger implements store.LedgerStore.
func (s *Store) AppendLedger(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error)) (store.LedgerRecord, error) {
	var out store.LedgerRecord
	err := s.write(ctx, func(tx wtx) error {
		var p store.LedgerPrev
		if err := tx.QueryRow(`SELECT COALESCE(MAX(seq), 0) + 1 FROM ledger`).Scan(&p.Seq); err != nil {
			return fmt.Errorf("sqlite: ledger seq: %w", err)
		}
		latest, err := scanRecord(tx.QueryRow(`SELECT `+ledgerCols+` FROM ledger WHERE seq = (SELECT seq FROM ledger_heads WHERE key = ?)`, key))
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("sqlite: ledger head: %w", err)
		default:
			p.Latest = &latest
		}
		rec, err := build(p)
		if err != nil {
			return err
		}
		if rec.Seq != p.Seq || rec.Key != key {
			return fmt.Errorf("sqlite: built record has seq %d key %q, want %d %q", rec.Seq, rec.Key, p.Seq, key)
		}
		if _, err := tx.Exec(`INSERT INTO ledger (`+ledgerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			rec.Seq, rec.InvID, rec.Key, rec.Type, string(rec.Body), nanos(rec.Timestamp), rec.Source, rec.EntryHash, rec.Supersedes, rec.ResultOf, rec.ReplayOf); err != nil {
			return fmt.Errorf("sqlite: append record: %w", err)
		}
		if _, err := tx.Exec(`INSERT INTO ledger_heads (key, seq, type) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET seq = excluded.seq, type = excluded.type`, rec.Key, rec.Seq, rec.Type); err != nil {
			return fmt.Errorf("sqlite: ledger head: %w", err)
		}
		out = rec
		return nil
	})
	if err != nil {
		return store.LedgerRecord{}, err
	}
	return out, nil
}

// LedgerRecord implements store.LedgerStore.
func (s *Store) LedgerRecord(ctx context.Context, invID string) (store.LedgerRecord, error) {
	r, err := scanRecord(s.queryRow(ctx, `SELECT `+ledgerCols+` FROM ledger WHERE inv_id = ?`, invID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("sqlite: record %s: %w", invID, store.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("sqlite: record: %w", err)
	}
	return r, nil
}

func (s *Store) records(ctx context.Context, query string, args ...any) ([]store.LedgerRecord, error) {
	return s.recordsBounded(ctx, false, query, args...)
}

// recordsBounded reads records; when bounded, it stops once their bodies
// reach store.MaxPageBytes.
func (s *Store) recordsBounded(ctx context.Context, bounded bool, query string, args ...any) ([]store.LedgerRecord, error) {
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: ledger: %w", err)
	}
	defer rows.Close()
	out := []store.LedgerRecord{}
	size := 0
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: ledger: %w", err)
		}
		out = append(out, r)
		if size += len(r.Body); bounded && store.PageFull(size) {
			break
		}
	}
	return out, rows.Err()
}

// LedgerHistory implements store.LedgerStore.
func (s *Store) LedgerHistory(ctx context.Context, key string, after int64, limit int) ([]store.LedgerRecord, error) {
	if limit <= 0 {
		limit = -1
	}
	out, err := s.recordsBounded(ctx, true, `SELECT `+ledgerCols+` FROM ledger WHERE key = ? AND seq > ? ORDER BY seq LIMIT ?`, key, after, limit)
	if err == nil && len(out) == 0 {
		if _, err := s.LedgerHead(ctx, key); err != nil {
			return nil, err
		}
	}
	return out, err
}

// LedgerHead implements store.LedgerStore.
func (s *Store) LedgerHead(ctx context.Context, key string) (store.LedgerRecord, error) {
	r, err := scanRecord(s.queryRow(ctx, headQuery, key))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("sqlite: key %s: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("sqlite: ledger head: %w", err)
	}
	return r, nil
}

// LedgerRange implements store.LedgerStore.
func (s *Store) LedgerRange(ctx context.Context, from, to int64) ([]store.LedgerRecord, error) {
	return s.records(ctx, `SELECT `+ledgerCols+` FROM ledger WHERE seq >= ? AND seq < ? ORDER BY seq`, from, to)
}

// LedgerSize implements store.LedgerStore.
func (s *Store) LedgerSize(ctx context.Context) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM ledger`).Scan(&n)
	return n, err
}

// LedgerLatest implements store.LedgerStore.
func (s *Store) LedgerLatest(ctx context.Context, typ, after string, limit int) ([]store.LedgerRecord, error) {
	if limit <= 0 {
		limit = -1
	}
	return s.recordsBounded(ctx, true, `SELECT l.seq, l.inv_id, l.key, l.type, l.body, l.timestamp, l.source, l.entry_hash, l.supersedes, l.result_of, l.replay_of
		FROM ledger_heads h JOIN ledger l ON l.seq = h.seq
		WHERE h.type = ? AND h.key > ? ORDER BY h.key LIMIT ?`, typ, after, limit)
}

// replayedByQuery repeats the ledger_replay index's condition (a
// non-empty replay_of): without it SQLite cannot use that partial index
// for a parameter and scans the whole ledger on every call.
const replayedByQuery = `SELECT inv_id FROM ledger WHERE replay_of = ? AND replay_of != '' ORDER BY seq`

// ReplayedBy implements store.LedgerStore.
func (s *Store) ReplayedBy(ctx context.Context, invID string) ([]string, error) {
	rows, err := s.query(ctx, replayedByQuery, invID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: replayed by: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
