package engine

import (
	"sync"
	"sync/atomic"
)

// Observer is told what an engine did, for metrics: the engine itself keeps
// none. Its methods are called on the engine's commit and prune paths, after
// the change is durable: they must be quick, must not block, and must not
// call back into the engine.
type Observer interface {
	// Committed reports a change this process committed to a run of
	// workflowID: kind is the event's kind (store.EventCreated,
	// store.EventTransition, store.EventFailed: a background task failed
	// the run, store.EventRetry: a task's attempt failed and is retried,
	// store.EventTimerRefused) and action the action fired ("" but for
	// transitions and refused timers; the failed attempt for retries).
	Committed(workflowID, kind, action string)
	// Pruned reports that retention (Prune) deleted run runID of
	// workflowID, with its events and tasks.
	Pruned(workflowID, runID string)
}

// DeliveryObserver is an Observer that also hears of the webhook
// deliveries retention deleted. The engine asks each Observer whether it
// is one, so that an Observer written before delivery retention existed
// goes on compiling and working.
type DeliveryObserver interface {
	// DeliveriesPruned reports that retention (PruneDeliveries) deleted
	// n settled webhook deliveries, with their attempts.
	DeliveriesPruned(n int)
}

// Observe adds o to the observers of e; nil adds none. It is safe to call
// while the engine runs: o hears of what happens from then on.
func (e *Engine) Observe(o Observer) {
	if o == nil {
		return
	}
	e.obs.mu.Lock()
	defer e.obs.mu.Unlock()
	var list []Observer
	if old := e.obs.list.Load(); old != nil {
		list = append(list, *old...)
	}
	list = append(list, o)
	e.obs.list.Store(&list)
}

// observers is the engine's list of observers: copied on write, so that
// reporting a commit costs one atomic load and no lock.
type observers struct {
	mu   sync.Mutex
	list atomic.Pointer[[]Observer]
}

func (o *observers) committed(workflowID, kind, action string) {
	if l := o.list.Load(); l != nil {
		for _, ob := range *l {
			ob.Committed(workflowID, kind, action)
		}
	}
}

func (o *observers) pruned(workflowID, runID string) {
	if l := o.list.Load(); l != nil {
		for _, ob := range *l {
			ob.Pruned(workflowID, runID)
		}
	}
}

func (o *observers) deliveriesPruned(n int) {
	if l := o.list.Load(); l != nil {
		for _, ob := range *l {
			if d, ok := ob.(DeliveryObserver); ok {
				d.DeliveriesPruned(n)
			}
		}
	}
}
