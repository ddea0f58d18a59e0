package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// registerQueueMetrics adds the run queue's figures: how many runs wait
// (read from the backend at each scrape, so every replica reports the
// shared queue) and how long queued runs waited for their slot.
func registerQueueMetrics(reg *prometheus.Registry, backend dispatch.Backend) prometheus.Histogram {
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sandbox_bot_queue_wait_seconds",
		Help:    "How long runs waited in the queue for a slot under the caps (0 for runs that found one free).",
		Buckets: []float64{0.1, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400},
	})
	length := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sandbox_bot_queue_length", Help: "Runs waiting in the queue for a slot under the caps (shared by every replica).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		q, err := backend.ReadQueue(ctx)
		if err != nil {
			return -1 // the backend did not answer; the queue is unknown
		}
		n := 0
		for _, e := range q {
			if e.Waiting() {
				n++
			}
		}
		return float64(n)
	})
	reg.MustRegister(wait, length)
	return wait
}
