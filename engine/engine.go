// Package engine runs ASMP workflows on a store: it starts runs, builds State
// Frames and CLI objects, applies transitions as compare-and-set commits that
// are re-validated after every lost race, invokes stage tools, serves stage
// resources and skills, and runs background tasks.
//
// The engine knows nothing of HTTP or of metrics: package server exposes it
// over HTTP, encodes and caches its answers, and turns what the engine
// reports to an Observer into metrics; package client can drive it
// in-process.
package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/webhook"
	"github.com/asmp-dev/asmp/workflow"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxRetries = 32
	DefaultLease      = 30 * time.Second
)

// RowInvoker runs an OIP directory row on behalf of a workflow tool or task.
// Package oip provides the implementation; without one, row-bound tools and
// tasks answer "not implemented".
type RowInvoker interface {
	// InvokeRow invokes the current version of row key with input and waits
	// for its outcome. result is what a row tool returns as {"result": …};
	// ok reports whether the command succeeded (for a task's success or
	// failure action); reason explains a failure.
	InvokeRow(ctx context.Context, call RowCall) (result any, ok bool, reason string, err error)
}

// RowCall describes one invocation of a directory row by a workflow.
type RowCall struct {
	Key   string         // the row's key
	Input map[string]any // input for the row
	// FromData is set for tasks: Input is the run's data, and keys the row
	// does not declare are dropped instead of refused.
	FromData bool
	RunID    string
	State    string
	Tool     string // the tool name, for tools
	// TaskID is the task id, for tasks: stable across the runs of one
	// attempt (a re-run after a crash); each retry of a failed attempt
	// (RetryAttempt > 1) is a task of its own, with its own id.
	TaskID string
	// Attempt counts the runs of the task TaskID, from 1: 2 is a re-run of
	// the same attempt after a crash (its ledger key replays the first).
	Attempt int
	// RetryAttempt is the attempt under the state's retry policy, from 1;
	// MaxAttempts is the policy's bound (1 without retries).
	RetryAttempt, MaxAttempts int
	// Actor is the principal on whose behalf the row runs ("task" for tasks).
	Actor string
	// Scopes are the caller's scopes; nil means all (tasks run with the
	// server's own authority).
	Scopes []string
	// Progress, when set, receives progress reports while the row runs.
	Progress func(progress, hint string)
}

// Options configure an Engine. The zero value (or nil) means defaults.
type Options struct {
	// Default is the workflow used when a run is started without a
	// workflow_id; "" means the first workflow given to New.
	Default string
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Clock is the engine's time source: the time it stamps on runs and
	// events, and the timers it waits on to fire due state timers, retry
	// tasks and start scheduled runs. nil means Now (when set) with the
	// system's timers, else clock.Real. Tests pass a *clock.Fake.
	Clock clock.Clock
	// Now, when set and Clock is nil, tells the time (kept for callers
	// that only ever needed a time source); nil means time.Now.
	Now func() time.Time
	// NewRunID returns run ids; nil means UUIDv7.
	NewRunID func() string
	// MaxRetries bounds how often a transition is re-validated after losing
	// a compare-and-set to a concurrent writer (default DefaultMaxRetries).
	MaxRetries int
	// Invoker runs directory rows for row-bound tools and tasks.
	Invoker RowInvoker
	// Observer, when set, is told of commits and prunes (see Observe).
	Observer Observer
	// MaxRunData bounds a run's stored data and milestones, in bytes of
	// JSON (0 means DefaultMaxRunData): a start or a transition (a task's
	// result included) that would make them larger is refused with
	// ETooLarge (HTTP 413) and nothing is written. A run stored larger
	// already (under a higher limit) stays readable, and may still move
	// on by transitions that do not make it larger.
	MaxRunData int64
	// Webhooks sends webhook messages and checks subscription URLs; nil
	// means webhook.NewSender(nil): https to public addresses only.
	Webhooks *webhook.Sender
	// Rand returns a number in [0, 1) for the jitter of task retries
	// (workflow.RetryPolicy.Jitter); nil means math/rand/v2's Float64.
	// Tests pass a fixed function to make retry delays deterministic.
	Rand func() float64
}

// DefaultMaxRunData is the bound on a run's data when Options.MaxRunData
// is 0: 1 MiB, the default request body limit.
const DefaultMaxRunData = 1 << 20

// Store is what the engine needs of a store, declared here: the runs with
// their events and timers, the background tasks, the stored workflow definitions and the schedules
// (store.Store, less the ledger and Close, which belong to whoever opened
// the store). A store may also offer store.Notifier (commits of other
// processes) and store.Pinger (Ping).
type Store interface {
	store.RunStore
	store.TaskStore
	store.TimerStore
	store.DefinitionStore
	store.ScheduleStore
	store.WebhookStore
}

// Engine runs workflows. It is safe for concurrent use.
type Engine struct {
	store   Store
	defs    map[string]*workflow.Definition
	order   []*workflow.Definition
	def     *workflow.Definition
	skills  map[string]*workflow.Skill
	log     *slog.Logger
	now     func() time.Time
	clock   clock.Clock
	newID   func() string
	retries int
	invoker RowInvoker
	maxData int64
	rand    func() float64
	locks   [256]sync.Mutex
	pendMu  sync.Mutex
	pending map[string]*pendingCommit // runs' queued commits and last known values
	hub     *Hub
	obs     observers
	// workflowIDs are the served workflows: workers claim only their tasks.
	workflowIDs []string
	seen        seenSeqs
	wakeMu      sync.Mutex
	wake        func()                     // wakes a task worker when a task is enqueued
	pure        map[string]map[string]bool // workflow -> state -> frames a function of the stored run
	timerMu     sync.Mutex
	timerLoop   *TimerLoop // told of stored timers (StartTimers)
	schedMu     sync.Mutex
	// schedCreate serialises CreateSchedule's look for a duplicate and
	// its store.
	schedCreate sync.Mutex
	// schedSeen holds, per schedule id, the last tick whose run this
	// engine knows to exist (recoverTick).
	schedSeen sync.Map
	// prunedBefore is the latest bound Prune was called with (Unix
	// nanoseconds): a scheduled run of a tick after it was not pruned here.
	prunedBefore atomic.Int64
	schedLoops   []*ScheduleLoop // woken when a schedule is stored (StartSchedules)
	vers         versions
	webhooks     *webhook.Sender
	subs         atomic.Pointer[subscriptions] // the active webhook subscriptions
	deliveryLoop atomic.Pointer[DeliveryLoop]  // told of stored deliveries (StartDeliveries)
	// deliveryKeep is the retention of settled deliveries while
	// KeepDeliveries runs (nanoseconds; 0: none here), for the hint of a
	// delivery that is not stored.
	deliveryKeep atomic.Int64
}

func (e *Engine) setWake(f func()) {
	e.wakeMu.Lock()
	e.wake = f
	e.wakeMu.Unlock()
}

func (e *Engine) wakeFunc() func() {
	e.wakeMu.Lock()
	defer e.wakeMu.Unlock()
	return e.wake
}

// New returns an engine serving the given workflows from st (its runs,
// tasks and definitions: Store). New stores every definition it is given (see Versions) and pins the runs
// stored before versions existed to the served version of their workflow.
func New(st Store, defs []*workflow.Definition, opts *Options) (*Engine, error) {
	if opts == nil {
		opts = &Options{}
	}
	if len(defs) == 0 {
		return nil, fmt.Errorf("engine: no workflows to serve")
	}
	e := &Engine{
		store:    st,
		defs:     map[string]*workflow.Definition{},
		skills:   map[string]*workflow.Skill{},
		log:      opts.Logger,
		now:      opts.Now,
		clock:    opts.Clock,
		newID:    opts.NewRunID,
		retries:  opts.MaxRetries,
		invoker:  opts.Invoker,
		maxData:  opts.MaxRunData,
		webhooks: opts.Webhooks,
		rand:     opts.Rand,
	}
	if e.webhooks == nil {
		e.webhooks = webhook.NewSender(nil)
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case e.clock != nil:
		e.now = e.clock.Now
	case e.now != nil:
		e.clock = nowClock{now: e.now}
	default:
		e.clock = clock.Real{}
		e.now = time.Now
	}
	if e.newID == nil {
		e.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if e.retries <= 0 {
		e.retries = DefaultMaxRetries
	}
	if e.rand == nil {
		e.rand = rand.Float64
	}
	if e.maxData <= 0 {
		e.maxData = DefaultMaxRunData
	}
	for _, d := range defs {
		if _, dup := e.defs[d.ID]; dup {
			return nil, fmt.Errorf("engine: workflow %q is given twice", d.ID)
		}
		e.defs[d.ID] = d
		e.order = append(e.order, d)
		for _, s := range d.States {
			if s.Skill == nil {
				continue
			}
			if prev, ok := e.skills[s.Skill.Path]; ok && !sameSkill(prev, s.Skill) {
				return nil, fmt.Errorf("engine: skill path %q is used by two different skills; give one of them another path", s.Skill.Path)
			}
			e.skills[s.Skill.Path] = s.Skill
		}
	}
	e.workflowIDs = e.WorkflowIDs()
	e.def = e.order[0]
	if opts.Default != "" {
		d, ok := e.defs[opts.Default]
		if !ok {
			return nil, fmt.Errorf("engine: default workflow %q is not served", opts.Default)
		}
		e.def = d
	}
	e.hub = newHub()
	e.pending = map[string]*pendingCommit{}
	e.hub.onEmpty = e.seen.drop
	e.Observe(opts.Observer)
	e.pure = pureStates(e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.storeDefinitions(ctx); err != nil {
		return nil, err
	}
	if _, err := e.loadSubscriptions(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// nowClock is the engine's clock when only Options.Now is given: its time,
// with the system's timers.
type nowClock struct {
	clock.Real
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

// Clock returns the engine's clock (Options.Clock).
func (e *Engine) Clock() clock.Clock { return e.clock }

// MaxRunData returns the bound on a run's data and milestones, in bytes
// (Options.MaxRunData).
func (e *Engine) MaxRunData() int64 { return e.maxData }

func sameSkill(a, b *workflow.Skill) bool {
	return a == b || (a.Name == b.Name && a.FS == b.FS && string(a.Content) == string(b.Content))
}

// Workflows returns the served workflows in the order given to New.
func (e *Engine) Workflows() []*workflow.Definition { return e.order }

// Default returns the default workflow.
func (e *Engine) Default() *workflow.Definition { return e.def }

// Workflow returns a served workflow by id.
func (e *Engine) Workflow(id string) (*workflow.Definition, bool) {
	d, ok := e.defs[id]
	return d, ok
}

// WorkflowIDs returns the ids of the served workflows, sorted.
func (e *Engine) WorkflowIDs() []string {
	ids := make([]string, 0, len(e.defs))
	for id := range e.defs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (e *Engine) lock(runID string) *sync.Mutex {
	// FNV-1a, inline: hash/fnv allocated a hasher and a copy of the id.
	h := uint32(2166136261)
	for i := 0; i < len(runID); i++ {
		h ^= uint32(runID[i])
		h *= 16777619
	}
	return &e.locks[h%uint32(len(e.locks))]
}

func notFound(runID string) error {
	return protocol.Errorf(protocol.ENotFound, "Run not found: no run has id %q. Start one with POST /runs.", runID)
}

func internal(op string, err error) error {
	return &protocol.Error{Code: protocol.EInternal, Hint: op, Err: err}
}
