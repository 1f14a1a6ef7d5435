package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/asmp-dev/asmp/store"
)

const ledgerCols = `seq, inv_id, key, type, body, timestamp, source, entry_hash, supersedes, result_of, replay_of, canonical`

func scanRecord(row pgx.Row) (store.LedgerRecord, error) {
	var r store.LedgerRecord
	var body []byte
	var ts time.Time
	if err := row.Scan(&r.Seq, &r.InvID, &r.Key, &r.Type, &body, &ts, &r.Source, &r.EntryHash, &r.Supersedes, &r.ResultOf, &r.ReplayOf, &r.Canonical); err != nil {
		return store.LedgerRecord{}, err
	}
	r.Body = json.RawMessage(body)
	r.Timestamp = utc(ts)
	return r, nil
}

// AppendLedgerSigned implements store.Store. The transaction first takes
// an advisory lock private to this schema's ledger (pg_advisory_xact_lock,
// released by COMMIT or ROLLBACK), so appends from every process are
// serialised: the next seq read after the lock is the previous holder's
// seq + 1 and no other append can take it. build runs inside the
// transaction; its error rolls everything back. The checkpoint is signed
// and stored inside the append's transaction, under the advisory lock:
// two replicas never sign different roots for one tree size, and the
// checkpoints table's key refuses a second checkpoint of a size anyway.
func (s *Store) AppendLedgerSigned(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error), sign store.LedgerSigner) (store.LedgerRecord, store.LedgerCheckpoint, error) {
	if sign == nil {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, errors.New("postgres: a ledger append needs a signer")
	}
	var out store.LedgerRecord
	var ck store.LedgerCheckpoint
	var buildErr error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		buildErr = nil
		// One round trip: the lock, then two statements whose snapshots
		// (READ COMMITTED: one per statement) are taken after the lock.
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, s.ledgerKey)
		b.Queue(`SELECT COALESCE(MAX(seq), 0) + 1 FROM ledger`)
		b.Queue(`SELECT `+ledgerCols+` FROM ledger WHERE key = $1 ORDER BY seq DESC LIMIT 1`, key)
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
		b.Queue(`INSERT INTO ledger (`+ledgerCols+`) VALUES ($1, $2, $3, $4, $5::json, $6, $7, $8, $9, $10, $11, $12)`,
			out.Seq, out.InvID, out.Key, out.Type, string(out.Body), out.Timestamp, out.Source, out.EntryHash, out.Supersedes, out.ResultOf, out.ReplayOf, out.Canonical)
		b.Queue(`INSERT INTO ledger_heads (key, seq, type) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET seq = excluded.seq, type = excluded.type`, out.Key, out.Seq, out.Type)
		if out.DispatcherScopes != nil {
			b.Queue(`INSERT INTO ledger_scopes (inv_id, scopes) VALUES ($1, $2)`, out.InvID, strings.Join(out.DispatcherScopes, ","))
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("append record %s: %w", out.InvID, err)
		}
		var prev *store.LedgerCheckpoint
		last, err := scanCheckpoint(tx.QueryRow(ctx, `SELECT `+checkpointCols+` FROM ledger_checkpoints ORDER BY tree_size DESC LIMIT 1`))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("newest checkpoint: %w", err)
		default:
			prev = &last
		}
		after := int64(0)
		if prev != nil {
			after = prev.TreeSize
		}
		added := []store.LedgerRecord{out}
		if after != out.Seq-1 {
			rows, err := tx.Query(ctx, `SELECT `+ledgerCols+` FROM ledger WHERE seq > $1 ORDER BY seq`, after)
			if err != nil {
				return fmt.Errorf("checkpoint records: %w", err)
			}
			if added, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.LedgerRecord, error) { return scanRecord(r) }); err != nil {
				return fmt.Errorf("checkpoint records: %w", err)
			}
		}
		if ck, buildErr = sign(prev, added); buildErr != nil {
			return buildErr
		}
		return insertCheckpoint(ctx, tx, ck)
	})
	if err != nil {
		if buildErr != nil {
			return store.LedgerRecord{}, store.LedgerCheckpoint{}, buildErr // the builder's own error, as is
		}
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, fmt.Errorf("postgres: ledger %s: %w", key, err)
	}
	return out, ck, nil
}

const checkpointCols = `tree_size, prev_size, root_hash, note, public_key, compact, created_at`

func scanCheckpoint(row pgx.Row) (store.LedgerCheckpoint, error) {
	var ck store.LedgerCheckpoint
	var compact []byte
	var ts time.Time
	if err := row.Scan(&ck.TreeSize, &ck.PrevSize, &ck.RootHash, &ck.Note, &ck.PublicKey, &compact, &ts); err != nil {
		return ck, err
	}
	ck.Range = store.SplitRange(compact)
	ck.Time = utc(ts)
	return ck, nil
}

// execer is what a write goes through: the pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func insertCheckpoint(ctx context.Context, tx execer, ck store.LedgerCheckpoint) error {
	tag, err := tx.Exec(ctx, `INSERT INTO ledger_checkpoints (`+checkpointCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tree_size) DO NOTHING`,
		ck.TreeSize, ck.PrevSize, ck.RootHash, ck.Note, ck.PublicKey, store.JoinRange(ck.Range), ck.Time)
	if err != nil {
		return fmt.Errorf("store checkpoint: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("checkpoint of tree size %d: %w", ck.TreeSize, store.ErrExists)
	}
	return nil
}

// LatestLedgerCheckpoint implements store.Store.
func (s *Store) LatestLedgerCheckpoint(ctx context.Context) (store.LedgerCheckpoint, error) {
	ck, err := scanCheckpoint(s.pool.QueryRow(ctx, `SELECT `+checkpointCols+` FROM ledger_checkpoints ORDER BY tree_size DESC LIMIT 1`))
	if errors.Is(err, pgx.ErrNoRows) {
		return ck, fmt.Errorf("postgres: checkpoint: %w", store.ErrNotFound)
	}
	if err != nil {
		return ck, fmt.Errorf("postgres: checkpoint: %w", err)
	}
	return ck, nil
}

// LedgerCheckpoints implements store.Store.
func (s *Store) LedgerCheckpoints(ctx context.Context, after int64, limit int) ([]store.LedgerCheckpoint, error) {
	var lim any
	if limit > 0 {
		lim = int64(limit)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+checkpointCols+` FROM ledger_checkpoints WHERE tree_size > $1 ORDER BY tree_size LIMIT $2`, after, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: checkpoints: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.LedgerCheckpoint, error) { return scanCheckpoint(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: checkpoints: %w", err)
	}
	if out == nil {
		out = []store.LedgerCheckpoint{}
	}
	return out, nil
}

// PutLedgerCheckpoint implements store.LedgerStore.
func (s *Store) PutLedgerCheckpoint(ctx context.Context, ck store.LedgerCheckpoint) error {
	if err := insertCheckpoint(ctx, s.pool, ck); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// LedgerUncanonical implements store.LedgerStore.
func (s *Store) LedgerUncanonical(ctx context.Context) (int64, error) {
	var n *int64
	if err := s.pool.QueryRow(ctx, `SELECT MIN(seq) FROM ledger WHERE canonical IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: records without canonical bytes: %w", err)
	}
	if n == nil {
		return 0, nil
	}
	return *n, nil
}

// SetLedgerCanonical implements store.LedgerStore.
func (s *Store) SetLedgerCanonical(ctx context.Context, canonical map[int64][]byte) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for seq, c := range canonical {
			b.Queue(`UPDATE ledger SET canonical = $1 WHERE seq = $2 AND canonical IS NULL`, c, seq)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("postgres: canonical bytes: %w", err)
	}
	return nil
}

// LedgerVerified implements store.LedgerStore.
func (s *Store) LedgerVerified(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT verified_size FROM ledger_state WHERE id = 1`).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: verified size: %w", err)
	}
	return n, nil
}

// SetLedgerVerified implements store.LedgerStore.
func (s *Store) SetLedgerVerified(ctx context.Context, size int64) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO ledger_state (id, verified_size) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET verified_size = GREATEST(ledger_state.verified_size, excluded.verified_size)`, size); err != nil {
		return fmt.Errorf("postgres: verified size: %w", err)
	}
	return nil
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
	r, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+ledgerCols+` FROM ledger WHERE key = $1 ORDER BY seq DESC LIMIT 1`, key))
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
	// ledger_heads names the keys of each type; each key's latest
	// record is read through the ledger's own (key, seq) index, so an
	// edited head can not serve an older version as the current one.
	return s.recordsBounded(ctx, true, `SELECT l.seq, l.inv_id, l.key, l.type, l.body, l.timestamp, l.source, l.entry_hash, l.supersedes, l.result_of, l.replay_of, l.canonical
		FROM ledger_heads h JOIN ledger l ON l.seq = (SELECT MAX(seq) FROM ledger WHERE key = h.key)
		WHERE h.type = $1 AND h.key > $2 ORDER BY h.key LIMIT $3`, typ, after, lim)
}

// ReplayedBy implements store.LedgerStore.
func (s *Store) ReplayedBy(ctx context.Context, invID string, limit int) ([]string, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	// replay_of <> '' lets even a generic plan use the partial index ledger_replay.
	rows, err := s.pool.Query(ctx, `SELECT inv_id FROM ledger WHERE replay_of = $1 AND replay_of <> '' ORDER BY seq LIMIT $2`, invID, lim)
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
