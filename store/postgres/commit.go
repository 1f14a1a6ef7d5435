package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/asmp-dev/asmp/store"
)

// Group commit. CommitRun hands its commit to one committer goroutine and
// returns; the committer takes every commit queued meanwhile (up to
// MaxBatch, and about maxBatchBytes of run and event data) and sends them
// as one pgx batch: one statement per commit, pipelined, with a single Sync
// at the end, so that the group is one implicit transaction, one round trip
// and one WAL flush. Each statement is a compare-and-set that writes
// nothing unless its run still has the expected version (the CTE in
// commitSQL), so a lost compare-and-set fails only its own commit.
//
// A statement that fails (an error from the server, not a missed
// compare-and-set) rolls the whole group back; the committer then commits
// each member on its own, in order, in its own transaction (with the retries
// of inTx), so one member's failure never fails the others. An error that
// leaves the group's outcome unknown (the connection was lost after the
// batch was sent) fails every member with it: retrying could apply a
// commit twice.
//
// Commits are spread over Options.CommitLanes lanes by their run's id, so
// every commit of a run takes the same lane. Each lane has its own queue
// and committer, and one group in flight at a time on its own connection:
// groups of different lanes, holding disjoint runs, are executed by the
// server at the same time (one server process each), while a lane's
// groups, and in them its members, are applied in the order of their
// CommitRun calls (sorted stably by run id, which keeps each run's commits
// in order and makes two groups lock their rows in the same order). So a
// run's commits are applied in call order, as store.RunStore requires;
// commits of different runs that were queued together may be applied in
// either order (a commit whose Wait returned is applied before one queued
// after that).

// MaxBatch bounds how many commits share one transaction.
const MaxBatch = 128

// maxBatchBytes bounds the run and event data of one group (a group holds
// at least one commit, whatever its size).
const maxBatchBytes = 4 << 20

type commitReq struct {
	expected int64
	c        store.Commit
	seq      int // call order, for the stable sort
	err      chan error
}

func (r *commitReq) size() int {
	return len(r.c.Run.Data) + len(r.c.Event.Data) + len(r.c.Event.Patch) + 512
}

// lanes holds a Store's commit lanes (see Options.CommitLanes).
type lanes []*committer

// DefaultCommitLanes is the number of commit lanes when Options.CommitLanes
// is 0 and the pool has room for them: each lane holds a connection while
// its group is in flight, and the rest of the pool is left to reads.
const DefaultCommitLanes = 2

// laneCount is the number of lanes for opts on a pool of maxConns
// connections: opts.CommitLanes, else DefaultCommitLanes if it leaves at
// least half the pool to the rest, else 1.
func laneCount(opts Options, maxConns int32) int {
	if opts.CommitLanes > 0 {
		return opts.CommitLanes
	}
	return max(1, min(DefaultCommitLanes, int(maxConns/2)))
}

func newLanes(n int) lanes {
	ls := make(lanes, n)
	for i := range ls {
		ls[i] = newCommitter()
	}
	return ls
}

// laneSeed seeds the hash that picks a run's lane (the same for every
// Store of the process; nothing outside it sees the choice).
var laneSeed = maphash.MakeSeed()

// of returns the lane of run id's commits.
func (ls lanes) of(id string) *committer {
	if len(ls) == 1 {
		return ls[0]
	}
	return ls[maphash.String(laneSeed, id)%uint64(len(ls))]
}

// committer holds the group-commit queue of one lane of a Store.
type committer struct {
	reqs    chan *commitReq
	stop    chan struct{} // closed by Close: drain and return
	stopped chan struct{} // closed when the committer has returned
	// groups counts the groups sent as one batch, grouped the commits in
	// them; solo counts commits made on their own after their group
	// failed.
	groups, grouped, solo atomic.Int64
	// hold, when set (tests only), is waited on after the first commit of
	// a group arrives and before the rest are taken.
	hold atomic.Pointer[chan struct{}]
	// mu guards closed: CommitRun hands its commit over under the read
	// lock, so once Close has set closed (under the write lock) no commit
	// can join the queue after the committer's last drain.
	mu     sync.RWMutex
	closed bool
}

func newCommitter() *committer {
	return &committer{
		reqs:    make(chan *commitReq, MaxBatch),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
}

// errClosed is the outcome of a commit handed to a closed store.
var errClosed = errors.New("postgres: store is closed")

// CommitRun implements store.RunStore. It queues the commit for the
// committer of its run's lane and returns; the Pending settles once the
// group holding the commit is durable (one transaction, one round trip
// for the group). A run's commits queued one after the other are applied
// in that order, so a caller may queue a run's next commit (expecting the
// version this one creates) before this one is durable: if this one
// fails, the next fails with store.ErrConflict.
func (s *Store) CommitRun(ctx context.Context, expected int64, c store.Commit) store.Pending {
	if err := checkCommit(c); err != nil {
		return store.Settled(err)
	}
	if c.Run.Version != expected+1 {
		return store.Settled(fmt.Errorf("postgres: new version %d is not expected+1 (%d)", c.Run.Version, expected+1))
	}
	if err := store.PrepareTimers(&c, false); err != nil {
		return store.Settled(err)
	}
	if err := store.PrepareOutbox(&c); err != nil {
		return store.Settled(err)
	}
	q := s.commits.of(c.Run.ID)
	req := &commitReq{expected: expected, c: c, err: make(chan error, 1)}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return store.Settled(errClosed)
	}
	select {
	case q.reqs <- req:
	case <-ctx.Done():
		return store.Settled(ctx.Err())
	}
	// Once queued, the commit may be applied: wait for the verdict whatever ctx says.
	return store.Later(req.err)
}

// startCommitters starts the committer goroutine of every lane.
func (s *Store) startCommitters() {
	for _, q := range s.commits {
		go s.runCommitter(q)
	}
}

// runCommitter is the committer goroutine of lane q.
func (s *Store) runCommitter(q *committer) {
	defer close(q.stopped)
	for {
		var first *commitReq
		select {
		case first = <-q.reqs:
		case <-q.stop:
			for { // drain what was queued before Close
				select {
				case r := <-q.reqs:
					s.commitGroup(q, []*commitReq{r})
				default:
					return
				}
			}
		}
		if h := q.hold.Load(); h != nil {
			<-*h
		}
		group := []*commitReq{first}
		bytes := first.size()
	fill:
		for len(group) < MaxBatch && bytes < maxBatchBytes {
			select {
			case r := <-q.reqs:
				group = append(group, r)
				bytes += r.size()
			default:
				break fill
			}
		}
		s.commitGroup(q, group)
	}
}

// closeCommitter stops taking commits, commits what was queued and waits
// for the committer to return.
func (s *Store) closeCommitter() {
	for _, q := range s.commits {
		q.mu.Lock()
		if !q.closed {
			q.closed = true
			close(q.stop)
		}
		q.mu.Unlock()
	}
	for _, q := range s.commits {
		<-q.stopped
	}
}

// commitGroup commits group, of lane q, as one batch and answers each member.
func (s *Store) commitGroup(q *committer, group []*commitReq) {
	for i, r := range group {
		r.seq = i
	}
	sort.SliceStable(group, func(i, j int) bool { return group[i].c.Run.ID < group[j].c.Run.ID })
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	results, err := s.sendGroup(ctx, q, group)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		for i, r := range group {
			r.err <- results[i]
		}
	case errors.As(err, &pe) && severity(pe) == "ERROR":
		// The server refused a statement and went on: the implicit
		// transaction was rolled back, nothing of the group was written.
		// Commit each member alone, in call order.
		sort.SliceStable(group, func(i, j int) bool { return group[i].seq < group[j].seq })
		for _, r := range group {
			q.solo.Add(1)
			r.err <- s.commitRun(ctx, r.expected, r.c)
		}
	default:
		err = fmt.Errorf("postgres: commit of %d run(s): %w", len(group), err)
		for _, r := range group {
			r.err <- err
		}
	}
}

// severity is pe's severity in English (the server sends it localised
// too; FATAL and PANIC end the session, ERROR only the transaction).
func severity(pe *pgconn.PgError) string {
	if pe.SeverityUnlocalized != "" {
		return pe.SeverityUnlocalized
	}
	return pe.Severity
}

// sendGroup sends group's statements as one batch (one implicit
// transaction) and returns each member's outcome: nil, or its run's
// ErrConflict or ErrNotFound. err is the batch's own failure.
func (s *Store) sendGroup(ctx context.Context, q *committer, group []*commitReq) (results []error, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a connection: %w", err)
	}
	defer conn.Release()
	q.groups.Add(1)
	q.grouped.Add(int64(len(group)))
	b := &pgx.Batch{}
	for _, r := range group {
		sql, args := commitStatement(r.expected, r.c)
		b.Queue(sql, args...)
	}
	br := conn.SendBatch(ctx, b)
	results = make([]error, len(group))
	for i, r := range group {
		var n int64
		var v *int64
		if err := br.QueryRow().Scan(&n, &v); err != nil {
			br.Close()
			return nil, err
		}
		if n == 1 {
			continue
		}
		id := r.c.Run.ID
		if v == nil {
			results[i] = fmt.Errorf("postgres: run %s: %w", id, store.ErrNotFound)
		} else {
			results[i] = fmt.Errorf("postgres: run %s at version %d, expected %d: %w", id, *v, r.expected, store.ErrConflict)
		}
	}
	// Close reads up to the Sync: the implicit transaction's COMMIT.
	if err := br.Close(); err != nil {
		return nil, err
	}
	return results, nil
}

// commitRun commits c alone, in its own transaction: what a member of a
// group that failed falls back to.
func (s *Store) commitRun(ctx context.Context, expected int64, c store.Commit) error {
	var n int64
	var v *int64
	sql, args := commitStatement(expected, c)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, sql, args...).Scan(&n, &v)
	})
	switch {
	case err != nil:
		return fmt.Errorf("postgres: commit run %s: %w", c.Run.ID, err)
	case n == 1:
		return nil
	case v == nil:
		return fmt.Errorf("postgres: run %s: %w", c.Run.ID, store.ErrNotFound)
	}
	return fmt.Errorf("postgres: run %s at version %d, expected %d: %w", c.Run.ID, *v, expected, store.ErrConflict)
}

// The parts a commit statement may have besides the run, its event and
// its notification (commitSQL's index is a combination of them).
const (
	partComplete     = 1 << iota // a task completed
	partEnqueue                  // a task enqueued
	partDoneTimers               // timers fired (or refused) removed
	partReplaceTimer             // the run's pending timers voided
	partNewTimers                // the entered state's timers stored
	partOutbox                   // webhook deliveries stored
	partCount        = 1 << iota
)

// commitSQL holds the commit statement for each combination of parts;
// see commitStatement.
var commitSQL = func() (out [partCount]string) {
	for k := range out {
		out[k] = buildCommitSQL(k)
	}
	return out
}()

// buildCommitSQL writes the one statement of a commit. The UPDATE of the
// run is the compare-and-set; the event, the task changes and the
// notification are written from its RETURNING row, so they are written
// if and only if it changed the run. The statement answers how many
// notifications it sent (1: committed, 0: the compare-and-set missed) and,
// after a miss only (the sub-select is an init plan, run when the CASE
// reaches it), the run's version as the statement's snapshot saw it (NULL:
// no such run), to tell a conflict from an unknown run.
//
// The timers of the run (store.Commit's DoneTimers, ReplaceTimers and
// Timers) are written the same way, from u, so a missed compare-and-set
// leaves them as they were. So are its webhook deliveries
// (store.Commit's Outbox), in the same statement: a commit is never
// stored without its deliveries, nor they without it. Timer ids carry the version that entered the
// state, so the new timers never share an id with the ones voided.
func buildCommitSQL(parts int) string {
	complete, enqueue := parts&partComplete != 0, parts&partEnqueue != 0
	var sb strings.Builder
	sb.WriteString(`WITH u AS (
	UPDATE runs SET state = $1, status = $2, data = $3::json, milestones = $4::text[], error = $5, version = $6, updated_at = $7,
		patch_bytes = CASE WHEN $10::bigint < 0 OR patch_bytes + $10::bigint > $11::bigint THEN 0 ELSE patch_bytes + $10::bigint END,
		workflow_version = $12
	WHERE id = $8 AND version = $9
	RETURNING patch_bytes
), e AS (
	INSERT INTO events (run_id, seq, time, kind, action, from_state, to_state, actor, state, status, error,
		data, milestones, patch, offered, workflow_version, reason)
	SELECT $8, $6, $13::timestamptz, $14, $15, $16, $17, $18, $19, $20, $21,
		CASE WHEN u.patch_bytes = 0 THEN $22::json END,
		CASE WHEN u.patch_bytes = 0 THEN $23::text[] ELSE $24::text[] END,
		CASE WHEN u.patch_bytes = 0 THEN NULL ELSE $25::json END,
		$26, $27, $28
	FROM u
)`)
	n := 30 // $29 and $30: the notification
	if complete {
		fmt.Fprintf(&sb, `, c AS (
	UPDATE tasks SET status = 'done', owner = '', lease_until = NULL, updated_at = $13::timestamptz
	WHERE id = $%d AND status <> 'done' AND EXISTS (SELECT 1 FROM u)
)`, n+1)
		n++
	}
	if enqueue {
		fmt.Fprintf(&sb, `, q AS (
	INSERT INTO tasks (id, run_id, state, version, attempts, status, owner, lease_until, created_at, updated_at, attempt, not_before, ready_at)
	SELECT $%d, $%d, $%d, $%d::bigint, 0, 'pending', '', NULL, $%d::timestamptz, $%d::timestamptz, $%d::integer, $%d::timestamptz, $%d::timestamptz FROM u
)`, n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9)
		n += 9
	}
	if parts&partDoneTimers != 0 {
		fmt.Fprintf(&sb, `, td AS (
	DELETE FROM timers WHERE id = ANY($%d::text[]) AND EXISTS (SELECT 1 FROM u)
)`, n+1)
		n++
	}
	if parts&partReplaceTimer != 0 {
		sb.WriteString(`, tr AS (
	DELETE FROM timers WHERE run_id = $8 AND EXISTS (SELECT 1 FROM u)
)`)
	}
	if parts&partNewTimers != 0 {
		fmt.Fprintf(&sb, `, tn AS (
	INSERT INTO timers (id, run_id, workflow_id, state, version, action, due_at, ready_at, data)
	SELECT t.id, $8, $%d, $1, $6, t.action, t.due_at, t.due_at, t.data::json
	FROM unnest($%d::text[], $%d::text[], $%d::timestamptz[], $%d::text[]) AS t(id, action, due_at, data)
	WHERE EXISTS (SELECT 1 FROM u)
)`, n+1, n+2, n+3, n+4, n+5)
		n += 5
	}
	if parts&partOutbox != 0 {
		fmt.Fprintf(&sb, `, ob AS (
	%s
	WHERE EXISTS (SELECT 1 FROM u)
)`, outboxSQL(n+1, 8, 6))
	}
	sb.WriteString(`, n AS (SELECT pg_notify($29, $30) FROM u)
SELECT (SELECT count(*) FROM n),
	CASE WHEN NOT EXISTS (SELECT 1 FROM u) THEN (SELECT version FROM runs WHERE id = $8) END`)
	return sb.String()
}

// commitStatement returns c's statement (buildCommitSQL) and its arguments.
func commitStatement(expected int64, c store.Commit) (string, []any) {
	r, e := c.Run, c.Event
	args := make([]any, 0, 36)
	args = append(args,
		r.State, r.Status, dataText(r.Data), milestones(r.Milestones), text(r.Error), r.Version, r.UpdatedAt, r.ID, expected,
		patchLen(&c.Event), store.WholeBound(len(c.Event.Data)), r.WorkflowVersion,
		e.Time, e.Kind, e.Action, e.From, e.To, e.Actor, e.State, e.Status, text(e.Error),
		dataText(e.Data), milestones(e.Milestones), milestones(e.Added), patchText(e.Patch),
		offeredJSON(e.Offered), e.WorkflowVersion, text(e.Reason),
		Channel, r.ID+":"+strconv.FormatInt(r.Version, 10))
	k := 0
	if c.Complete != "" {
		k |= partComplete
		args = append(args, c.Complete)
	}
	if t := c.Enqueue; t != nil {
		k |= partEnqueue
		args = append(args, t.ID, t.RunID, t.State, t.Version, t.CreatedAt, t.UpdatedAt, max(t.Attempt, 1), optTime(t.NotBefore), store.TaskReadyAt(t))
	}
	if len(c.DoneTimers) > 0 {
		k |= partDoneTimers
		args = append(args, c.DoneTimers)
	}
	if c.ReplaceTimers {
		k |= partReplaceTimer
		if n := len(c.Timers); n > 0 {
			k |= partNewTimers
			ids, actions, data := make([]string, n), make([]string, n), make([]string, n)
			due := make([]time.Time, n)
			for i, t := range c.Timers {
				ids[i], actions[i], data[i], due[i] = t.ID, t.Action, string(t.Data), t.DueAt
			}
			args = append(args, r.WorkflowID, ids, actions, due, data)
		}
	}
	if len(c.Outbox) > 0 {
		k |= partOutbox
		args = append(args, outboxArgs(&c)...)
	}
	return commitSQL[k], args
}

// CommitStats counts the store's group commits since Open: Groups, the
// groups sent as one batch (one round trip each); Commits, the commits
// sent in them (Commits/Groups is the mean group size); Solo, the commits
// made on their own after their group was refused by the server.
type CommitStats struct {
	Groups, Commits, Solo int64
}

// CommitStats returns the group-commit counters, summed over the lanes.
func (s *Store) CommitStats() CommitStats {
	var st CommitStats
	for _, q := range s.commits {
		st.Groups += q.groups.Load()
		st.Commits += q.grouped.Load()
		st.Solo += q.solo.Load()
	}
	return st
}

// holdCommits makes every lane's committer wait, after its next group's
// first commit arrives, until release is called (tests only).
func (s *Store) holdCommits() (release func()) {
	ch := make(chan struct{})
	for _, q := range s.commits {
		q.hold.Store(&ch)
	}
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			for _, q := range s.commits {
				q.hold.Store(nil)
			}
			close(ch)
		}
	}
}

// optTime is t for a nullable timestamptz: nil (NULL) for the zero time.
func optTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
