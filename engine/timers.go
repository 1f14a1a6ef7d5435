package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// Timers of states (SPEC section 17). Entering a state stores its timers
// in the commit that enters it (Commit.ReplaceTimers, Commit.Timers), and
// every commit that leaves a state with timers, or ends the run, replaces
// them, so a pending timer always belongs to the run's current entry into
// its state. A timer loop (StartTimers) claims due timers under leases and
// fires each as actor "timer" through the same validation as a client's
// request; the compare-and-set on the run's version decides, so a timer
// fires once however many replicas claim it.

// ActorTimer is the actor of transitions fired by timers.
const ActorTimer = "timer"

// stateTimers returns the timers to store for a run entering st at
// entered with data, and a note for the event log naming those whose due
// time could not be computed (an `at` expression that fails on the data):
// they are not set.
func stateTimers(st *workflow.State, data map[string]any, entered time.Time) ([]store.Timer, string) {
	due := st.DueTimers(data, entered)
	if len(due) == 0 {
		return nil, ""
	}
	out := make([]store.Timer, 0, len(due))
	var notes []string
	for _, d := range due {
		if d.Err != nil {
			notes = append(notes, "Timer not set: "+d.Err.Error()+".")
			continue
		}
		var raw json.RawMessage
		if len(d.Timer.Data) > 0 {
			raw, _ = json.Marshal(d.Timer.Data) // validated JSON values
		}
		out = append(out, store.Timer{Action: d.Timer.Action, DueAt: d.At.UTC(), Data: raw})
	}
	return out, strings.Join(notes, " ")
}

// enterTimers sets c to store the timers of state to (of def) for the run
// entering it with data, replacing the run's pending ones, when from (the
// state left; nil when the run is created) or to has timers. A note on
// timers that could not be set goes in the event's reason.
func enterTimers(c *store.Commit, from, to *workflow.State, data map[string]any, now time.Time) {
	if (from == nil || len(from.Timers) == 0) && (to == nil || len(to.Timers) == 0) {
		return
	}
	c.ReplaceTimers = true
	c.Timers = nil
	if to == nil {
		return
	}
	var note string
	c.Timers, note = stateTimers(to, data, now)
	if note != "" && c.Event.Reason == "" {
		c.Event.Reason = note
	}
}

// RunTimers returns the run's pending timers, ordered by due time. Only a
// state that declares timers has any, so a run in another state costs no
// read.
func (e *Engine) RunTimers(ctx context.Context, r *Run) ([]store.Timer, error) {
	st := r.StateDef()
	if st == nil || len(st.Timers) == 0 || r.Snapshot.Status == protocol.StatusFailed {
		return nil, nil
	}
	ts, err := e.store.RunTimers(ctx, r.ID)
	if err != nil {
		return nil, internal("could not read the run's timers", err)
	}
	// A timer stored for an earlier entry into the state cannot remain
	// (the entry replaced it), but never show one that names another state.
	return slices.DeleteFunc(ts, func(t store.Timer) bool { return t.State != r.State }), nil
}

// loadTimers sets r.Timers to the run's pending timers unless r knows
// them already; it reads the store only when r's state declares timers.
func (e *Engine) loadTimers(ctx context.Context, r *Run) error {
	if r.timersKnown {
		return nil
	}
	ts, err := e.RunTimers(ctx, r)
	if err != nil {
		return err
	}
	r.Timers, r.timersKnown = ts, true
	return nil
}

// setTimersFrom sets r.Timers to the pending timers after commit c, which
// made r from prev (nil for a created run): the commit's own when it
// replaces them, else prev's less those it removed, when prev knew them.
func (r *Run) setTimersFrom(c *store.Commit, prev *Run) {
	switch {
	case c.ReplaceTimers || prev == nil:
		ts := make([]store.Timer, len(c.Timers))
		for i, t := range c.Timers {
			t.RunID, t.WorkflowID, t.State, t.Version = c.Run.ID, c.Run.WorkflowID, c.Run.State, c.Run.Version
			t.ID = store.TimerID(t.RunID, t.Version, t.Action)
			ts[i] = t
		}
		store.SortTimers(ts)
		r.Timers, r.timersKnown = ts, true
	case prev.timersKnown:
		ts := slices.DeleteFunc(slices.Clone(prev.Timers), func(t store.Timer) bool {
			return slices.Contains(c.DoneTimers, t.ID)
		})
		if c.Run.Snapshot.Status == protocol.StatusFailed {
			ts = nil
		}
		r.Timers, r.timersKnown = ts, true
	default:
		r.Timers, r.timersKnown = nil, false
	}
}

// eventTimers returns the timers pending right after ev, a commit of a run
// of def, as far as the event tells them: an event that enters its state
// (a run created, a transition, a migration) stored that state's timers,
// due from the event's time, which are computed again here, with no read.
// Other events (a task retry, a refused timer) kept timers the event does
// not name: none are returned for them.
func eventTimers(def *workflow.Definition, ev *store.Event, data map[string]any) []store.Timer {
	switch ev.Kind {
	case store.EventCreated, store.EventTransition, store.EventMigrated:
	default:
		return nil
	}
	st, ok := def.State(ev.Snapshot.State)
	if !ok || len(st.Timers) == 0 || ev.Snapshot.Status == protocol.StatusFailed {
		return nil
	}
	ts, _ := stateTimers(st, data, ev.Time)
	store.SortTimers(ts)
	return ts
}

// TimerOptions configure the timer loop (StartTimers).
type TimerOptions struct {
	// Owner names this process in timer leases (default: a random id).
	Owner string
	// Lease is how long a claimed timer stays this process's before
	// another may claim it (0 = DefaultLease): a process that dies while
	// firing leaves its timers to the others once the lease ends.
	Lease time.Duration
	// Batch is how many due timers one claim takes, and how many claimed
	// timers may wait to fire at once (0 = 4 × Concurrency): with a backlog the loop
	// claims again once no more than half a batch is left to fire.
	Batch int
	// Concurrency is how many timers fire at once (0 = 256, or 512 on a
	// shared store such as Postgres): their transitions share the store's
	// group commits, so more at once make larger groups (on Postgres, 64
	// at once fired 10,000 timers in about twice the time 256 did, and
	// 512 fired them sooner again; on SQLite, whose one writer is the
	// bound, 512 did no better than 256).
	Concurrency int
	// Poll bounds the wait for timers stored by other processes (0 = 1s);
	// timers stored by this process wake the loop when they are due.
	Poll time.Duration
}

// TimerLoop fires due timers until Stop.
type TimerLoop struct {
	e      *Engine
	opts   TimerOptions
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	mu     sync.Mutex
	nextAt time.Time // when the loop means to look next; zero while it looks
}

// StartTimers starts the loop that fires this engine's due timers (of
// every served workflow's runs, whichever process stored them). Stop it
// before closing the store.
func (e *Engine) StartTimers(opts *TimerOptions) *TimerLoop {
	o := e.timerDefaults(opts)
	ctx, cancel := context.WithCancel(context.Background())
	l := &TimerLoop{e: e, opts: o, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	e.timerMu.Lock()
	e.timerLoop = l
	e.timerMu.Unlock()
	go l.run()
	return l
}

// Stop ends the loop: timers being fired finish, claimed ones not yet
// fired are handed back to the store.
func (l *TimerLoop) Stop() {
	l.e.timerMu.Lock()
	if l.e.timerLoop == l {
		l.e.timerLoop = nil
	}
	l.e.timerMu.Unlock()
	l.cancel()
	<-l.done
}

// timersStored tells the loop that a commit stored timers, the earliest
// due at due: it looks again if that is before its next look.
func (e *Engine) timersStored(ts []store.Timer) {
	if len(ts) == 0 {
		return
	}
	e.timerMu.Lock()
	l := e.timerLoop
	e.timerMu.Unlock()
	if l == nil {
		return
	}
	due := ts[0].DueAt
	for _, t := range ts[1:] {
		if t.DueAt.Before(due) {
			due = t.DueAt
		}
	}
	l.mu.Lock()
	poke := l.nextAt.IsZero() || due.Before(l.nextAt)
	l.mu.Unlock()
	if poke {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// run is the loop: it claims due timers and fires them, Concurrency at
// once. After a full claim (a backlog) it claims again as soon as no
// more than half a batch is left to fire, not once the whole batch is
// done, so the firing never waits for a claim, nor a claim for the
// slowest timer of a batch: at most Batch claimed timers are in flight.
// After a partial claim it lets those fire before it looks again.
func (l *TimerLoop) run() {
	defer close(l.done)
	e := l.e
	f := newFirer(l.opts)
	defer f.wait()
	for l.ctx.Err() == nil {
		if !f.room(l.ctx) {
			break
		}
		limit := l.opts.Batch - f.pending()
		l.mu.Lock()
		l.nextAt = time.Time{}
		l.mu.Unlock()
		claimedAt := e.clock.Now()
		ts, runs, err := e.claimDue(l.ctx, claimedAt, limit, l.opts.Owner, claimedAt.Add(l.opts.Lease))
		if err != nil && l.ctx.Err() == nil {
			e.log.Error("claiming due timers failed", "err", internal("could not claim due timers", err))
		}
		e.fireAll(l.ctx, l.opts, f, ts, runs)
		if err == nil && len(ts) == limit {
			continue // more may be due
		}
		// Not a full claim: no backlog. Let what was claimed fire before
		// looking again, rather than claim the few timers falling due
		// meanwhile one small claim (a write) after another.
		if !f.drained(l.ctx) {
			break
		}
		wait := l.opts.Poll
		if at, ok, nerr := e.store.NextTimerDue(l.ctx); nerr == nil && ok {
			if err == nil && at.After(claimedAt) && !at.After(e.clock.Now()) {
				continue // fell due since the claim: claim it now
			}
			wait = min(wait, at.Sub(e.clock.Now()))
		}
		if wait <= 0 {
			// Due at the last claim but not claimed (a claim error, or
			// another process's lease just ending): do not spin.
			wait = min(l.opts.Poll, 50*time.Millisecond)
		}
		l.mu.Lock()
		l.nextAt = e.clock.Now().Add(wait)
		l.mu.Unlock()
		t := e.clock.NewTimer(wait)
		select {
		case <-l.ctx.Done():
		case <-l.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// firer fires claimed timers, at most Concurrency at once, and counts
// those claimed and not yet handled.
type firer struct {
	batch int
	sem   chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	n     int           // claimed, not yet handled
	freed chan struct{} // a timer was handled
	// behind holds, for each run whose timers are firing, the run's timers
	// claimed since (by a later claim), which its goroutine fires next, in
	// claim (due) order: a run's timers never fire at once, whichever
	// claims took them. Under mu.
	behind map[string][]store.Timer
}

func newFirer(o TimerOptions) *firer {
	return &firer{batch: o.Batch, sem: make(chan struct{}, o.Concurrency), freed: make(chan struct{}, 1), behind: map[string][]store.Timer{}}
}

// queueBehind appends ts to the timers waiting behind their run's firing
// and reports true, if the run has one; else it reports false.
func (f *firer) queueBehind(run string, ts []store.Timer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, ok := f.behind[run]
	if ok {
		f.behind[run] = append(q, ts...)
	}
	return ok
}

// next takes the timers waiting behind run's firing; when there are none,
// the run's firing ends (later claims start a new one).
func (f *firer) next(run string) []store.Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.behind[run]
	if len(q) == 0 {
		delete(f.behind, run)
		return nil
	}
	f.behind[run] = q[:0:0]
	return q
}

func (f *firer) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// room waits until no more than half a batch is left to fire; false if
// ctx ended first.
func (f *firer) room(ctx context.Context) bool {
	for f.pending() > f.batch/2 {
		select {
		case <-ctx.Done():
			return false
		case <-f.freed:
		}
	}
	return true
}

// drained waits until no claimed timer is left to fire; false if ctx
// ended first.
func (f *firer) drained(ctx context.Context) bool {
	for f.pending() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-f.freed:
		}
	}
	return true
}

// wait waits until every timer handed to the firer is handled.
func (f *firer) wait() { f.wg.Wait() }

// TimerRunsClaimer is a store.TimerStore that claims due timers together
// with their runs: ClaimDueTimersWithRuns is ClaimDueTimers that also
// returns, for each claimed timer ts[i], its run's value runs[i] as read
// by the claim (a zero Run, ID "", when the run is gone). The timer loop
// then fires a claimed batch without reading each run (one round trip
// per batch instead of one per timer, on a store across a network). The
// values may be stale by the time a timer fires: a firing planned on one
// commits only if the run still has its version (the store compares and
// sets), and is decided again on the stored run otherwise.
type TimerRunsClaimer interface {
	ClaimDueTimersWithRuns(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) (ts []store.Timer, runs []store.Run, err error)
}

// claimDue claims due timers, with their runs when the store claims them
// together (TimerRunsClaimer; runs is nil otherwise).
func (e *Engine) claimDue(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Timer, []store.Run, error) {
	if c, ok := e.store.(TimerRunsClaimer); ok {
		ts, runs, err := c.ClaimDueTimersWithRuns(ctx, now, limit, owner, leaseUntil)
		if err == nil && len(runs) != len(ts) {
			runs = nil // not one run per timer: read each
		}
		return ts, runs, err
	}
	ts, err := e.store.ClaimDueTimers(ctx, now, limit, owner, leaseUntil)
	return ts, nil, err
}

// fireAll hands ts, claimed for o.Owner, to f: the timers of each run
// fire in turn, in the order of ts (by due time), the runs once a place
// among the Concurrency is free; the first on runs[i], its run as claimed,
// when runs is not nil; a run whose timers of an earlier claim are still
// firing gets these queued behind them. So of two timers of one run due
// together (a server that was down past both) the earlier fires first and
// the later, its run moved on, is void: they never race, in one claim or
// in two. Once ctx ends (stopping), the timers not yet started are handed
// back at once rather than left to their leases.
func (e *Engine) fireAll(ctx context.Context, o TimerOptions, f *firer, ts []store.Timer, runs []store.Run) {
	f.mu.Lock()
	f.n += len(ts)
	f.mu.Unlock()
	done := func() {
		f.mu.Lock()
		f.n--
		f.mu.Unlock()
		select {
		case f.freed <- struct{}{}:
		default:
		}
	}
	type runTimers struct {
		first int // index in ts of the run's first timer
		ts    []store.Timer
	}
	var groups []*runTimers // one per run, in the order of ts
	byRun := map[string]*runTimers{}
	for i, t := range ts {
		g := byRun[t.RunID]
		if g == nil {
			g = &runTimers{first: i}
			byRun[t.RunID] = g
			groups = append(groups, g)
		}
		g.ts = append(g.ts, t)
	}
	for _, g := range groups {
		run, mine := ts[g.first].RunID, g.ts
		if f.queueBehind(run, mine) {
			continue // the run's timers claimed before still fire: these follow them
		}
		var known *store.Run
		if runs != nil && runs[g.first].ID == run {
			known = &runs[g.first]
		}
		took := false
		select {
		case f.sem <- struct{}{}:
			took = true
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			if took {
				<-f.sem
			}
			for _, t := range mine {
				if err := e.store.ReleaseTimer(context.Background(), t.ID, o.Owner); err != nil && !errors.Is(err, store.ErrNotFound) {
					e.log.Warn("releasing a timer failed; its lease will end", "timer", t.ID, "err", err)
				}
				done()
			}
			continue
		}
		f.mu.Lock()
		f.behind[run] = nil // firing: later claims of the run's timers queue behind
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer func() { <-f.sem; f.wg.Done() }()
			for batch := mine; len(batch) > 0; batch = f.next(run) {
				for _, t := range batch {
					if err := e.fireTimer(context.Background(), t, known); err != nil {
						e.log.Warn("firing a timer failed; it fires again when its lease ends", "timer", t.ID, "run", t.RunID, "err", err)
					}
					known = nil // the run may have moved on: read it again
					done()
				}
			}
		}()
	}
}

// FireDueTimers claims the timers due now (by the engine's clock), up to
// o.Batch, under leases for o.Owner, fires them (o.Concurrency at once)
// and returns how many it claimed, once all are handled. The timer loop
// (StartTimers) calls it whenever a timer falls due; a test with a fake
// clock, or a process that fires timers from its own schedule, may call
// it directly. nil o means TimerOptions' defaults.
func (e *Engine) FireDueTimers(ctx context.Context, o *TimerOptions) (int, error) {
	n, _, err := e.fireDue(ctx, e.timerDefaults(o))
	return n, err
}

func (e *Engine) timerDefaults(opts *TimerOptions) TimerOptions {
	var o TimerOptions
	if opts != nil {
		o = *opts
	}
	if o.Owner == "" {
		o.Owner = "timers-" + uuid.NewString()[:8]
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 256
		if c, ok := e.store.(interface{ Capabilities() store.Capabilities }); ok && c.Capabilities().Shared {
			// A store across a network (Postgres) commits in groups per
			// connection lane: twice as many firings in flight keep a
			// group forming while the one before is on the wire.
			o.Concurrency = 512
		}
	}
	if o.Batch <= 0 {
		o.Batch = 4 * o.Concurrency
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return o
}

// fireDue claims and fires the timers due now, and returns how many it
// claimed and the time it claimed them by: every timer claimable then
// was claimed, unless the batch was full.
func (e *Engine) fireDue(ctx context.Context, o TimerOptions) (int, time.Time, error) {
	now := e.clock.Now()
	ts, runs, err := e.claimDue(ctx, now, o.Batch, o.Owner, now.Add(o.Lease))
	if err != nil {
		return 0, now, internal("could not claim due timers", err)
	}
	f := newFirer(o)
	e.fireAll(ctx, o, f, ts, runs)
	f.wait()
	return len(ts), now, nil
}

// FireTimer fires t, a timer the caller claimed: if the run is still in
// the entry into t's state that stored it, t's action is fired as actor
// "timer", validated like any request, with the timer's body (its data
// over the run's, for the action's expected fields). A refused firing is
// recorded as a store.EventTimerRefused event and the run stays. A timer whose
// run moved on is void. Either way the timer is done; an error (the store
// failed) leaves it to fire again when its lease ends.
func (e *Engine) FireTimer(ctx context.Context, t store.Timer) error {
	return e.fireTimer(ctx, t, nil)
}

// fireTimer is FireTimer, deciding first on known, the run's value as
// the claim read it, when it is not nil (else, and after a conflict, on
// the stored run); the transition is then planned on known too, without
// a read.
func (e *Engine) fireTimer(ctx context.Context, t store.Timer, known *store.Run) error {
	for attempt := 0; attempt < e.retries; attempt++ {
		var sr store.Run
		var err error
		if attempt == 0 && known != nil {
			sr = *known
		} else {
			sr, err = e.storedRun(ctx, t.RunID)
		}
		if protocol.ErrorCode(err) == protocol.ENotFound {
			return e.voidTimer(ctx, t)
		}
		if err != nil {
			return err
		}
		// The timer is pending while the run is in the entry into the
		// state that stored it (every commit that leaves or re-enters the
		// state replaces it). A run still at the version of the commit
		// that stored it has had no commit since, so the timer is pending
		// (no read); else read the run's timers. Read after the run: a
		// commit that re-entered the state between the two reads moves
		// the version, so the compare-and-set below fails and this is
		// decided again.
		if sr.Version != t.Version {
			pending, err := e.store.RunTimers(ctx, t.RunID)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(pending, func(p store.Timer) bool { return p.ID == t.ID }) {
				return nil // fired, voided or refused already
			}
		}
		r, err := e.view(ctx, sr)
		if err != nil {
			return err
		}
		st := r.StateDef()
		var def *workflow.Timer
		if st != nil {
			def, _ = st.Timer(t.Action)
		}
		if st != nil && len(st.Timers) > 1 {
			earlier, err := e.earlierTimerDue(ctx, t)
			if err != nil {
				return err
			}
			if earlier {
				return nil // it fires again when its lease ends, if the earlier leaves it pending
			}
		}
		tr, ok := r.Def.Transition(r.State, t.Action)
		if def == nil || !ok {
			return e.refuseTimer(ctx, r, t, "The run's workflow version declares no timer "+quote(t.Action)+" in state "+r.State+".")
		}
		if attempt == 0 && known != nil {
			// Plan on the claimed value rather than read the run again.
			// (After a read of the stored run the transition reads it
			// once more, as it always did: on SQLite, keeping that read
			// value too measured no better, within the noise.)
			e.know(r)
		}
		_, err = e.transition(ctx, r.ID, t.Action, def.Body(tr.Expects, r.Data), TransitionOptions{Actor: ActorTimer, IfMatch: r.Version})
		switch code := protocol.ErrorCode(err); {
		case err == nil:
			return nil
		case code == protocol.EConflict:
			continue // the run moved on meanwhile: decide again
		case code == protocol.ENotFound:
			return e.voidTimer(ctx, t)
		case code == protocol.EForbidden, code == protocol.EInvalid, code == protocol.ETooLarge:
			return e.refuseTimer(ctx, r, t, protocol.ErrorHint(err))
		default:
			return err
		}
	}
	return errors.New("engine: the run changed too often while its timer fired")
}

// earlierTimerDue reports whether t's run has another pending timer due
// before t (ties by ID; so due now, t being due), which this call has not
// fired: held by another process's lease (another replica claimed it), or
// claimable. (A run's pending timers are all of its current entry into
// its state: each entry replaces them.) t must wait for it, so that
// of two timers due together the earlier fires first on every replica
// (the engine's own claims already fire a run's timers in due order):
// t is left to its lease, and once that ends it is claimed again and
// fires unless the earlier moved the run on (then it is void). A state
// with a single timer never asks.
func (e *Engine) earlierTimerDue(ctx context.Context, t store.Timer) (bool, error) {
	pending, err := e.store.RunTimers(ctx, t.RunID)
	if err != nil {
		return false, err
	}
	for _, p := range pending {
		if p.DueAt.Before(t.DueAt) || p.DueAt.Equal(t.DueAt) && p.ID < t.ID {
			return true, nil
		}
	}
	return false, nil
}

// know keeps r, a value of its run read from the store, as the run's last
// known value (see pendingCommit), so that the transition about to be
// planned on it does not read the run again; unless the engine has a
// commit of the run queued, or knows it at r's version or later. Like
// any known value, a plan on it commits only if the stored run still has
// its version. A run whose data is larger than maxKnownData is not kept,
// nor any once maxKnown are.
func (e *Engine) know(r *Run) {
	if len(r.Snapshot.Data) > maxKnownData {
		return
	}
	mu := e.lock(r.ID)
	mu.Lock() // no transition of the run between its plan and its queued commit
	defer mu.Unlock()
	e.pendMu.Lock()
	defer e.pendMu.Unlock()
	if p := e.pending[r.ID]; p == nil && len(e.pending) < maxKnown || p != nil && resolved(p) && p.next.Version < r.Version {
		e.pending[r.ID] = &pendingCommit{next: r, done: closedDone}
	}
}

// closedDone is the done channel of a known value read from the store.
var closedDone = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

func (e *Engine) voidTimer(ctx context.Context, t store.Timer) error {
	if err := e.store.CompleteTimer(ctx, t.ID); err != nil {
		return internal("could not void a timer", err)
	}
	return nil
}

// refuseTimer records that t's firing was refused for reason: an event,
// the run staying where it is, and t done in the same commit. Nothing is
// recorded if the run moved on since r (the timer is then void or fires
// again on the next look).
func (e *Engine) refuseTimer(ctx context.Context, r *Run, t store.Timer, reason string) error {
	mu := e.lock(r.ID)
	mu.Lock()
	defer mu.Unlock()
	cur, err := e.GetRun(ctx, r.ID)
	if err != nil {
		if protocol.ErrorCode(err) == protocol.ENotFound {
			return e.voidTimer(ctx, t)
		}
		return err
	}
	if cur.Version != r.Version {
		return nil // moved on: its claim ends and the next look decides
	}
	if cur.Snapshot.Status == protocol.StatusProcessing {
		// The state's task owns this version of the run: an event here
		// would move the version under it and strand it (its result would
		// be stale, the run processing for ever). The refusal goes to the
		// log instead, and the timer is done.
		e.log.Warn("a timer's firing was refused while the state's task runs; it is not recorded as an event", "run", cur.ID, "timer", t.ID, "reason", reason)
		return e.voidTimer(ctx, t)
	}
	now := e.now().UTC()
	next := cur.Run
	next.Version++
	next.UpdatedAt = now
	c := store.Commit{
		Run: next,
		Event: store.Event{RunID: cur.ID, Seq: next.Version, Time: now, Kind: store.EventTimerRefused, Action: t.Action, From: cur.State, To: cur.State,
			Actor: ActorTimer, Reason: protocol.Truncate("Timer "+quote(t.Action)+" was due at "+t.DueAt.UTC().Format(time.RFC3339)+" and refused: "+reason, maxFailureReason),
			Offered: actionNames(e.Offered(cur)), Patch: noChange, Snapshot: next.Snapshot},
		DoneTimers: []string{t.ID},
	}
	err = e.store.CommitRun(ctx, cur.Version, c).Wait()
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	if err != nil {
		return internal("could not record a refused timer", err)
	}
	e.forget(cur.ID)
	e.published(cur.WorkflowID, c.Event)
	return nil
}
