package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/asmp-dev/asmp/engine"
)

// metrics are the server's Prometheus metrics, in a registry of its own so
// that several servers can live in one process.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	series   sync.Map // seriesKey -> *series: label lookups once per combination
	engine   *engineMetrics
}

type seriesKey struct {
	route, method string
	status        int
}

type series struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

func newMetrics(e *engine.Engine, ledgerSize func(context.Context) (int64, error)) *metrics {
	if ledgerSize == nil {
		ledgerSize = func(context.Context) (int64, error) { return 0, nil }
	}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "asmp_http_requests_total", Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "asmp_http_request_duration_seconds", Help: "HTTP request latency by route pattern and method (streams: their whole life).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
		engine: newEngineMetrics(),
	}
	// storeGauge reports what read returns at scrape time (0 on error).
	storeGauge := func(name, help string, read func(context.Context) (int64, error)) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, _ := read(c)
			return float64(n)
		})
	}
	m.reg.MustRegister(
		m.requests, m.latency,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.engine.transitions,
		m.engine.pruned,
		m.engine.deliveriesPruned,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "asmp_stream_subscribers", Help: "Open stream subscriptions in this process."},
			func() float64 { return float64(e.Hub().Subscribers()) }),
		storeGauge("asmp_task_queue_depth", "Background tasks not yet done (pending or running).", e.PendingTasks),
		storeGauge("asmp_webhook_deliveries_pending", "Webhook deliveries not yet sent: the outbox's backlog, retries included.", e.PendingDeliveries),
		storeGauge("asmp_ledger_records", "Records in the OIP ledger.", ledgerSize),
		&runsCollector{e: e},
	)
	return m
}

func (m *metrics) observe(route, method string, status int, d time.Duration) {
	k := seriesKey{route, method, status}
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, &series{
			count:   m.requests.WithLabelValues(route, method, strconv.Itoa(status)),
			latency: m.latency.WithLabelValues(route, method),
		})
	}
	s := v.(*series)
	s.count.Inc()
	s.latency.Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// runsCollector reports stored runs by workflow and status override at
// scrape time, from the counts the store keeps as runs change
// (store.RunStore.CountRuns): a scrape costs the number of counts, never a
// scan of the runs.
type runsCollector struct{ e *engine.Engine }

var runsDesc = prometheus.NewDesc("asmp_runs", "Stored runs by workflow and stored status (\"derived\" = the status comes from the state: active, awaiting_input or completed).", []string{"workflow", "status"}, nil)

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- runsDesc }

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.e.CountRuns(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(runsDesc, err)
		return
	}
	for _, n := range counts {
		status := n.Status
		if status == "" {
			status = "derived"
		}
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(n.N), n.WorkflowID, status)
	}
}
