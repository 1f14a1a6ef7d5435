// Package store defines where asmp keeps everything that must survive a
// restart: runs with their versions, each run's append-only event log,
// background tasks and the OIP dispatch ledger.
//
// # Parts
//
// The contract is split by responsibility into seven interfaces, each with
// its own conformance suite in package storetest; Store composes them with
// Close. The three backends (memstore, sqlite, postgres) implement all of
// Store and pass every suite. A user depends on the narrowest part it
// needs: package oip keeps its ledger on a LedgerStore; the engine drives
// runs and tasks and hands the whole Store on to the server, which reads
// gauges from all three parts.
//
//   - RunStore: runs and their event logs. CreateRun starts a run; CommitRun,
//     a compare-and-set on the run's version, is the one operation that
//     changes it afterwards; DeleteRun removes it with its events and tasks.
//   - TaskStore: background tasks, claimed by workers under leases. Tasks
//     are created and completed by the run commits that enter and leave
//     their state (Commit.Enqueue, Commit.Complete) and deleted with their
//     run, so a TaskStore is always the task side of a RunStore over the
//     same data.
//   - LedgerStore: the OIP dispatch ledger, append-only, with seqs that are
//     gap-free across processes. It shares nothing with the other parts.
//   - TimerStore: the timers of states (SPEC section 17), stored by the
//     commits that enter their state (Commit.ReplaceTimers) and deleted
//     with their run, like tasks; the firing side claims due ones under
//     leases, in the order of their due times, at the cost of the due ones.
//   - WebhookStore: webhook subscriptions and the outbox of their
//     deliveries (SPEC section 18), stored by the commits of the changes
//     they report (Commit.Outbox); the delivery side claims due ones
//     under leases, in order per run and subscription.
//   - DefinitionStore: every workflow definition a server has served,
//     immutable, by workflow id and version (the content hash), with the
//     counts of the runs pinned to each. A run's pin is Run.WorkflowVersion,
//     written by CreateRun and carried (or changed, by a migration) by
//     CommitRun, so a run and its pin never disagree.
//   - ScheduleStore: the schedules that start runs at cron ticks (SPEC
//     section 17), each with the last tick that started one; a
//     compare-and-set on it (AdvanceSchedule) lets one process, of any
//     number, start the run of a tick.
//
// # Where later additions go
//
// Features that are planned each extend one part, so the split stays as it
// is:
//
// Ledger checkpoints and tree state (signed tree heads, the Merkle tree's
// stored frontier): LedgerStore, written in the transaction of the
// AppendLedgerSigned that reaches them, so a checkpoint never names a record the
// ledger lacks.
//
// Run lists: RunStore, paged by cursor and limit as StaleRuns does, each
// page bounded in bytes too (MaxPageBytes). The per-status and
// per-workflow counters (CountRuns) are kept by CreateRun, CommitRun and
// DeleteRun in the transaction of the change they count. The depth of the
// task queue stays with TaskStore (PendingTasks).
//
// # Committing
//
// A store that batches commits (sqlite: one fsync per group of commits)
// does so behind CommitRun: it queues the commit, returns, and settles the
// returned Pending once the group holding it is durable. The other stores
// commit before CommitRun returns and give back a settled Pending. Callers
// never ask which kind of store they have: the engine always plans a
// transition under its run's lock, calls CommitRun, releases the lock and
// waits, so with a batching store a run's next transition queues behind
// this one and both share one fsync.
//
// # Capabilities
//
// Store.Capabilities describes what a backend offers (durable, shared
// between replicas, group commit) as a value, which the server reads to
// choose how to run: nothing type-asserts a store to find its kind.
//
// Notifier and Pinger are not part of Store. They are capabilities some
// backends have (Postgres: both; SQLite: Pinger), and they change what a
// server can offer (streams that see commits of other replicas, a readiness
// check), never how anything is stored or committed. A store without them
// is complete: a store used by one process has no foreign commits to
// report, and one in memory has nothing to ping. Callers test for them at
// the edge (engine.FollowStore, the server's readiness check); no type
// assertion on a store chooses how something is written.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors a Store returns. Backends wrap them with %w; callers test with errors.Is.
var (
	// ErrNotFound: no run, task or record with that identity.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: the run's version is not the expected one (lost compare-and-set).
	ErrConflict = errors.New("store: version conflict")
	// ErrExists: a run or record with that identity already exists.
	ErrExists = errors.New("store: already exists")
)

// Snapshot is what a run looks like at one point: its state, its status
// override, its data and its milestones.
type Snapshot struct {
	State string
	// Status is the stored status override: "" means "derive it from the
	// workflow definition"; processing and failed are set by the engine.
	Status     string
	Data       json.RawMessage // a JSON object; never nil in stored records
	Milestones []string
	// Error explains a failed status (a task's failure), shown as the hint.
	Error string
}

// Run is the current state of one workflow run.
type Run struct {
	ID         string // UUIDv7
	WorkflowID string
	Snapshot
	// Version is the Seq of the run's last event: 1 after creation, +1 per
	// committed change. It is the run's ETag.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// WorkflowVersion is the version ("sha256:…") of the stored definition
	// the run is pinned to (DefinitionStore); "" for a run stored before
	// versions existed, until PinLegacyRuns pins it.
	WorkflowVersion string
}

// Event kinds.
const (
	EventCreated    = "created"
	EventTransition = "transition"
	EventFailed     = "failed" // a task failed with no failure action
	// EventRetry records a failed task attempt that is retried: Reason
	// (also the snapshot's Error) names the attempt, the failure and the
	// next attempt's not-before time (RFC 3339); Action is the attempt
	// that failed ("1" = the first). The run stays in its state, with its
	// data and timers.
	EventRetry = "retry"
	// EventMigrated records a migration: the run was re-pinned from the
	// version in Event.Action to the one in Event.WorkflowVersion, and
	// moved from state From (of the old version) to To (of the new one).
	EventMigrated = "migrated"
	// EventTimerRefused records a due timer whose transition was refused
	// (a guard, the action's expected fields, the bound on data): Action is
	// the timer's action, Actor "timer", Reason why; the run stays in its
	// state and the timer is done.
	EventTimerRefused = "timer_refused"
)

// Event is one entry of a run's event log: the change (kind, action,
// from, to, actor, time), the run's snapshot after it, and what a replay
// needs to show exactly the frame a live subscriber saw.
//
// # Layout
//
// A store keeps an event in one of two forms. A delta event keeps the
// change only: Patch (the merge patch of the data) and Added (the
// milestones it appended), with the state, status and error after it. A
// whole event keeps the run's full Data and Milestones. Seq 1, an event
// whose Patch is nil (its change is not a merge patch) and an event whose
// patches since the last whole event would outgrow the data
// (WholeDue) are kept whole; every other event is a delta. So storing an
// event costs the size of its change, and the data at any seq is the last
// whole event at or before it with at most its own size of patches
// applied: a replay from seq N never reads the events before that whole
// one.
//
// Events reads them back folded (EventFold): every returned event has its
// full Milestones and its state, status and error; Data is set on the
// first event of the page and on whole events, and nil on the others,
// whose data is the previous event's with Patch applied (MergeValue).
type Event struct {
	RunID  string
	Seq    int64 // 1, 2, 3, … within the run; equals the run's Version after the change
	Time   time.Time
	Kind   string
	Action string
	From   string
	To     string
	Actor  string
	// WorkflowVersion is the version the run is pinned to after the event,
	// on the events that pin it (created, migrated); "" on the others and
	// on events stored before versions existed.
	WorkflowVersion string
	// Reason says why a failing event failed (a task's failure); "" for
	// others.
	Reason string
	// Offered names the actions the run offered right after the event, in
	// order, as computed when it was committed (guards and the clock may
	// answer otherwise later), so a replay shows the same next_states.
	// nil for events stored before they were recorded: a replay computes
	// them again.
	Offered []string
	// Patch is the RFC 7386 merge patch that turns the run's data before
	// the event into Data; nil when the change is not expressible as one
	// (the store then keeps the event whole). When Patch is set, Added
	// must be exactly the milestones the event appended.
	Patch json.RawMessage
	// Added lists the milestones the event appended to the run's.
	Added []string
	Snapshot
}

// Bounds of the event layout and of pages.
const (
	// MinWholeEvery is the least number of patch bytes between two whole
	// events of a run, so that a run with little data is not kept whole
	// at every event.
	MinWholeEvery = 4 << 10
	// MaxPageBytes bounds the records of one page of any list (events,
	// ledger history, directory): a page ends early, with a cursor, once
	// its records reach it.
	MaxPageBytes = 16 << 20
)

// WholeDue reports whether a store keeps e whole, patchBytes being the
// bytes of the patches the store kept for e's run since its last whole
// event.
func WholeDue(e *Event, patchBytes int64) bool {
	return e.Seq <= 1 || e.Patch == nil || patchBytes+int64(len(e.Patch)) > WholeBound(len(e.Data))
}

// PageFull reports whether a page whose records' bodies add up to bytes
// has reached MaxPageBytes, so that a list ends it there.
func PageFull(bytes int) bool { return bytes >= MaxPageBytes }

// WholeBound is how many patch bytes a run whose data has dataLen bytes
// keeps between two whole events.
func WholeBound(dataLen int) int64 {
	return int64(max(dataLen, MinWholeEvery))
}

// Task statuses.
const (
	TaskPending = "pending"
	TaskRunning = "running"
	TaskDone    = "done"
)

// Task is a background job owned by a run's state. It is created in the same
// commit that moves the run into that state, and it stays in the store until
// a worker finishes it, so a crash never loses it.
type Task struct {
	ID      string
	RunID   string
	State   string // the state whose task this is
	Version int64  // the run's version when it entered State
	// Attempts counts claims; it is 1 during the first run of the task.
	Attempts int
	// Attempt is the task's attempt under its state's retry policy: 1 (or
	// 0, read as 1) for the first; a retry enqueues a new task with the
	// next attempt.
	Attempt int
	// NotBefore, when set, is the time before which the task is not
	// claimed (a retry's backoff).
	NotBefore  time.Time
	Status     string
	Owner      string    // the worker holding the lease, when running
	LeaseUntil time.Time // a running task whose lease passed may be claimed again
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// TaskReadyAt is when a newly enqueued pending task t becomes claimable,
// its place in the claim order (TaskStore.ClaimTask): its NotBefore when
// set (a retry), else its creation.
func TaskReadyAt(t *Task) time.Time {
	if !t.NotBefore.IsZero() {
		return t.NotBefore
	}
	return t.CreatedAt
}

// Commit is one atomic change of a run: the run's new value, the event that
// records it, and optionally a task to enqueue and a task to mark done.
type Commit struct {
	Run   Run   // the run after the change; Run.Version must be the expected version + 1
	Event Event // appended to the run's log; Event.Seq must equal Run.Version
	// Enqueue, when set, is stored as a pending task in the same transaction.
	Enqueue *Task
	// Complete, when set, names a task marked done in the same transaction.
	Complete string

	// ReplaceTimers, when set, makes the commit enter Run.State as far as
	// timers go: the run's pending timers are deleted and Timers stored
	// instead, in the commit's transaction. The engine sets it on every
	// commit that moves the run into a state, also a self-loop that
	// re-enters the state it was in (which re-arms that state's timers:
	// their new versions give them new IDs, and the old ones are voided),
	// and on a commit that ends the run, with no Timers, so a run that
	// ends has no pending timers. A commit without it (a change of data or
	// status within the state) keeps the run's timers. CreateRun always
	// stores Timers: creating a run enters its first state.
	ReplaceTimers bool
	// Timers are the timers of Run.State for this entry into it (see
	// PrepareTimers for what the store fills in). Only with ReplaceTimers,
	// or in CreateRun.
	Timers []Timer
	// DoneTimers names pending timers removed in the same transaction (a
	// timer whose firing this commit records without leaving the state);
	// names of timers that are not pending are ignored.
	DoneTimers []string

	// Outbox are the webhook deliveries of this change (SPEC section 18),
	// stored as pending deliveries in the commit's transaction, so that
	// they are stored if and only if the change is (see PrepareOutbox for
	// what the store fills in, and WebhookStore). CreateRun stores them
	// too. A delivery for a subscription that is not stored is dropped.
	Outbox []Delivery
}

// RunCount is how many stored runs of one workflow have one stored status.
type RunCount struct {
	WorkflowID string
	Status     string // the stored status override; "" when derived
	N          int64
}

// LedgerRecord is one immutable entry of the OIP dispatch ledger.
type LedgerRecord struct {
	InvID      string // "inv_" + ULID
	Seq        int64  // 1, 2, 3, … across the whole ledger, gap-free
	Key        string
	Type       string
	Body       json.RawMessage
	Timestamp  time.Time
	Source     string
	EntryHash  string // hex SHA-256 of the record's canonical JSON
	Supersedes string // inv_ID of the key's previous record, or ""
	ResultOf   string // for invocation results: the attempt's inv_ID
	ReplayOf   string // for invocations: the inv_ID this one replays
	// Canonical is the record's canonical JSON as written (the bytes its
	// entry_hash and Merkle leaf are the SHA-256 of); nil for a record of
	// a release that did not store them, until the upgrade fills it in.
	Canonical []byte
	// DispatcherScopes, when not nil, are the scopes the record's
	// dispatcher held when it dispatched it (an empty list: none).
	// AppendLedgerSigned stores them beside the record, in the append's
	// transaction, outside the record (not hashed, not part of its
	// canonical JSON); LedgerStore.DispatcherScopes reads them back.
	// Reads of records leave it nil.
	DispatcherScopes []string
}

// RunCursor is a position in StaleRuns' order: the last run seen.
type RunCursor struct {
	UpdatedAt time.Time
	ID        string
}

// RunFilter selects the runs ListRuns returns and the page of them. Every
// field left zero selects everything.
type RunFilter struct {
	WorkflowID string // only runs of this workflow
	State      string // only runs in this state
	// Override, when not nil, keeps only runs whose stored status override
	// (Snapshot.Status) is *Override; "" selects runs whose status is
	// derived from their state.
	Override *string
	// UpdatedAfter, when not zero, keeps only runs changed after it at
	// millisecond precision: UpdatedAt truncated to the millisecond is
	// later than UpdatedAfter (see ChangedFrom).
	UpdatedAfter time.Time
	// DueBefore, when not zero, keeps only runs with a pending timer
	// (leased or not) whose DueAt is before it. Its cost is that of the
	// timers due before it, not of the runs or the timers stored: a list
	// of the runs due soon reads the timers' due-time index (Matches does
	// not look at it: a Run does not carry its timers).
	DueBefore time.Time
	// Before continues a list: only runs after this one in the list's
	// order (older, or as old with a smaller ID). Zero: from the newest.
	Before RunCursor
	// Limit bounds the page (<= 0: no bound).
	Limit int
}

// LedgerPrev is what AppendLedgerSigned tells the record builder.
type LedgerPrev struct {
	Seq    int64         // the seq the new record must take
	Latest *LedgerRecord // the key's latest record, nil if the key is new
}

// Pending is the outcome of a CommitRun that may not be known yet: Wait
// blocks until the commit is durable, and returns nil, or until it has
// failed, and returns why. Call Wait once. The zero Pending is settled with
// no error.
type Pending struct {
	err  error
	done <-chan error
}

// Settled returns a Pending whose outcome is already err: what a store
// that commits before CommitRun returns gives back.
func Settled(err error) Pending { return Pending{err: err} }

// Later returns a Pending whose outcome is the one value done delivers: what
// a store that queues commits gives back. done must deliver exactly one
// value, once the commit is durable or has failed.
func Later(done <-chan error) Pending { return Pending{done: done} }

// Wait returns the commit's outcome, blocking until it is known.
func (p Pending) Wait() error {
	if p.done != nil {
		return <-p.done
	}
	return p.err
}

// RunStore keeps runs and their event logs. All methods are safe for
// concurrent use by many goroutines and, for shared backends, by many
// processes. Every write is durable when it is acknowledged: a method that
// returns nil, or a Pending whose Wait returns nil, has made its change
// survive a crash of the process.
type RunStore interface {
	// CreateRun stores a new run with its first event (Seq 1) and an optional
	// task, atomically. ErrExists if the id is taken.
	CreateRun(ctx context.Context, c Commit) error

	// GetRun returns the run's current value, or ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)

	// CommitRun applies c if, and only if, the stored run still has version
	// expected when c is applied (compare-and-set); c's Event, Enqueue and
	// Complete are applied in the same transaction or not at all. It is
	// the one operation that changes a run after CreateRun.
	//
	// CommitRun may return before c is durable. The Pending's Wait returns
	// nil once c is durable (never before), ErrConflict when the run's
	// version had moved on, ErrNotFound for an unknown run, or another
	// error when c could not be stored. ctx bounds only the handing over:
	// once CommitRun has returned, c may be applied whatever ctx says, and
	// Wait tells.
	//
	// A run's commits are applied in the order of the CommitRun calls that
	// made them (one that returned before another began is applied
	// first). So a caller may commit a run's next change, expecting the
	// version c creates, before c is durable: if c fails, that one fails
	// with ErrConflict. Commits of different runs may be applied in
	// another order than their calls' unless one's Wait returned before
	// the other's call began (a backend may commit disjoint runs in
	// parallel). Until Wait returns, reads of the run may show it before
	// or after c; once Wait has returned nil, they show c or a later change.
	CommitRun(ctx context.Context, expected int64, c Commit) Pending

	// Events returns up to limit events of the run with Seq > after, in
	// Seq order, folded as the Event doc says (limit <= 0: no limit in
	// count). A page also ends once its records reach MaxPageBytes (it
	// always holds at least one event), so a short page is not the end of
	// the log: read on after its last seq until a page is empty.
	// ErrNotFound for an unknown run.
	Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error)

	// StaleRuns returns up to limit runs last changed (UpdatedAt) before
	// before, ordered by (UpdatedAt, ID), starting after the cursor (the
	// zero cursor: from the oldest). It is how retention finds candidates.
	StaleRuns(ctx context.Context, before time.Time, after RunCursor, limit int) ([]Run, error)

	// ListRuns returns the runs f selects, newest UpdatedAt first, ties
	// by ID descending, up to f.Limit, after f.Before. Its cost is that of
	// the page, not of the number of stored runs: backends index every
	// filter.
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)

	// DeleteRun removes run id with its events, tasks and timers, atomically, if
	// its version is still version: ErrConflict when the run has moved on,
	// ErrNotFound when it is unknown. The ledger is never touched.
	DeleteRun(ctx context.Context, id string, version int64) error

	// CountRuns returns how many runs are stored, by workflow and stored
	// status override ("" for runs whose status is derived), omitting
	// zero counts, ordered by workflow and status. The counts are kept by
	// CreateRun, CommitRun and DeleteRun as they change runs: reading them
	// costs the number of counts, not of runs.
	CountRuns(ctx context.Context) ([]RunCount, error)
}

// TaskStore keeps background tasks and hands them to workers under
// leases. Tasks enter and leave through the RunStore over the same data: a
// commit's Enqueue creates one and its Complete marks one done, in the
// commit's transaction, and DeleteRun removes a run's tasks. All methods are
// safe for concurrent use, by many processes for shared backends, and
// durable when they return nil.
type TaskStore interface {
	// ClaimTask hands one claimable task to owner: a pending task (past
	// its NotBefore), or a running one whose lease ended before now, the
	// one that became claimable first (a pending task at TaskReadyAt, a
	// released one at once, a running one when its lease ended; ties by
	// id), whose run
	// belongs to one of workflows (nil: any workflow), so that a process
	// never takes a task it cannot run. The claimed task is running, owned
	// by owner until now+lease, with Attempts incremented. ok is false when
	// no task is claimable. Two callers never claim the same task for
	// overlapping leases. A claim's cost grows with the claimable tasks,
	// not with those waiting out a backoff or a live lease.
	ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration, workflows []string) (t Task, ok bool, err error)

	// ExtendTask renews owner's lease on a running task until the given
	// time. ErrConflict if owner no longer holds it.
	ExtendTask(ctx context.Context, id, owner string, until time.Time) error

	// ReleaseTask returns a running task held by owner to pending, so
	// another worker may claim it (used on shutdown). ErrConflict if owner
	// no longer holds it.
	ReleaseTask(ctx context.Context, id, owner string) error

	// FinishTask marks a task done without changing its run (for a task
	// whose run moved on while it ran). Finishing a done task is a no-op;
	// ErrNotFound for an unknown task.
	FinishTask(ctx context.Context, id string) error

	// PendingTasks counts tasks that are not done (queue depth).
	PendingTasks(ctx context.Context) (int64, error)
}

// LedgerStore keeps the OIP dispatch ledger: immutable records, appended
// with seqs 1, 2, 3, … that are gap-free and unique even across processes.
// It never deletes or changes a record. All methods are safe for concurrent
// use, and AppendLedgerSigned is durable when it returns.
type LedgerStore interface {
	// LedgerRecord returns the record with that inv_ID, or ErrNotFound.
	LedgerRecord(ctx context.Context, invID string) (LedgerRecord, error)

	// LedgerHistory returns the records of key with Seq > after, oldest
	// first, at most limit (limit <= 0: no bound in count), ending early
	// once their bodies reach MaxPageBytes (a page holds at least one
	// record). ErrNotFound when the key has no record at all.
	LedgerHistory(ctx context.Context, key string, after int64, limit int) ([]LedgerRecord, error)

	// LedgerHead returns the latest record of key, in one indexed lookup
	// whatever the length of its history; ErrNotFound when it has none.
	LedgerHead(ctx context.Context, key string) (LedgerRecord, error)

	// LedgerRange returns the records with from <= Seq < to, in Seq order.
	LedgerRange(ctx context.Context, from, to int64) ([]LedgerRecord, error)

	// LedgerSize returns the number of records (the highest seq).
	LedgerSize(ctx context.Context) (int64, error)

	// LedgerLatest returns, for each key whose latest record has type typ,
	// that latest record, ordered by key, for keys > after, up to limit,
	// ending early once their bodies reach MaxPageBytes.
	LedgerLatest(ctx context.Context, typ, after string, limit int) ([]LedgerRecord, error)

	// ReplayedBy returns the inv_IDs of records whose ReplayOf is invID, in
	// Seq order: the first limit of them (limit <= 0: all).
	ReplayedBy(ctx context.Context, invID string, limit int) ([]string, error)

	// Tamper-evident ledger (SPEC section 16): signed checkpoints stored
	// with the records they cover, each record's canonical bytes, and how
	// far the ledger was last checked in full.

	// AppendLedgerSigned appends one record and stores one checkpoint in
	// the same transaction: it is the only way records are appended, so
	// every append is signed. build is called, inside the store's
	// transaction, with the next seq and the key's latest record; it
	// returns the complete record (with that Seq and Key) or an error that
	// aborts the append. Appends are serialised: seqs are gap-free and
	// unique even across processes; build may be called more than once.
	// Once the transaction's records are built (one record, or every
	// record of a group commit), sign (which must not be nil) is called
	// inside the transaction with the newest stored checkpoint (nil when
	// none) and the records after it, in seq order, with their Canonical
	// bytes; the checkpoint it returns is stored in the same transaction.
	// It returns the record and the checkpoint committed with it. A sign
	// error aborts the whole transaction. The built record's
	// DispatcherScopes, when not nil, are stored in the same transaction:
	// an append that fails stores no scopes, and a committed record whose
	// build gave scopes always has them.
	AppendLedgerSigned(ctx context.Context, key string, build func(LedgerPrev) (LedgerRecord, error), sign LedgerSigner) (LedgerRecord, LedgerCheckpoint, error)

	// LatestLedgerCheckpoint returns the stored checkpoint of the largest
	// tree, or ErrNotFound when none is stored.
	LatestLedgerCheckpoint(ctx context.Context) (LedgerCheckpoint, error)

	// LedgerCheckpoints returns up to limit stored checkpoints with
	// TreeSize > after, smallest first (limit <= 0: all).
	LedgerCheckpoints(ctx context.Context, after int64, limit int) ([]LedgerCheckpoint, error)

	// PutLedgerCheckpoint stores a checkpoint outside an append (the
	// upgrade of a ledger written before checkpoints were stored).
	// ErrExists when one of that tree size is stored already.
	PutLedgerCheckpoint(ctx context.Context, ck LedgerCheckpoint) error

	// LedgerUncanonical returns the lowest seq whose canonical bytes are
	// not stored, 0 when every record has them.
	LedgerUncanonical(ctx context.Context) (int64, error)

	// SetLedgerCanonical stores the canonical bytes of records (by seq)
	// that have none; records that have some keep them.
	SetLedgerCanonical(ctx context.Context, canonical map[int64][]byte) error

	// LedgerVerified returns the tree size up to which the ledger was
	// last checked in full (0 when never).
	LedgerVerified(ctx context.Context) (int64, error)
	// SetLedgerVerified records the size of a full check; it never lowers
	// the size recorded (replicas check concurrently).
	SetLedgerVerified(ctx context.Context, size int64) error

	// DispatcherScopes returns the scopes stored with the record invID
	// by its append (LedgerRecord.DispatcherScopes), an empty list as an
	// empty list: what the OIP service needs to decide whether the
	// current version of a directory row may run for a workflow (SPEC
	// section 16, "Who can change what runs"). ErrNotFound when none were
	// stored (a record appended without them, or by an older release).
	DispatcherScopes(ctx context.Context, invID string) ([]string, error)

	// CheckLedgerHeads checks the store's index of each key's latest
	// record (what LedgerHead and LedgerLatest read) against the records:
	// it returns the first key whose entry disagrees with the ledger
	// (missing, naming another record or type, or naming no record of
	// its key) or that has a record with a seq below 1 (outside every
	// range the checks walk), or "" when every entry agrees. A store
	// whose index no one else can write (in memory) returns "". The
	// ledger's full check calls it: an edited index could hide a row from
	// the directory.
	CheckLedgerHeads(ctx context.Context) (key string, err error)
}

// Definition is one stored workflow definition: immutable once stored.
type Definition struct {
	WorkflowID string
	// Version is "sha256:" + the hex SHA-256 of Body (package workflow).
	Version string
	// Body is the definition's canonical JSON document, self-contained
	// (resource and skill contents inlined), so a run pinned to it is
	// served after its file is gone.
	Body json.RawMessage
	// FirstServed is when a server first stored (served) this version.
	FirstServed time.Time
	// LegacyRuns counts the runs stored before versions existed that were
	// pinned to this version (PinLegacyRuns) when the upgraded server first
	// served it.
	LegacyRuns int64
}

// PinCount is how many runs of a workflow are pinned to Version and are
// in State with the stored status override Status.
type PinCount struct {
	Version string
	State   string
	Status  string
	Runs    int64
}

// Migration is a standing migration: the runs Runs of WorkflowID that were
// processing on version From when an operator migrated them to To, which
// move (by States, then to states of the same name) once their tasks
// settle, on whichever process settles them.
type Migration struct {
	WorkflowID string
	From       string
	To         string
	States     map[string]string
	Runs       []string
	Actor      string
	CreatedAt  time.Time
}

// DefinitionStore keeps every workflow definition a server has served, by
// (workflow id, version), and answers which runs are pinned to which
// version. Definitions are never changed or deleted: a run may be pinned
// to any of them. All methods are safe for concurrent use, by many
// processes for shared backends, and durable when they return nil.
type DefinitionStore interface {
	// PutDefinition stores d unless its (WorkflowID, Version) is stored
	// already, and returns the stored definition (with the FirstServed and
	// LegacyRuns of the first put when it was there).
	PutDefinition(ctx context.Context, d Definition) (Definition, error)

	// GetDefinition returns the stored definition, or ErrNotFound.
	GetDefinition(ctx context.Context, workflowID, version string) (Definition, error)

	// Definitions returns the stored versions of workflowID, newest
	// FirstServed first (ties by Version, descending); empty when there
	// are none.
	Definitions(ctx context.Context, workflowID string) ([]Definition, error)

	// PinCounts counts the runs of workflowID by (version, state, stored
	// status), in no particular order. Runs not pinned yet count under "".
	PinCounts(ctx context.Context, workflowID string) ([]PinCount, error)

	// PinnedRuns returns up to limit (<= 0: all) runs of workflowID pinned
	// to version whose ID is greater than after, ordered by ID.
	PinnedRuns(ctx context.Context, workflowID, version, after string, limit int) ([]Run, error)

	// PinLegacyRuns pins every run of workflowID that has no version yet
	// to version, a stored definition, adds their number to its LegacyRuns
	// and returns it, atomically. ErrNotFound when version is not stored.
	PinLegacyRuns(ctx context.Context, workflowID, version string) (int64, error)

	// PutMigration stores m as the standing migration of its (WorkflowID,
	// From), replacing the one stored before.
	PutMigration(ctx context.Context, m Migration) error

	// GetMigration returns the standing migration of (workflowID, from),
	// or ErrNotFound.
	GetMigration(ctx context.Context, workflowID, from string) (Migration, error)
}

// Store is the persistence of asmp: every part over one database, and
// Close. A backend is a Store when it keeps the contract of each part.
type Store interface {
	RunStore
	TaskStore
	LedgerStore
	DefinitionStore
	TimerStore
	ScheduleStore
	WebhookStore

	// Capabilities describes what the backend offers beyond the
	// contract; it is constant for the life of the store.
	Capabilities() Capabilities

	// Close releases the store's resources. Commits handed over before
	// Close are applied (or fail) before it returns.
	Close() error
}

// Capabilities is what a backend offers beyond the contract, which a
// server reads to decide how to run (never how to write: every backend
// keeps the whole contract). The zero value is a store in memory, private
// to one process.
type Capabilities struct {
	// Durable: what the store holds survives a restart of the process.
	Durable bool
	// Shared: other processes (replicas) may read and write the same
	// data at the same time, so the ledger's signing state and the runs
	// may change behind this process's back.
	Shared bool
	// GroupCommit: CommitRun queues commits and makes each group durable
	// with one sync of the disk (see Committing), so a process serving
	// requests gains from a second CPU while a group waits for the disk.
	GroupCommit bool
}

// LedgerCheckpoint is a signed tree head of the ledger, stored in the same
// transaction as the records it covers.
type LedgerCheckpoint struct {
	TreeSize int64
	// PrevSize is the TreeSize of the checkpoint stored before this one
	// (0 for the first): the checkpoints form a chain, so a deleted one
	// is seen.
	PrevSize  int64
	RootHash  string // hex RFC 6962 root of the first TreeSize records
	Note      string // the signed note
	PublicKey string // the note verifier key that signed it
	// Range is the compact Merkle range of leaves [0, TreeSize): the
	// hashes of its perfect subtrees, largest first, from which the tree
	// can grow without reading older records.
	Range [][]byte
	Time  time.Time
}

// LedgerSigner signs the checkpoint of an append transaction: prev is the
// newest checkpoint stored before it (nil when none) and added the records
// after prev, in seq order.
type LedgerSigner func(prev *LedgerCheckpoint, added []LedgerRecord) (LedgerCheckpoint, error)

// JoinRange encodes a compact range as the concatenation of its hashes.
func JoinRange(hashes [][]byte) []byte {
	out := make([]byte, 0, 32*len(hashes))
	for _, h := range hashes {
		out = append(out, h...)
	}
	return out
}

// SplitRange decodes JoinRange's encoding; nil when b is not a whole
// number of 32-byte hashes.
func SplitRange(b []byte) [][]byte {
	if len(b)%32 != 0 {
		return nil
	}
	out := make([][]byte, 0, len(b)/32)
	for i := 0; i < len(b); i += 32 {
		out = append(out, append([]byte(nil), b[i:i+32]...))
	}
	return out
}

// Notifier is an optional capability (see the package doc) of stores shared
// between processes (Postgres): it reports commits made by any process, so
// that streams on one replica see changes made on another. Stores used by a
// single process need not implement it; the engine publishes its own
// commits in-process.
type Notifier interface {
	// Listen calls fn with (runID, version) for every run commit, from any
	// process, until ctx ends. It returns when ctx ends or the listener fails.
	Listen(ctx context.Context, fn func(runID string, version int64)) error
}

// Pinger is an optional capability (see the package doc) of stores that can
// check that their database answers; the server's readiness check uses it.
type Pinger interface {
	Ping(ctx context.Context) error
}
