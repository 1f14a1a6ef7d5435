package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/asmp-dev/asmp/store"
)

const ledgerCols = `seq, inv_id, key, type, body, timestamp, source, entry_hash, supersedes, result_of, replay_of, canonical`

type scanner interface{ Scan(...any) error }

func scanRecord(sc scanner) (store.LedgerRecord, error) {
	var r store.LedgerRecord
	var body string
	var ts int64
	if err := sc.Scan(&r.Seq, &r.InvID, &r.Key, &r.Type, &body, &ts, &r.Source, &r.EntryHash, &r.Supersedes, &r.ResultOf, &r.ReplayOf, &r.Canonical); err != nil {
		return r, err
	}
	r.Body = json.RawMessage(body)
	r.Timestamp = fromNanos(ts)
	return r, nil
}

// AppendLedgerSigned implements store.Store. The records of one group
// commit share one checkpoint: the writer signs it once all of the batch's
// requests have run, before COMMIT.
func (s *Store) AppendLedgerSigned(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error), sign store.LedgerSigner) (store.LedgerRecord, store.LedgerCheckpoint, error) {
	if sign == nil {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, errors.New("sqlite: a ledger append needs a signer")
	}
	var out store.LedgerRecord
	req := &writeReq{fn: s.appendFn(key, build, &out), seal: sign, err: make(chan error, 1)}
	if err := s.enqueue(ctx, req).Wait(); err != nil {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, err
	}
	return out, req.sealed, nil
}

func (s *Store) appendFn(key string, build func(store.LedgerPrev) (store.LedgerRecord, error), out *store.LedgerRecord) func(tx wtx) error {
	return func(tx wtx) error {
		var p store.LedgerPrev
		if err := tx.QueryRow(`SELECT COALESCE(MAX(seq), 0) + 1 FROM ledger`).Scan(&p.Seq); err != nil {
			return fmt.Errorf("sqlite: ledger seq: %w", err)
		}
		latest, err := scanRecord(tx.QueryRow(`SELECT `+ledgerCols+` FROM ledger WHERE key = ? ORDER BY seq DESC LIMIT 1`, key))
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
		if _, err := tx.Exec(`INSERT INTO ledger (`+ledgerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			rec.Seq, rec.InvID, rec.Key, rec.Type, string(rec.Body), nanos(rec.Timestamp), rec.Source, rec.EntryHash, rec.Supersedes, rec.ResultOf, rec.ReplayOf, rec.Canonical); err != nil {
			return fmt.Errorf("sqlite: append record: %w", err)
		}
		if _, err := tx.Exec(`INSERT INTO ledger_heads (key, seq, type) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET seq = excluded.seq, type = excluded.type`, rec.Key, rec.Seq, rec.Type); err != nil {
			return fmt.Errorf("sqlite: ledger head: %w", err)
		}
		if rec.DispatcherScopes != nil {
			if _, err := tx.Exec(`INSERT INTO ledger_scopes (inv_id, scopes) VALUES (?, ?)`, rec.InvID, strings.Join(rec.DispatcherScopes, ",")); err != nil {
				return fmt.Errorf("sqlite: dispatcher scopes of %s: %w", rec.InvID, err)
			}
		}
		*out = rec
		return nil
	}
}

const checkpointCols = `tree_size, prev_size, root_hash, note, public_key, compact, created_at`

func scanCheckpoint(sc scanner) (store.LedgerCheckpoint, error) {
	var ck store.LedgerCheckpoint
	var compact []byte
	var ts int64
	if err := sc.Scan(&ck.TreeSize, &ck.PrevSize, &ck.RootHash, &ck.Note, &ck.PublicKey, &compact, &ts); err != nil {
		return ck, err
	}
	ck.Range = store.SplitRange(compact)
	ck.Time = fromNanos(ts)
	return ck, nil
}

// seal signs and stores the checkpoint of a batch's ledger records, in
// the writer's transaction.
func (s *Store) seal(tx wtx, sign store.LedgerSigner) (store.LedgerCheckpoint, error) {
	var prev *store.LedgerCheckpoint
	ck, err := scanCheckpoint(tx.QueryRow(`SELECT ` + checkpointCols + ` FROM ledger_checkpoints ORDER BY tree_size DESC LIMIT 1`))
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return ck, fmt.Errorf("sqlite: newest checkpoint: %w", err)
	default:
		prev = &ck
	}
	after := int64(0)
	if prev != nil {
		after = prev.TreeSize
	}
	st, err := s.wstmt(`SELECT ` + ledgerCols + ` FROM ledger WHERE seq > ? ORDER BY seq`)
	if err != nil {
		return ck, fmt.Errorf("sqlite: checkpoint records: %w", err)
	}
	rows, err := st.Query(after)
	if err != nil {
		return ck, fmt.Errorf("sqlite: checkpoint records: %w", err)
	}
	var added []store.LedgerRecord
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			rows.Close()
			return ck, fmt.Errorf("sqlite: checkpoint records: %w", err)
		}
		added = append(added, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return ck, fmt.Errorf("sqlite: checkpoint records: %w", err)
	}
	if len(added) == 0 {
		return ck, errors.New("sqlite: no ledger record to sign")
	}
	out, err := sign(prev, added)
	if err != nil {
		return out, err
	}
	if err := insertCheckpoint(tx, out); err != nil {
		return out, err
	}
	return out, nil
}

func insertCheckpoint(tx interface {
	Exec(string, ...any) (sql.Result, error)
}, ck store.LedgerCheckpoint) error {
	if _, err := tx.Exec(`INSERT INTO ledger_checkpoints (`+checkpointCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		ck.TreeSize, ck.PrevSize, ck.RootHash, ck.Note, ck.PublicKey, store.JoinRange(ck.Range), nanos(ck.Time)); err != nil {
		if strings.Contains(err.Error(), "UNIQUE") || strings.Contains(err.Error(), "PRIMARY KEY") {
			return fmt.Errorf("sqlite: checkpoint of tree size %d: %w", ck.TreeSize, store.ErrExists)
		}
		return fmt.Errorf("sqlite: store checkpoint: %w", err)
	}
	return nil
}

// LatestLedgerCheckpoint implements store.LedgerStore.
func (s *Store) LatestLedgerCheckpoint(ctx context.Context) (store.LedgerCheckpoint, error) {
	ck, err := scanCheckpoint(s.queryRow(ctx, `SELECT `+checkpointCols+` FROM ledger_checkpoints ORDER BY tree_size DESC LIMIT 1`))
	if errors.Is(err, sql.ErrNoRows) {
		return ck, fmt.Errorf("sqlite: checkpoint: %w", store.ErrNotFound)
	}
	if err != nil {
		return ck, fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	return ck, nil
}

// LedgerCheckpoints implements store.LedgerStore.
func (s *Store) LedgerCheckpoints(ctx context.Context, after int64, limit int) ([]store.LedgerCheckpoint, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.query(ctx, `SELECT `+checkpointCols+` FROM ledger_checkpoints WHERE tree_size > ? ORDER BY tree_size LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: checkpoints: %w", err)
	}
	defer rows.Close()
	out := []store.LedgerCheckpoint{}
	for rows.Next() {
		ck, err := scanCheckpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: checkpoints: %w", err)
		}
		out = append(out, ck)
	}
	return out, rows.Err()
}

// PutLedgerCheckpoint implements store.LedgerStore.
func (s *Store) PutLedgerCheckpoint(ctx context.Context, ck store.LedgerCheckpoint) error {
	return s.write(ctx, func(tx wtx) error { return insertCheckpoint(tx, ck) })
}

// LedgerUncanonical implements store.LedgerStore.
func (s *Store) LedgerUncanonical(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	if err := s.queryRow(ctx, `SELECT MIN(seq) FROM ledger WHERE canonical IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: records without canonical bytes: %w", err)
	}
	return n.Int64, nil
}

// SetLedgerCanonical implements store.LedgerStore.
func (s *Store) SetLedgerCanonical(ctx context.Context, canonical map[int64][]byte) error {
	return s.write(ctx, func(tx wtx) error {
		for seq, c := range canonical {
			if _, err := tx.Exec(`UPDATE ledger SET canonical = ? WHERE seq = ? AND canonical IS NULL`, c, seq); err != nil {
				return fmt.Errorf("sqlite: canonical bytes of %d: %w", seq, err)
			}
		}
		return nil
	})
}

// LedgerVerified implements store.LedgerStore.
func (s *Store) LedgerVerified(ctx context.Context) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT verified_size FROM ledger_state WHERE id = 1`).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: verified size: %w", err)
	}
	return n, nil
}

// SetLedgerVerified implements store.LedgerStore.
func (s *Store) SetLedgerVerified(ctx context.Context, size int64) error {
	return s.write(ctx, func(tx wtx) error {
		if _, err := tx.Exec(`INSERT INTO ledger_state (id, verified_size) VALUES (1, ?)
			ON CONFLICT (id) DO UPDATE SET verified_size = MAX(verified_size, excluded.verified_size)`, size); err != nil {
			return fmt.Errorf("sqlite: verified size: %w", err)
		}
		return nil
	})
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
	// ledger_heads names the keys of each type; each key's latest
	// record is read through the ledger's own (key, seq) index, so an
	// edited head can not serve an older version as the current one.
	return s.recordsBounded(ctx, true, `SELECT l.seq, l.inv_id, l.key, l.type, l.body, l.timestamp, l.source, l.entry_hash, l.supersedes, l.result_of, l.replay_of, l.canonical
		FROM ledger_heads h JOIN ledger l ON l.seq = (SELECT MAX(seq) FROM ledger WHERE key = h.key)
		WHERE h.type = ? AND h.key > ? ORDER BY h.key LIMIT ?`, typ, after, limit)
}

// replayedByQuery repeats the ledger_replay index's condition (a
// non-empty replay_of): without it SQLite cannot use that partial index
// for a parameter and scans the whole ledger on every call.
const replayedByQuery = `SELECT inv_id FROM ledger WHERE replay_of = ? AND replay_of != '' ORDER BY seq LIMIT ?`

// ReplayedBy implements store.LedgerStore.
func (s *Store) ReplayedBy(ctx context.Context, invID string, limit int) ([]string, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.query(ctx, replayedByQuery, invID, limit)
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
