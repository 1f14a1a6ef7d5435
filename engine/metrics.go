package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/asmp-dev/asmp/store"
)

// Metrics are the engine's Prometheus collectors; register them where you
// expose metrics (the server does).
type Metrics struct {
	// Transitions counts committed run changes by workflow, event kind and action.
	Transitions *prometheus.CounterVec
}

func newMetrics() *Metrics {
	return &Metrics{
		Transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "asmp_transitions_total", Help: "Committed run changes by workflow, kind (created, transition, failed) and action.",
		}, []string{"workflow", "kind", "action"}),
	}
}

// Metrics returns the engine's collectors.
func (e *Engine) Metrics() *Metrics { return e.metrics }

func (e *Engine) count(workflowID string, ev *store.Event) {
	e.metrics.Transitions.WithLabelValues(workflowID, ev.Kind, ev.Action).Inc()
}
