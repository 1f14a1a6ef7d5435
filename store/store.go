// Package store defines where asmp keeps everything that must survive a
// restart: runs with their versions, each run's append-only event log,
// background tasks and the OIP dispatch ledger.
//
// One Store interface has three implementations (memstore, sqlite, postgres)
// and one conformance suite (storetest) that all of them pass. The contracts
// below are what the engine relies on; a backend that cannot keep one of them
// is not a Store.
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
}

// Event kinds.
const (
	EventCreated    = "created"
	EventTransition = "transition"
	EventFailed     = "failed" // a task failed with no failure action
)

// Event is one entry of a run's event log. It records the change (kind,
// action, from, to, actor) and the run's snapshot after it, so a stream can
// replay the exact frames a live subscriber saw.
type Event struct {
	RunID  string
	Seq    int64 // 1, 2, 3, … within the run; equals the run's Version after the change
	Time   time.Time
	Kind   string
	Action string
	From   string
	To     string
	Actor  string
	Snapshot
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
	Attempts   int
	Status     string
	Owner      string    // the worker holding the lease, when running
	LeaseUntil time.Time // a running task whose lease passed may be claimed again
	CreatedAt  time.Time
	UpdatedAt  time.Time
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
}

// RunCursor is a position in StaleRuns' order: the last run seen.
type RunCursor struct {
	UpdatedAt time.Time
	ID        string
}

// LedgerPrev is what AppendLedger tells the record builder.
type LedgerPrev struct {
	Seq    int64         // the seq the new record must take
	Latest *LedgerRecord // the key's latest record, nil if the key is new
}

// Store is the persistence of asmp. All methods are safe for concurrent use
// by many goroutines and, for shared backends, by many processes. Every
// method that returns without error has made its write durable: an
// acknowledged write survives a crash of the process.
type Store interface {
	// CreateRun stores a new run with its first event (Seq 1) and an optional
	// task, atomically. ErrExists if the id is taken.
	CreateRun(ctx context.Context, c Commit) error

	// GetRun returns the run's current value, or ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)

	// CommitRun applies c if, and only if, the stored run still has version
	// expected (compare-and-set). It returns ErrConflict when the version has
	// moved on and ErrNotFound for an unknown run. Event, Enqueue and
	// Complete are applied in the same transaction or not at all.
	CommitRun(ctx context.Context, expected int64, c Commit) error

	// Events returns up to limit events of the run with Seq > after, in
	// Seq order (limit <= 0: all). ErrNotFound for an unknown run.
	Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error)

	// StaleRuns returns up to limit runs last changed (UpdatedAt) before
	// before, ordered by (UpdatedAt, ID), starting after the cursor (the
	// zero cursor: from the oldest). It is how retention finds candidates.
	StaleRuns(ctx context.Context, before time.Time, after RunCursor, limit int) ([]Run, error)

	// DeleteRun removes run id with its events and tasks, atomically, if
	// its version is still version: ErrConflict when the run has moved on,
	// ErrNotFound when it is unknown. The ledger is never touched.
	DeleteRun(ctx context.Context, id string, version int64) error

	// CountRuns returns how many runs are stored, by workflow-independent
	// stored status override ("" for runs whose status is derived).
	CountRuns(ctx context.Context) (map[string]int64, error)

	// ClaimTask hands one claimable task to owner: a pending task, or a
	// running one whose lease ended before now, oldest first, whose run
	// belongs to one of workflows (nil: any workflow), so that a process
	// never takes a task it cannot run. The claimed task is running, owned
	// by owner until now+lease, with Attempts incremented. ok is false when
	// no task is claimable. Two callers never claim the same task for
	// overlapping leases.
	ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration, workflows []string) (t Task, ok bool, err error)

	// ExtendTask renews owner's lease on a running task until the given
	// time. ErrConflict if owner no longer holds it.
	ExtendTask(ctx context.Context, id, owner string, until time.Time) error

	// ReleaseTask returns a running task held by owner to pending, so
	// another worker may claim it (used on shutdown). ErrConflict if owner
	// no longer holds it.
	ReleaseTask(ctx context.Context, id, owner string) error

	// FinishTask marks a task done without changing its run (for a task
	// whose run moved on while it ran). Finishing a done task is a no-op.
	FinishTask(ctx context.Context, id string) error

	// PendingTasks counts tasks that are not done (queue depth).
	PendingTasks(ctx context.Context) (int64, error)

	// AppendLedger appends one record. build is called, inside the store's
	// transaction, with the next seq and the key's latest record; it returns
	// the complete record (with that Seq and Key) or an error that aborts
	// the append. Appends are serialised: seqs are gap-free and unique even
	// across processes. AppendLedger may call build more than once.
	AppendLedger(ctx context.Context, key string, build func(LedgerPrev) (LedgerRecord, error)) (LedgerRecord, error)

	// LedgerRecord returns the record with that inv_ID, or ErrNotFound.
	LedgerRecord(ctx context.Context, invID string) (LedgerRecord, error)

	// LedgerHistory returns every record of key, oldest first (ErrNotFound
	// when the key has none).
	LedgerHistory(ctx context.Context, key string) ([]LedgerRecord, error)

	// LedgerRange returns the records with from <= Seq < to, in Seq order.
	LedgerRange(ctx context.Context, from, to int64) ([]LedgerRecord, error)

	// LedgerSize returns the number of records (the highest seq).
	LedgerSize(ctx context.Context) (int64, error)

	// LedgerLatest returns, for each key whose latest record has type typ,
	// that latest record, ordered by key, for keys > after, up to limit.
	LedgerLatest(ctx context.Context, typ, after string, limit int) ([]LedgerRecord, error)

	// ReplayedBy returns the inv_IDs of records whose ReplayOf is invID, in Seq order.
	ReplayedBy(ctx context.Context, invID string) ([]string, error)

	// Close releases the store's resources.
	Close() error

	// --- Tamper-evident ledger (SPEC section 16): signed checkpoints
	// stored with the records they cover. This group belongs with the
	// ledger methods above.

	// AppendLedgerSigned is AppendLedger whose transaction also stores
	// one checkpoint. Once the transaction's records are built (one
	// record, or every record of a group commit), sign is called inside
	// the transaction with the newest stored checkpoint (nil when none)
	// and the records after it, in seq order, with their Canonical bytes;
	// the checkpoint it returns is stored in the same transaction. It
	// returns the record and the checkpoint committed with it. A sign
	// error aborts the whole transaction.
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

// Notifier is implemented by stores shared between processes (Postgres): it
// reports commits made by any process, so that streams on one replica see
// changes made on another. Backends used by a single process need not
// implement it; the engine publishes its own commits in-process.
type Notifier interface {
	// Listen calls fn with (runID, version) for every run commit, from any
	// process, until ctx ends. It returns when ctx ends or the listener fails.
	Listen(ctx context.Context, fn func(runID string, version int64)) error
}

// Pinger is implemented by stores whose backend can become unreachable.
type Pinger interface {
	Ping(ctx context.Context) error
}
