package executor

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oikos-hq/oikos/shared/metrics"
)

// Swept reasons of oikos_scheduler_executions_swept_total.
const (
	sweptOrphaned = "orphaned" // found running at start, their scheduler gone
	sweptStuck    = "stuck"    // running past their timeout plus StuckAfter, owned by no run
)

// execMetrics are the executor's collectors (README, Metrics).
type execMetrics struct {
	// duration is every run of this executor by action and how it ended: completed, failed,
	// timed_out or interrupted (the executor stopped under it). Its _count is the outcome
	// counter.
	duration *prometheus.HistogramVec
	// swept counts the executions marked interrupted without a run of this executor.
	swept *prometheus.CounterVec
}

func newExecMetrics(reg prometheus.Registerer, e *Executor) execMetrics {
	m := execMetrics{
		duration: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oikos_scheduler_execution_duration_seconds",
			Help:    "Runs of executions by this scheduler, from resolving the target to the end of the command, by action and outcome (completed, failed, timed_out, interrupted).",
			Buckets: metrics.SlowBuckets(),
		}, []string{"action", "outcome"})),
		swept: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oikos_scheduler_executions_swept_total",
			Help: "Executions marked interrupted without being run here: orphaned (found running at start) or stuck (past their timeout, owned by no run).",
		}, []string{"reason"})),
	}
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oikos_scheduler_executions_running",
		Help: "Executions running now.",
	}, func() float64 { return float64(e.Running()) }))
	return m
}

// observeRun records the end of one run. An action the executor does not know (a newer api)
// is labelled "unknown", so the label keeps to the known set.
func (m *execMetrics) observeRun(action, outcome string, d time.Duration) {
	if _, ok := actions[action]; !ok {
		action = "unknown"
	}
	m.duration.WithLabelValues(action, outcome).Observe(d.Seconds())
}

func (m *execMetrics) observeSwept(reason string, n int) {
	if n > 0 {
		m.swept.WithLabelValues(reason).Add(float64(n))
	}
}
