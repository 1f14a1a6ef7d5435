package server

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/server/internal/encoded"
)

// observer is the server's engine.Observer: it keeps the cache of encoded
// answers in step with retention and turns the engine's reports into
// metrics (when they are on).
type observer struct {
	answers *encoded.Cache
	metrics *engineMetrics // nil: metrics are off
}

var (
	_ engine.Observer         = (*observer)(nil)
	_ engine.DeliveryObserver = (*observer)(nil)
)

// Committed counts the change in asmp_transitions_total.
func (o *observer) Committed(workflowID, kind, action string) {
	if o.metrics != nil {
		o.metrics.committed(workflowID, kind, action)
	}
}

// Pruned forgets the run's answers and counts it in asmp_runs_pruned_total.
func (o *observer) Pruned(workflowID, runID string) {
	o.answers.Forget(runID)
	if o.metrics != nil {
		o.metrics.pruned.Inc()
	}
}

// DeliveriesPruned counts the deliveries in
// asmp_webhook_deliveries_pruned_total.
func (o *observer) DeliveriesPruned(n int) {
	if o.metrics != nil {
		o.metrics.deliveriesPruned.Add(float64(n))
	}
}

// engineMetrics are the collectors of what the engine reports.
type engineMetrics struct {
	// transitions counts committed run changes by workflow, event kind and action.
	transitions *prometheus.CounterVec
	// pruned counts runs deleted by retention.
	pruned prometheus.Counter
	// deliveriesPruned counts webhook deliveries deleted by retention.
	deliveriesPruned prometheus.Counter
	counters         sync.Map // counterKey -> prometheus.Counter: no label hashing per commit
}

type counterKey struct{ workflow, kind, action string }

func newEngineMetrics() *engineMetrics {
	return &engineMetrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "asmp_transitions_total", Help: "Committed run changes by workflow, kind (created, transition, failed) and action.",
		}, []string{"workflow", "kind", "action"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "asmp_runs_pruned_total", Help: "Ended runs deleted by retention, with their events and tasks.",
		}),
		deliveriesPruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "asmp_webhook_deliveries_pruned_total", Help: "Settled webhook deliveries (delivered, failed) deleted by retention, with their attempts.",
		}),
	}
}

func (m *engineMetrics) committed(workflowID, kind, action string) {
	k := counterKey{workflowID, kind, action}
	c, ok := m.counters.Load(k)
	if !ok {
		c, _ = m.counters.LoadOrStore(k, m.transitions.WithLabelValues(workflowID, kind, action))
	}
	c.(prometheus.Counter).Inc()
}
