package engine

import (
	"context"
	"errors"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// Transitions are pipelined. transition holds the run's lock only while it
// validates the action and hands the commit to the store (CommitRun), not
// while the commit is made durable: the run's next transition is validated
// against the value this one will give the run, and committed behind it,
// so that with a store that batches commits (store/sqlite: one fsync per
// group) both share one fsync; with a store that commits before CommitRun
// returns, the commit is already durable when the lock is released. The
// engine does not know which kind of store it has: it always waits for
// the commit's Pending. Nothing is answered before it is durable. If a
// queued commit fails, the commits queued behind it on the same run fail
// their compare-and-set and are validated again against the stored run, as
// after any lost compare-and-set. The value a durable commit left is kept
// (for up to maxKnown runs) to plan the run's next transition without
// reading the store: a plan on it can only be committed if the stored run
// still has its version, since the store compares and sets. A transition
// refused against a queued or kept value is decided again against the
// stored run, and GetRun of a run with a queued commit waits for it, so
// that readers (and writers that commit and wait under the run's lock,
// like the task worker's failRun) see it.

// pendingCommit is a run's latest queued commit: not yet durable until
// done is closed; after that, kept (while there is room) as the run's last
// known value if it succeeded.
type pendingCommit struct {
	next *Run          // the run as the commit leaves it
	done chan struct{} // closed once the commit is durable (and published) or failed
}

// maxKnown bounds how many runs' last committed values the engine keeps to
// plan their next transitions without reading the store first; a run whose
// data is larger than maxKnownData is not kept (the bound on memory is
// then about maxKnown × maxKnownData).
const (
	maxKnown     = 4096
	maxKnownData = 16 << 10
)

func (e *Engine) pendingOf(runID string) *pendingCommit {
	e.pendMu.Lock()
	defer e.pendMu.Unlock()
	return e.pending[runID]
}

func (e *Engine) setPending(runID string, p *pendingCommit) {
	e.pendMu.Lock()
	e.pending[runID] = p
	e.pendMu.Unlock()
}

// resolve wakes whoever waits for p. A failed commit is forgotten (unless a
// later commit of the run replaced it), and so is a large one; a durable
// one stays as the run's last known value, within maxKnown.
func (e *Engine) resolve(runID string, p *pendingCommit, ok bool) {
	e.pendMu.Lock()
	if e.pending[runID] == p && (!ok || len(p.next.Snapshot.Data) > maxKnownData) {
		delete(e.pending, runID)
	}
	if len(e.pending) > maxKnown {
		for id, q := range e.pending {
			if id != runID && resolved(q) {
				delete(e.pending, id)
			}
			if len(e.pending) <= maxKnown/2 {
				break
			}
		}
	}
	e.pendMu.Unlock()
	close(p.done)
}

func resolved(p *pendingCommit) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// transition is Transition, pipelined as described above.
func (e *Engine) transition(ctx context.Context, runID, action string, input map[string]any, o TransitionOptions) (*Run, error) {
	mu := e.lock(runID)
	mu.Lock()
	locked := true
	defer func() {
		if locked {
			mu.Unlock()
		}
	}()
	fresh := false // plan on the stored run, not on a queued or known value
	for attempt := 0; attempt < e.retries; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, protocol.Errorf(protocol.EUnavailable, "The request was cancelled before the transition was applied.")
		}
		prev := e.pendingOf(runID)
		var r *Run
		if prev != nil && !fresh {
			r = prev.next
		} else {
			var err error
			if r, err = e.GetRun(ctx, runID); err != nil { // waits for a queued commit
				return nil, err
			}
		}
		c, err := e.plan(r, action, input, o)
		if err != nil {
			if prev != nil && !fresh {
				// Refused against a queued or remembered value: decide
				// against the stored run (we hold the run's lock, so no
				// other commit of it is queued meanwhile).
				fresh = true
				continue
			}
			return nil, err
		}
		next := &Run{Run: c.Run, Def: r.Def, Data: r.Data}
		if !sameBytes(c.Run.Snapshot.Data, r.Snapshot.Data) {
			if next, err = e.view(ctx, c.Run); err != nil {
				return nil, err
			}
		}
		next.setTimersFrom(c, r)
		pend := e.store.CommitRun(ctx, r.Version, *c)
		p := &pendingCommit{next: next, done: make(chan struct{})}
		e.setPending(runID, p)
		mu.Unlock()
		locked = false

		err = pend.Wait()
		if prev != nil {
			<-prev.done // publish the run's events in commit order
		}
		if err == nil {
			e.timersStored(c.Timers)
			e.outboxStored(c)
			e.published(r.WorkflowID, c.Event)
		}
		e.resolve(runID, p, err == nil)
		switch {
		case errors.Is(err, store.ErrConflict):
			mu.Lock() // someone else moved the run: re-read, re-validate
			locked = true
			fresh = true
			continue
		case errors.Is(err, store.ErrNotFound):
			return nil, notFound(runID)
		case err != nil:
			return nil, internal("could not store the transition", err)
		}
		return next, nil
	}
	return nil, protocol.Errorf(protocol.EUnavailable, "The run is changing too fast to apply %q; try again.", action)
}
