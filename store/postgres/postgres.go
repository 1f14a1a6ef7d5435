// Package postgres is the shared Store: PostgreSQL through pgx, for several
// asmp replicas serving one database (`asmp serve --db postgres://…`).
//
// # Concurrency
//
// Every method is safe for concurrent use by many goroutines and by many
// processes on the same database:
//
//   - CommitRun is a compare-and-set: UPDATE runs … WHERE id = $1 AND
//     version = $2, with the event insert, the task enqueue/complete and
//     the change notification in the same transaction. Under READ
//     COMMITTED a racing UPDATE waits for the row lock and then re-checks
//     the version, so exactly one of two writers of the same version wins
//     and the other gets store.ErrConflict. Commits that arrive together
//     share one transaction and one round trip (group commit: see
//     commit.go), each still a compare-and-set of its own run.
//   - AppendLedgerSigned takes a transaction-scoped advisory lock
//     (pg_advisory_xact_lock) before reading the next seq, so appends from
//     all processes are serialised and seqs are gap-free and unique; the
//     record builder runs inside that transaction and an error from it
//     rolls everything back.
//   - ClaimTask picks the oldest claimable task with FOR UPDATE SKIP
//     LOCKED in one statement, so two replicas never claim the same task.
//   - Migrations run under a session advisory lock, so replicas starting at
//     the same time apply each migration exactly once.
//
// Transactions that fail with a serialization failure or a deadlock
// (SQLSTATE 40001, 40P01) are retried a few times; AppendLedgerSigned may
// then call its builder more than once, as store.LedgerStore allows.
//
// # Durability
//
// A method that returns nil (for CommitRun: a Pending whose Wait returns
// nil) has committed its transaction with
// synchronous_commit on (Open turns it back on for its connections when the
// server's default is off), so an acknowledged write survives a crash of
// the asmp process and of the database server. Once COMMIT has been sent,
// the store waits for its outcome even if the caller's context ends, so a
// cancelled request is rarely left in doubt; as with any network database,
// an error caused by a lost connection during COMMIT does not prove that
// nothing was written, and the engine's compare-and-set makes a retry safe.
//
// # Notifications
//
// Every run commit (CreateRun, CommitRun) calls pg_notify('asmp_runs',
// run_id || ':' || version) inside its transaction, so the notification is
// delivered if and only if the commit is. Listen (store.Notifier) holds a
// dedicated connection with LISTEN asmp_runs and reconnects with backoff
// when it drops; notifications sent while it is disconnected are lost, and
// catching up from the event log is the engine's job (Options.OnListenResume
// tells it when).
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/asmp-dev/asmp/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Channel is the LISTEN/NOTIFY channel that carries run commits. Its
// payload is "<run id>:<version>".
const Channel = "asmp_runs"

// DefaultApplicationName is the application_name of the store's
// connections when the URL does not set one.
const DefaultApplicationName = "asmp"

const (
	// commitTimeout bounds how long a COMMIT is awaited once it has been
	// sent, whatever the caller's context says.
	commitTimeout = 30 * time.Second
	// maxTxAttempts bounds retries of serialization failures and deadlocks.
	maxTxAttempts = 5
)

// Options tunes Open. The zero value (or nil) is fine.
type Options struct {
	// MaxConns caps the connection pool. 0 keeps the URL's pool_max_conns
	// or pgxpool's default (the larger of 4 and the number of CPUs).
	MaxConns int32

	// Schema is the schema that holds asmp's tables. It is created if
	// missing and put first on the connections' search_path. "" uses the
	// connection's current schema (normally public).
	Schema string

	// Logger receives the listener's disconnect and reconnect reports.
	// nil means slog.Default(). Nothing logged contains the URL's password.
	Logger *slog.Logger

	// OnListenResume, when set, is called by Listen each time it has
	// re-established LISTEN after losing its connection (or after failing
	// to connect at first). Notifications sent in between are lost: the
	// callback is where the engine re-reads the runs it streams.
	OnListenResume func()

	// ListenPingInterval is how long Listen waits for a notification
	// before it pings the server to detect a dead connection. 0 means 30s.
	ListenPingInterval time.Duration

	// CommitLanes is how many group commits may be in flight at once,
	// each on its own connection, for disjoint runs: a run's commits all
	// take one lane, chosen by its id (see CommitRun). 0 means
	// DefaultCommitLanes, or 1 on a pool of fewer than 4 connections.
	CommitLanes int
}

// Store is a PostgreSQL-backed store.Store; it also implements
// store.Notifier and store.Pinger. Create it with Open.
type Store struct {
	pool      *pgxpool.Pool
	listenCfg *pgx.ConnConfig // for Listen's dedicated connections
	schema    string          // the schema holding the tables
	ledgerKey int64           // advisory lock key serialising ledger appends
	opts      Options
	desc      string // see String
	log       *slog.Logger
	closing   context.Context // cancelled by Close; stops Listen
	close     context.CancelFunc
	commits   lanes // CommitRun's group-commit queues (commit.go)
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
	_ store.Pinger   = (*Store)(nil)
)

// Open connects to the database at url (postgres://user:pass@host:port/db?…,
// or any connection string pgx accepts, including pool_* settings), applies
// pending migrations under an advisory lock and returns the store. Errors
// never contain the URL's password.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ListenPingInterval <= 0 {
		o.ListenPingInterval = 30 * time.Second
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx redacts passwords only on a best-effort basis: say nothing of the URL.
		return nil, errors.New("postgres: cannot parse the connection URL (it is not shown because it may hold a password); expected postgres://user:password@host:port/database?sslmode=…")
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	rp := cfg.ConnConfig.RuntimeParams
	if rp["application_name"] == "" {
		rp["application_name"] = DefaultApplicationName
	}
	if o.Schema != "" {
		rp["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	}
	// The Store's contract is that nil means durable: never run with
	// asynchronous commit, whatever the server's default.
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT set_config('synchronous_commit', 'on', false) WHERE current_setting('synchronous_commit') = 'off'`)
		return err
	}

	listenCfg := cfg.ConnConfig.Copy()
	listenCfg.RuntimeParams["application_name"] = rp["application_name"] + " listen"

	schema, err := migrate(ctx, cfg.ConnConfig.Copy(), o.Schema)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: pool: %w", err)
	}
	closing, cancel := context.WithCancel(context.Background())
	s := &Store{
		pool:      pool,
		listenCfg: listenCfg,
		schema:    schema,
		ledgerKey: lockKey("ledger", schema),
		opts:      o,
		desc:      describe(cfg.ConnConfig, schema),
		log:       o.Logger,
		closing:   closing,
		close:     cancel,
		commits:   newLanes(laneCount(o, cfg.MaxConns)),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.startCommitters()
	return s, nil
}

// String describes the database for logs and start-up messages, as
// "postgres user@host:port/database (schema name)". It never includes the
// password.
func (s *Store) String() string { return s.desc }

func describe(c *pgx.ConnConfig, schema string) string {
	return fmt.Sprintf("postgres %s@%s/%s (schema %s)", c.User, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), c.Database, schema)
}

// Schema returns the schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// Capabilities implements store.Store: durable, group commit (commits.go), and shared by every
// replica that opens the same database and schema.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{Durable: true, Shared: true, GroupCommit: true}
}

// Close commits the commits already queued, stops every Listen and closes the pool, waiting for connections in
// use to be returned.
func (s *Store) Close() error {
	s.closeCommitter()
	s.close()
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// lockKey derives a 64-bit advisory lock key for one purpose within one
// schema, so deployments in different schemas of a database do not
// serialise each other.
func lockKey(purpose, schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("asmp/" + purpose + "/" + schema))
	return int64(h.Sum64())
}

// migrate applies the embedded migrations that the database lacks, on a
// dedicated connection holding a session advisory lock, and returns the
// schema that holds the tables.
func migrate(ctx context.Context, cfg *pgx.ConnConfig, schema string) (string, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("postgres: connect: %w", err)
	}
	// Closing the session also releases its advisory lock.
	defer conn.Close(context.WithoutCancel(ctx))

	lockSchema := schema
	if lockSchema == "" {
		if err := conn.QueryRow(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&lockSchema); err != nil {
			return "", fmt.Errorf("postgres: current schema: %w", err)
		}
		if lockSchema == "" {
			return "", errors.New("postgres: no schema on the search_path exists; set Options.Schema or the URL's search_path")
		}
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockKey("migrate", lockSchema)); err != nil {
		return "", fmt.Errorf("postgres: migration lock: %w", err)
	}
	if schema != "" {
		if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return "", fmt.Errorf("postgres: create schema %s: %w", schema, err)
		}
		if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return "", fmt.Errorf("postgres: search_path: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return "", fmt.Errorf("postgres: schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return "", fmt.Errorf("postgres: read schema_migrations: %w", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return "", fmt.Errorf("postgres: read schema_migrations: %w", err)
	}
	for _, v := range vs {
		applied[int(v)] = true
	}

	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return "", fmt.Errorf("postgres: migrations: %w", err)
	}
	sort.Strings(names)
	for _, name := range names {
		base := path.Base(name)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return "", fmt.Errorf("postgres: migration %s: the name must start with its number", base)
		}
		if applied[v] {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("postgres: migration %s: %w", base, err)
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// No arguments: the simple protocol, which runs several statements.
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, v, base)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("postgres: migration %s: %w", base, err)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lockKey("migrate", lockSchema)); err != nil {
		return "", fmt.Errorf("postgres: migration unlock: %w", err)
	}
	return lockSchema, nil
}

// inTx runs fn in a transaction and commits it, retrying serialization
// failures and deadlocks. Once COMMIT is sent its outcome is awaited even if
// ctx ends. fn's error is returned as is; the caller adds the "postgres:"
// context.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.tryTx(ctx, fn)
		if err == nil || attempt == maxTxAttempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

func (s *Store) tryTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// retryable reports a serialization failure or a detected deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}
