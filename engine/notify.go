package engine

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// published seqs per run, so that notifications of commits this process
// already published (or another replica's commits already delivered) are
// not read from the store again. Only runs with subscribers are tracked.
type seenSeqs struct {
	mu sync.Mutex
	m  map[string]int64
}

func (s *seenSeqs) get(runID string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[runID]
}

// advance records seq for runID and reports whether it was new.
func (s *seenSeqs) advance(runID string, seq int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]int64{}
	}
	if seq <= s.m[runID] {
		return false
	}
	s.m[runID] = seq
	return true
}

func (s *seenSeqs) drop(runID string) {
	s.mu.Lock()
	delete(s.m, runID)
	s.mu.Unlock()
}

func (s *seenSeqs) forget(keep func(runID string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.m {
		if !keep(id) {
			delete(s.m, id)
		}
	}
}

// FollowStore delivers commits made by other processes sharing the store
// (replicas on one Postgres) to this process's stream subscribers. It runs
// until ctx ends; with a store that is not a store.Notifier it returns at
// once. Call CatchUp after the notifier reconnects (notifications sent while
// it was disconnected are lost; the event log is not).
func (e *Engine) FollowStore(ctx context.Context) error {
	n, ok := e.store.(store.Notifier)
	if !ok {
		return nil
	}
	return n.Listen(ctx, func(runID string, version int64) {
		if !e.hub.HasSubscribers(runID) {
			return
		}
		if version <= e.seen.get(runID) {
			return // published already
		}
		e.deliver(ctx, runID)
	})
}

// CatchUp publishes every stored event that the subscribers of any run may
// have missed (after a lost notifier connection).
func (e *Engine) CatchUp(ctx context.Context) {
	for _, runID := range e.hub.Runs() {
		e.deliver(ctx, runID)
	}
	e.seen.forget(e.hub.HasSubscribers)
}

// deliver reads runID's events after the last one published here and
// publishes them in order.
func (e *Engine) deliver(ctx context.Context, runID string) {
	after := e.seen.get(runID)
	if after == 0 {
		// Nothing published here yet: subscribers have read the store
		// themselves; start from the newest event.
		r, err := e.store.GetRun(ctx, runID)
		if err != nil {
			return
		}
		after = r.Version - 1
	}
	r, err := e.store.GetRun(ctx, runID)
	if err != nil {
		return
	}
	var data any // the data of the last event read, decoded
	for {
		evs, err := e.store.Events(ctx, runID, after, 0)
		if err != nil {
			e.log.Warn("reading events of another replica's commit failed", "run", runID, "err", err)
			return
		}
		if len(evs) == 0 {
			return
		}
		for _, ev := range evs {
			// Published events carry their data: fold the deltas.
			if ev.Data != nil {
				if data, err = protocol.DecodeValue(ev.Data, 0); err != nil {
					e.log.Warn("stored event data is not JSON", "run", runID, "seq", ev.Seq, "err", err)
					return
				}
			} else {
				patch, err := protocol.DecodeValue(ev.Patch, 0)
				if err != nil {
					e.log.Warn("stored event patch is not JSON", "run", runID, "seq", ev.Seq, "err", err)
					return
				}
				data = store.MergeValue(data, patch)
				if ev.Data, err = json.Marshal(data); err != nil {
					return
				}
			}
			e.publishEvent(r.WorkflowID, ev, false)
			after = ev.Seq
		}
	}
}
