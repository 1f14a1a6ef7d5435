package engine

import (
	"context"
	"errors"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// queuedCommitter is implemented by stores whose commits are queued,
// applied in the order they were queued and made durable in groups
// (store/sqlite: one fsync per group). CommitRunAsync queues a commit and
// returns; wait gives CommitRun's result once the commit is durable.
//
// With such a store, Transition holds the run's lock only while it
// validates the action and queues the commit, not while the commit is made
// durable: the run's next transition is validated against the value this
// one will give the run, and queued behind it, so both can share one
// fsync. Nothing is answered before it is durable. If a queued commit
// fails, the commits queued behind it on the same run fail their
// compare-and-set and are validated again against the stored run, as after
// any lost compare-and-set. A transition refused against a value that is
// not durable yet waits for it and is decided against the stored run, and
// GetRun of a run with a queued commit waits for it, so that readers (and
// writers that commit directly, like the task worker) see it.
type queuedCommitter interface {
	CommitRunAsync(ctx context.Context, expected int64, c store.Commit) (wait func() error)
}

// pendingCommit is a run's latest queued, not yet durable, commit.
type pendingCommit struct {
	next *Run          // the run as the commit leaves it
	done chan struct{} // closed once the commit is durable (and published) or failed
}

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

// resolve forgets p (unless a later commit of the run replaced it) and
// wakes whoever waits for it.
func (e *Engine) resolve(runID string, p *pendingCommit) {
	e.pendMu.Lock()
	if e.pending[runID] == p {
		delete(e.pending, runID)
	}
	e.pendMu.Unlock()
	close(p.done)
}

// transitionQueued is Transition on a queuedCommitter store.
func (e *Engine) transitionQueued(ctx context.Context, qc queuedCommitter, runID, action string, input map[string]any, o TransitionOptions) (*Run, error) {
	mu := e.lock(runID)
	mu.Lock()
	locked := true
	defer func() {
		if locked {
			mu.Unlock()
		}
	}()
	for attempt := 0; attempt < e.retries; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, protocol.Errorf(protocol.EUnavailable, "The request was cancelled before the transition was applied.")
		}
		prev := e.pendingOf(runID)
		var r *Run
		if prev != nil {
			r = prev.next
		} else {
			var err error
			if r, err = e.GetRun(ctx, runID); err != nil { // no queued commit: the stored run
				return nil, err
			}
		}
		c, err := e.plan(r, action, input, o)
		if err != nil {
			if prev != nil {
				// Refused against a value that is not durable yet: decide
				// against the stored run once that commit is resolved (we
				// hold the run's lock, so no other commit of it is queued).
				<-prev.done
				continue
			}
			return nil, err
		}
		next := &Run{Run: c.Run, Def: r.Def, Data: r.Data}
		if !sameBytes(c.Run.Snapshot.Data, r.Snapshot.Data) {
			if next, err = e.view(c.Run); err != nil {
				return nil, err
			}
		}
		wait := qc.CommitRunAsync(ctx, r.Version, *c)
		p := &pendingCommit{next: next, done: make(chan struct{})}
		e.setPending(runID, p)
		mu.Unlock()
		locked = false

		err = wait()
		if prev != nil {
			<-prev.done // publish the run's events in commit order
		}
		if err == nil {
			e.published(r.WorkflowID, c.Event)
		}
		e.resolve(runID, p)
		switch {
		case errors.Is(err, store.ErrConflict):
			mu.Lock() // someone else moved the run: re-read, re-validate
			locked = true
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
