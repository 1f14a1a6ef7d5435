// Package sqlite is the embedded Store: one SQLite file in WAL mode, pure Go
// (modernc.org/sqlite, no cgo), the default of `asmp serve`.
//
// Writes go through one writer goroutine that groups concurrent requests
// into a single transaction (group commit): each request runs inside its own
// savepoint, so one request's failure (a lost compare-and-set) never touches
// another's, and the whole group is made durable by one fsync
// (synchronous=FULL) before any request is answered. Reads use a separate
// pool of connections and never wait for the writer; recently read runs
// are kept in memory, dropped by the writer before each COMMIT and kept
// again once it is done, so the database file belongs to one process at a
// time (Open locks it).
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/asmp-dev/asmp/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// MaxBatch bounds how many write requests share one transaction.
const MaxBatch = 256

// Store is a SQLite-backed store.Store.
type Store struct {
	path   string
	wdb    *sql.DB   // exactly one connection: the writer's
	wconn  *sql.Conn // that connection, held by the writer goroutine
	rdb    *sql.DB   // readers
	writes chan *writeReq
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	// Statements prepared once: wstmts on the writer's connection (used
	// only by the writer goroutine), rstmts on the readers' pool. SQLite
	// parses a statement in about as long as it runs a small one, so
	// preparing on every call doubled the cost of each read and write.
	wstmts map[string]*sql.Stmt
	rstmts sync.Map // query -> *sql.Stmt
	runs   *runCache
	lock   *os.File // held open: the exclusive lock on the database's -lock file
	dbLock *os.File // held open: the exclusive lock on the database file itself
	// onCommit, when set (tests and benchmarks only, before the first
	// write), is told each group's size and how long its COMMIT took.
	onCommit func(n int, commit time.Duration)
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Pinger = (*Store)(nil)
)

type writeReq struct {
	fn func(tx wtx) error
	// hook, when set, updates what the store keeps in memory around the
	// COMMIT of fn's changes.
	hook *commitHook
	// seal, when set, makes fn a ledger append: once every request of
	// the batch has run, the last seal of the batch signs one checkpoint
	// of the batch's records, stored before COMMIT, and sealed receives it.
	seal   store.LedgerSigner
	sealed store.LedgerCheckpoint
	err    chan error
}

// ErrClosed is returned by writes on a closed store.
var ErrClosed = errors.New("sqlite: store is closed")

// ErrInUse is returned by Open when another process has the database open.
var ErrInUse = errors.New("the database is in use by another process (another asmp serve?)")

// Options configure a SQLite store. The zero value (or nil) is the default;
// it has no settings today and is there so that new ones do not change
// Open's signature (postgres.Open takes the same shape).
type Options struct{}

// Open opens (creating if needed) the database file at path and applies
// pending migrations. ctx bounds the opening (the lock, the migrations);
// the store itself lives until Close.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// The lock is the database file's own (whatever path, symbolic or hard
	// link names it), and the store goes by the file's real path, so that
	// its WAL, its -lock file and the ledger key beside it (Path) are the
	// same for every name of the file.
	dbLock, err := lockFile(abs)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	lock, err := lockFile(abs + "-lock") // what earlier versions lock: both exclude them too
	if err != nil {
		dbLock.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	opened := false
	defer func() {
		if !opened {
			lock.Close()
			dbLock.Close()
		}
	}()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + abs + "?" + q.Encode()
	wdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: migrate %s: %w", path, err)
	}
	if err := releaseLeases(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "query_only(1)")
	rdb, err := sql.Open("sqlite", "file:"+abs+"?"+rq.Encode())
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	wconn, err := wdb.Conn(ctx)
	if err != nil {
		rdb.Close()
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{path: abs, wdb: wdb, wconn: wconn, rdb: rdb, writes: make(chan *writeReq, MaxBatch), done: make(chan struct{}), wstmts: map[string]*sql.Stmt{},
		runs: newRunCache(), lock: lock, dbLock: dbLock}
	opened = true
	s.wg.Add(1)
	go s.writer()
	return s, nil
}

// releaseLeases frees the timers, tasks and webhook deliveries that a previous process held
// under a lease: the file lock proves that process is gone (one process
// per database), so what it claimed and did not finish is claimable now,
// at start, instead of when its leases run out. A timer claimed by a
// server killed before it fired thus fires right after the restart.
func releaseLeases(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `UPDATE timers SET owner = '', lease_until = 0, ready_at = due_at WHERE owner != ''`); err != nil {
		return fmt.Errorf("release timer leases: %w", err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE tasks SET lease_until = 0, ready_at = 0 WHERE status = 'running'`); err != nil {
		return fmt.Errorf("release task leases: %w", err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE webhook_deliveries SET owner = '', lease_until = 0, ready_at = next_at WHERE status = 'pending' AND owner != ''`); err != nil {
		return fmt.Errorf("release delivery leases: %w", err)
	}
	return nil
}

// Path returns the database file's absolute path.
func (s *Store) Path() string { return s.path }

func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		return err
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		base := filepath.Base(name)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: bad name", base)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, v).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version) VALUES (?)`, v); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// write runs fn in the writer's transaction (inside its own savepoint) and
// returns once the transaction holding it is durable, or fn's error.
func (s *Store) write(ctx context.Context, fn func(tx wtx) error) error {
	return s.queue(ctx, fn, nil).Wait()
}

// queue puts fn in the writer's queue and returns at once; the Pending
// settles with write's result. Functions queued one after the other run in
// that order. hook, when not nil, runs around the COMMIT of fn's changes.
func (s *Store) queue(ctx context.Context, fn func(tx wtx) error, hook *commitHook) store.Pending {
	return s.enqueue(ctx, &writeReq{fn: fn, hook: hook, err: make(chan error, 1)})
}

// enqueue is queue for a prepared request.
func (s *Store) enqueue(ctx context.Context, req *writeReq) store.Pending {
	select {
	case <-s.done:
		return store.Settled(ErrClosed)
	default:
	}
	select {
	case s.writes <- req:
	case <-ctx.Done():
		return store.Settled(ctx.Err())
	case <-s.done:
		return store.Settled(ErrClosed)
	}
	// Once queued, the write may commit: wait for the verdict whatever ctx says.
	return store.Later(req.err)
}

func (s *Store) writer() {
	defer s.wg.Done()
	for {
		var first *writeReq
		select {
		case first = <-s.writes:
		case <-s.done:
			// Drain what was queued before Close.
			for {
				select {
				case r := <-s.writes:
					s.commitBatch([]*writeReq{r})
				default:
					return
				}
			}
		}
		batch := []*writeReq{first}
	fill:
		for len(batch) < MaxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.commitBatch(batch)
	}
}

// commitHook updates what the store keeps in memory around the COMMIT of
// one write: before runs once the write's changes are made (before
// COMMIT), after once the COMMIT succeeded (ok) or failed (!ok), before
// the write is answered. Neither runs for a write whose changes were
// rolled back.
type commitHook struct {
	before func()
	after  func(ok bool)
}

func (s *Store) commitBatch(batch []*writeReq) {
	fail := func(err error) {
		for _, r := range batch {
			r.err <- err
		}
	}
	tx := wtx{s}
	rollback := func() { _, _ = tx.Exec(`ROLLBACK`) }
	if _, err := tx.Exec(`BEGIN IMMEDIATE`); err != nil {
		fail(fmt.Errorf("sqlite: begin: %w", err))
		return
	}
	results := make([]error, len(batch))
	var sealers []*writeReq
	for i, r := range batch {
		if _, err := tx.Exec(`SAVEPOINT op`); err != nil {
			rollback()
			fail(fmt.Errorf("sqlite: savepoint: %w", err))
			return
		}
		results[i] = r.fn(tx)
		if results[i] != nil {
			if _, err := tx.Exec(`ROLLBACK TO op`); err != nil {
				rollback()
				fail(fmt.Errorf("sqlite: rollback to savepoint: %w", err))
				return
			}
		}
		if _, err := tx.Exec(`RELEASE op`); err != nil {
			rollback()
			fail(fmt.Errorf("sqlite: release savepoint: %w", err))
			return
		}
		if results[i] == nil && r.seal != nil {
			sealers = append(sealers, r)
		}
	}
	if len(sealers) > 0 {
		ck, err := s.seal(tx, sealers[len(sealers)-1].seal)
		if err != nil {
			rollback()
			fail(err)
			return
		}
		for _, r := range sealers {
			r.sealed = ck
		}
	}
	hooked := func(i int, r *writeReq) bool { return results[i] == nil && r.hook != nil }
	for i, r := range batch {
		if hooked(i, r) {
			r.hook.before()
		}
	}
	t0 := time.Now()
	_, err := tx.Exec(`COMMIT`)
	if err != nil {
		rollback() // a failed COMMIT may leave the transaction open
	} else if s.onCommit != nil {
		s.onCommit(len(batch), time.Since(t0))
	}
	for i, r := range batch {
		if hooked(i, r) {
			r.hook.after(err == nil)
		}
	}
	if err != nil {
		fail(fmt.Errorf("sqlite: commit: %w", err))
		return
	}
	for i, r := range batch {
		r.err <- results[i]
	}
}

// Capabilities implements store.Store: a durable file of one process
// (Open locks it) whose writer commits in groups.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{Durable: true, GroupCommit: true}
}

// Close stops the writer after queued writes and closes the database.
func (s *Store) Close() error {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
	for _, st := range s.wstmts {
		st.Close()
	}
	s.wconn.Close()
	s.rstmts.Range(func(_, v any) bool {
		v.(*sql.Stmt).Close()
		return true
	})
	err1 := s.rdb.Close()
	err2 := s.wdb.Close()
	err3 := s.lock.Close() // releases the lock
	s.dbLock.Close()       // after SQLite's own descriptors: closing one drops the process's POSIX locks on the file
	return errors.Join(err1, err2, err3)
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.rdb.PingContext(ctx)
}

// wtx is the writer's open transaction, as write functions see it: the
// writer's connection, on which BEGIN IMMEDIATE has run, with statements
// prepared once per query. Only the writer goroutine uses it.
type wtx struct{ s *Store }

// Exec executes query with args in the transaction.
func (tx wtx) Exec(query string, args ...any) (sql.Result, error) {
	st, err := tx.s.wstmt(query)
	if err != nil {
		return nil, err
	}
	return st.Exec(args...)
}

// Query runs a query in the transaction; its rows must be closed before
// the next statement.
func (tx wtx) Query(query string, args ...any) (*sql.Rows, error) {
	st, err := tx.s.wstmt(query)
	if err != nil {
		return nil, err
	}
	return st.Query(args...)
}

// QueryRow runs a query of one row in the transaction.
func (tx wtx) QueryRow(query string, args ...any) *sql.Row {
	st, err := tx.s.wstmt(query)
	if err != nil {
		return tx.s.wconn.QueryRowContext(context.Background(), query, args...)
	}
	return st.QueryRow(args...)
}

func (s *Store) wstmt(query string) (*sql.Stmt, error) {
	if st, ok := s.wstmts[query]; ok {
		return st, nil
	}
	st, err := s.wconn.PrepareContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	s.wstmts[query] = st
	return st, nil
}

// queryRow runs a one-row query on the readers' pool through a statement
// prepared once.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := s.rstmt(query)
	if err != nil {
		return s.rdb.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// query runs a query on the readers' pool through a statement prepared once.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.rstmt(query)
	if err != nil {
		return s.rdb.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) rstmt(query string) (*sql.Stmt, error) {
	if st, ok := s.rstmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.Prepare(query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.rstmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}
