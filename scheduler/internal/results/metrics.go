package results

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oikos-hq/oikos/shared/metrics"
)

// Reasons of oikos_scheduler_results_dropped_total.
const (
	droppedCheckDeleted = "check_deleted" // results of checks deleted since they ran
	droppedLeaseLost    = "lease_lost"    // results of units whose lease passed to another scheduler
	droppedBufferFull   = "buffer_full"   // results that found the buffer full while writes failed (reported: EventResultsUnrecorded)
	droppedShutdown     = "shutdown"      // results the database did not take before the scheduler stopped
	droppedWriteFailed  = "write_failed"  // a batch the database refused (not unreachable) writeTries times (reported: EventResultsUnrecorded)
)

// writerMetrics are the writer's collectors (README, Metrics).
type writerMetrics struct {
	flushes       prometheus.Counter
	flushErrors   prometheus.Counter
	dropped       *prometheus.CounterVec // by reason
	unchanged     prometheus.Counter
	samples       prometheus.Counter
	healthChanges prometheus.Counter
}

func newWriterMetrics(reg prometheus.Registerer, buffered func() float64) *writerMetrics {
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oikos_scheduler_results_buffered",
		Help: "Check results submitted and not yet written (they wait while the database is unreachable)."}, buffered))
	counter := func(name, help string) prometheus.Counter {
		return metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	return &writerMetrics{
		flushes:     counter("oikos_scheduler_result_flushes_total", "Batches of check results written."),
		flushErrors: counter("oikos_scheduler_result_flush_errors_total", "Failed writes of a batch of check results (retried)."),
		dropped: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oikos_scheduler_results_dropped_total",
			Help: "Check results not written, by reason (check_deleted, lease_lost, buffer_full: reported as check.results_unrecorded, shutdown).",
		}, []string{"reason"})),
		unchanged: counter("oikos_scheduler_results_unchanged_total",
			"Check results that repeated their check's stored state (written as a run count and an observation time)."),
		samples:       counter("oikos_scheduler_metric_samples_total", "Metric samples written."),
		healthChanges: counter("oikos_scheduler_health_changes_total", "Combined health transitions of targets."),
	}
}
