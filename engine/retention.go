package engine

import (
	"context"
	"errors"
	"time"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// prunePage is how many stale runs Prune reads at a time.
const prunePage = 500

// Prune deletes the runs that have ended (completed or failed) and have
// not changed since before, with their events and tasks, and returns how
// many it deleted. Runs that are still active, awaiting input or
// processing are never deleted, however old, nor runs of workflows this
// engine does not serve (it cannot tell whether they ended). A run that
// changes while Prune looks at it stays. The OIP ledger is never touched.
func (e *Engine) Prune(ctx context.Context, before time.Time) (int, error) {
	for b := before.UnixNano(); ; {
		cur := e.prunedBefore.Load()
		if cur >= b || e.prunedBefore.CompareAndSwap(cur, b) {
			break
		}
	}
	n := 0
	cur := store.RunCursor{}
	for {
		page, err := e.store.StaleRuns(ctx, before, cur, prunePage)
		if err != nil {
			return n, internal("could not list stale runs", err)
		}
		for _, sr := range page {
			cur = store.RunCursor{UpdatedAt: sr.UpdatedAt, ID: sr.ID}
			if _, served := e.defs[sr.WorkflowID]; !served {
				continue
			}
			def, err := e.definition(ctx, sr.WorkflowID, sr.WorkflowVersion)
			if err != nil {
				continue
			}
			r := &Run{Run: sr, Def: def}
			if !protocol.Terminal(r.Status()) {
				continue
			}
			err = e.store.DeleteRun(ctx, sr.ID, sr.Version)
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				continue // moved on, or pruned by another process
			}
			if err != nil {
				return n, internal("could not delete run "+sr.ID, err)
			}
			e.forget(sr.ID)
			e.obs.pruned(sr.WorkflowID, sr.ID)
			n++
		}
		if len(page) < prunePage {
			return n, nil
		}
	}
}

// forget drops what the engine keeps in memory about a deleted run.
func (e *Engine) forget(runID string) {
	e.pendMu.Lock()
	if p, ok := e.pending[runID]; ok && resolved(p) {
		delete(e.pending, runID)
	}
	e.pendMu.Unlock()
}

// KeepRuns prunes, every interval (by the engine's clock) until ctx ends,
// the ended runs that have not changed for longer than keep (see Prune),
// the first time at once; it reports each round that deleted some, or
// failed, to logf when that is not nil. It returns when ctx ends.
func (e *Engine) KeepRuns(ctx context.Context, keep, interval time.Duration, logf func(pruned int, err error)) {
	e.keep(ctx, keep, interval, e.Prune, logf)
}

// keep is the loop of KeepRuns and KeepDeliveries: prune with the cut-off
// keep before the engine's time, at once and then every interval, until
// ctx ends.
func (e *Engine) keep(ctx context.Context, keep, interval time.Duration, prune func(context.Context, time.Time) (int, error), logf func(int, error)) {
	for {
		n, err := prune(ctx, e.clock.Now().Add(-keep))
		if logf != nil && (n > 0 || err != nil) && ctx.Err() == nil {
			logf(n, err)
		}
		t := e.clock.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// RetentionInterval is how often a server that keeps ended runs or
// settled webhook deliveries for keep prunes them (KeepRuns,
// KeepDeliveries): a quarter of keep, at least 100ms and at most 10
// minutes (with 7 days, every 10 minutes), so that one is deleted at most
// a quarter of keep (or 10 minutes) after it fell out of the retention.
func RetentionInterval(keep time.Duration) time.Duration {
	return min(max(keep/4, 100*time.Millisecond), 10*time.Minute)
}

// DeliveryPruneBatch is how many settled webhook deliveries one store
// call of PruneDeliveries deletes at most, so that no call holds the
// store's writer for long (SQLite's writer is the store's one; other
// commits queue behind it).
const DeliveryPruneBatch = 1000

// PruneDeliveries deletes the settled webhook deliveries (delivered, or
// failed: given up after their last attempt) whose last attempt was made
// before before, with their attempts, in batches of DeliveryPruneBatch
// until none is left, and returns how many it deleted. Pending
// deliveries, those due, waiting for a retry or in flight under a lease,
// are never deleted, however old (store.WebhookStore.PruneDeliveries). A
// failed delivery pruned can no longer be redelivered.
func (e *Engine) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	n := 0
	for {
		k, err := e.store.PruneDeliveries(ctx, before, DeliveryPruneBatch)
		if k > 0 {
			n += k
			e.obs.deliveriesPruned(k)
		}
		if err != nil {
			return n, internal("could not prune webhook deliveries", err)
		}
		if k < DeliveryPruneBatch || ctx.Err() != nil {
			return n, nil
		}
	}
}

// KeepDeliveries prunes, every interval (by the engine's clock) until ctx
// ends, the settled webhook deliveries whose last attempt is older than
// keep (see PruneDeliveries), the first time at once; it reports each
// round that deleted some, or failed, to logf when that is not nil. It
// returns when ctx ends. While it runs, the answer for a delivery that is
// not stored names keep.
func (e *Engine) KeepDeliveries(ctx context.Context, keep, interval time.Duration, logf func(pruned int, err error)) {
	e.deliveryKeep.Store(int64(keep))
	defer e.deliveryKeep.CompareAndSwap(int64(keep), 0)
	e.keep(ctx, keep, interval, e.PruneDeliveries, logf)
}
