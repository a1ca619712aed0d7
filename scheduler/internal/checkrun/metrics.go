package checkrun

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/metrics"
)

// runMetrics are the runner's collectors (README, Metrics). Every run whose result is known
// is one observation of duration, by kind (checkLabel: the kind, or ssh-script/<script>) and
// resulting health: its _count is the run counter.
type runMetrics struct {
	duration     *prometheus.HistogramVec
	failures     *prometheus.CounterVec // by reason (the result's error class)
	overruns     *prometheus.CounterVec // by kind
	missed       prometheus.Counter
	notOwned     prometheus.Counter
	reloads      prometheus.Counter
	reloadErrors prometheus.Counter
	// Guests found on another node than the graph's, questions to their clusters, and the
	// drift discoveries asked for so the graph follows (moved.go).
	moves, clusterQueries, driftRequests prometheus.Counter
	// failuresByClass counts failures of the known classes for Status (the counter above is
	// write-only); indexed like results.Classes.
	failuresByClass []atomic.Int64
}

func newRunMetrics(reg prometheus.Registerer) *runMetrics {
	counter := func(name, help string) prometheus.Counter {
		return metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	return &runMetrics{
		duration: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oikos_scheduler_check_duration_seconds",
			Help:    "Check runs by kind and resulting health: time from starting the probe to its result.",
			Buckets: metrics.FastBuckets(),
		}, []string{"kind", "health"})),
		failures: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oikos_scheduler_check_failures_total",
			Help: "Check runs that could not observe their target, by reason.",
		}, []string{"reason"})),
		overruns: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oikos_scheduler_checks_overrun_total",
			Help: "Checks that fell due while their previous run was still running; that run was skipped.",
		}, []string{"kind"})),
		missed:          counter("oikos_scheduler_checks_missed_total", "Check cycles skipped because the scheduler fell more than a cycle behind."),
		notOwned:        counter("oikos_scheduler_checks_not_owned_total", "Due checks skipped because another scheduler holds their lease."),
		reloads:         counter("oikos_scheduler_reloads_total", "Reloads of check definitions."),
		reloadErrors:    counter("oikos_scheduler_reload_errors_total", "Failed reloads of check definitions."),
		moves:           counter("oikos_scheduler_guest_moves_total", "Guests a check found running on another node of their cluster than the graph says."),
		clusterQueries:  counter("oikos_scheduler_cluster_queries_total", "Questions to a Proxmox cluster about where its guests run (pvesh get /cluster/resources)."),
		driftRequests:   counter("oikos_scheduler_moved_drift_requests_total", "Drift discoveries asked for because a guest moved."),
		failuresByClass: make([]atomic.Int64, len(results.Classes)),
	}
}

// observe records one run with a known result.
func (m *runMetrics) observe(kind string, res results.Result, d time.Duration) {
	m.duration.WithLabelValues(kind, res.Health).Observe(d.Seconds())
	if res.Class != "" {
		m.failure(res.Class, 1)
	}
}

// failure counts n runs that could not observe their target for reason class.
func (m *runMetrics) failure(class string, n int64) {
	m.failures.WithLabelValues(class).Add(float64(n))
	for i, c := range results.Classes {
		if c == class {
			m.failuresByClass[i].Add(n)
			return
		}
	}
}

// failuresByReason is the count of each known class that occurred, for Status.
func (m *runMetrics) failuresByReason() map[string]float64 {
	out := map[string]float64{}
	for i, c := range results.Classes {
		if v := m.failuresByClass[i].Load(); v > 0 {
			out[c] = float64(v)
		}
	}
	return out
}

// registerGauges exports what the runner observes of itself, read at scrape time. The SSH
// connections are the pool's, exported by the daemon that owns the pool.
func (r *Runner) registerGauges(reg prometheus.Registerer) {
	gauge := func(name, help string, fn func() float64) {
		metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
	}
	gauge("oikos_scheduler_checks_loaded", "Enabled checks scheduled.", func() float64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return float64(len(r.entries))
	})
	gauge("oikos_scheduler_checks_running", "Checks running now.", func() float64 { return float64(r.running.Load()) })
	gauge("oikos_scheduler_checks_due", "Checks due and waiting for a free slot.", func() float64 { return float64(r.dueNow()) })
	gauge("oikos_scheduler_lag_p50_seconds", "Median delay between a check falling due and starting (recent runs).", func() float64 {
		p50, _, _, _ := r.lagQuantiles()
		return p50
	})
	gauge("oikos_scheduler_lag_p99_seconds", "99th percentile delay between a check falling due and starting (recent runs).", func() float64 {
		_, p99, _, _ := r.lagQuantiles()
		return p99
	})
	gauge("oikos_scheduler_http_connections", "Open kept connections of http checks (idle or in use).", func() float64 {
		if r.httpc == nil {
			return 0
		}
		return float64(r.httpc.OpenConnections())
	})
	gauge("oikos_scheduler_results_pending", "Check results waiting to be written.", func() float64 {
		return float64(r.writer.Pending())
	})
}
