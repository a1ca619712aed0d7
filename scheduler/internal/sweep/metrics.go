package sweep

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oikos-hq/oikos/shared/metrics"
)

// Outcomes of a pass (label outcome of oikos_scheduler_sweep_duration_seconds).
const (
	outcomeCompleted = "completed"
	outcomeSkipped   = "skipped" // another scheduler holds the pass's lock
	outcomeFailed    = "failed"
)

// sweepMetrics are the passes' collectors (README, Metrics).
type sweepMetrics struct {
	// passes is every pass by name and outcome; its _count is the outcome counter.
	passes         *prometheus.HistogramVec
	reconciled     prometheus.Counter
	samplesDeleted prometheus.Counter
	staleMarked    prometheus.Counter
	stuck          prometheus.Gauge
	misconfigured  prometheus.Gauge
	unmonitored    prometheus.Gauge
}

func newSweepMetrics(reg prometheus.Registerer) *sweepMetrics {
	counter := func(name, help string) prometheus.Counter {
		return metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	gauge := func(name, help string) prometheus.Gauge {
		return metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
	}
	return &sweepMetrics{
		passes: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oikos_scheduler_sweep_duration_seconds",
			Help:    "Sweep passes by pass and outcome (completed, skipped: another scheduler ran it, failed).",
			Buckets: metrics.FastBuckets(),
		}, []string{"pass", "outcome"})),
		reconciled:     counter("oikos_scheduler_signals_reconciled_total", "Signals resolved by the reconcile pass."),
		samplesDeleted: counter("oikos_scheduler_metric_samples_deleted_total", "Metric samples deleted by retention."),
		staleMarked:    counter("oikos_scheduler_stale_marked_total", "Entities marked stale."),
		stuck:          gauge("oikos_scheduler_probes_stuck", "Checks down or unknown for longer than the stuck threshold."),
		misconfigured:  gauge("oikos_scheduler_checks_misconfigured", "Checks that cannot run because of their configuration."),
		unmonitored:    gauge("oikos_scheduler_unmonitored_entities", "Live entities lacking monitoring their type declares."),
	}
}
