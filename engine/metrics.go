package engine

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/asmp-dev/asmp/store"
)

// Metrics are the engine's Prometheus collectors; register them where you
// expose metrics (the server does).
type Metrics struct {
	// Transitions counts committed run changes by workflow, event kind and action.
	Transitions *prometheus.CounterVec
	// Pruned counts runs deleted by retention (Prune).
	Pruned prometheus.Counter

	counters sync.Map // counterKey -> prometheus.Counter: no label hashing per commit
}

type counterKey struct{ workflow, kind, action string }

func newMetrics() *Metrics {
	return &Metrics{
		Transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "asmp_transitions_total", Help: "Committed run changes by workflow, kind (created, transition, failed) and action.",
		}, []string{"workflow", "kind", "action"}),
		Pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "asmp_runs_pruned_total", Help: "Ended runs deleted by retention, with their events and tasks.",
		}),
	}
}

// Metrics returns the engine's collectors.
func (e *Engine) Metrics() *Metrics { return e.metrics }

func (e *Engine) count(workflowID string, ev *store.Event) {
	k := counterKey{workflowID, ev.Kind, ev.Action}
	c, ok := e.metrics.counters.Load(k)
	if !ok {
		c, _ = e.metrics.counters.LoadOrStore(k, e.metrics.Transitions.WithLabelValues(workflowID, ev.Kind, ev.Action))
	}
	c.(prometheus.Counter).Inc()
}
