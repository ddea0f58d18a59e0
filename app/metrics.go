package app

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rcrowley/go-metrics"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// serverMetrics are the bot's own Prometheus metrics. go-githubapp reports
// its queue and GitHub client figures to a go-metrics registry; a collector
// exposes those on /metrics too, so nothing is counted twice.
type serverMetrics struct {
	deliveries    *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	handlerErrors *prometheus.CounterVec
	queueWait     prometheus.Histogram // queue_metrics.go
}

func newServerMetrics(reg *prometheus.Registry, gm metrics.Registry, backend dispatch.Backend, base *handlers.Base) *serverMetrics {
	runs := base.Runs
	m := &serverMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_bot_webhook_deliveries_total", Help: "Webhook deliveries by event and status: accepted into the queue, filtered (no handler would act on it; answered 202 without queueing) or ignored (no handler for the event type).",
		}, []string{"event", "status"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_bot_webhook_rejected_total", Help: "Webhook deliveries not queued, by reason (bad_signature, sha1_only, too_many_readers, malformed, too_large, queue_full, duplicate).",
		}, []string{"reason"}),
		handlerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_bot_handler_errors_total", Help: "Event handlers that returned an error or panicked, by event.",
		}, []string{"event"}),
	}
	m.queueWait = registerQueueMetrics(reg, backend)
	for _, reason := range []string{"bad_signature", "sha1_only", "too_many_readers", "malformed", "too_large", "queue_full", "duplicate"} {
		m.rejected.WithLabelValues(reason)
	}
	reg.MustRegister(m.deliveries, m.rejected, m.handlerErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&goMetricsCollector{reg: gm},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sandbox_bot_runs_followed", Help: "Runs this replica is following."},
			func() float64 { return float64(len(runs.Active())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sandbox_bot_ci_fork_checks_ignored_total",
			Help: "Check runs (and pull requests) of another repository's head, a fork's, that the CI-fix path left out: only the repository's own CI on the App's own head starts fix runs."},
			func() float64 { return float64(base.ForkChecksIgnored()) }),
	)
	return m
}

// goMetricsCollector exposes a go-metrics registry (go-githubapp's queue
// length, busy workers, event age, GitHub API requests and rate limits).
type goMetricsCollector struct{ reg metrics.Registry }

func (c *goMetricsCollector) Describe(chan<- *prometheus.Desc) {} // unchecked collector: names appear as go-githubapp registers them

func (c *goMetricsCollector) Collect(ch chan<- prometheus.Metric) {
	c.reg.Each(func(name string, v any) {
		fq := "sandbox_bot_" + strings.NewReplacer(".", "_", "-", "_", "[", "_", "]", "", ":", "_").Replace(name)
		switch m := v.(type) {
		case metrics.Counter:
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(fq+"_total", "go-githubapp counter "+name, nil, nil), prometheus.CounterValue, float64(m.Count()))
		case metrics.Gauge:
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(fq, "go-githubapp gauge "+name, nil, nil), prometheus.GaugeValue, float64(m.Value()))
		case metrics.Histogram:
			s := m.Snapshot()
			ch <- prometheus.MustNewConstSummary(prometheus.NewDesc(fq, "go-githubapp histogram "+name, nil, nil),
				uint64(s.Count()), float64(s.Sum()), map[float64]float64{0.5: s.Percentile(0.5), 0.99: s.Percentile(0.99)})
		}
	})
}
