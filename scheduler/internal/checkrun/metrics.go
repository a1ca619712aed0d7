package checkrun

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oikos-hq/oikos/shared/metrics"
)

// runMetrics is the histogram of check runs (README, Metrics): every run whose result is
// known, by kind (checkLabel: the kind, or ssh-script/<script>) and resulting health. Its
// _count equals oikos_scheduler_checks_total.
type runMetrics struct{ h *prometheus.HistogramVec }

func newRunMetrics(reg prometheus.Registerer) runMetrics {
	return runMetrics{h: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "oikos_scheduler_check_duration_seconds",
		Help:    "Check runs by kind and resulting health: time from starting the probe to its result.",
		Buckets: metrics.FastBuckets(),
	}, []string{"kind", "health"}))}
}

func (m runMetrics) observe(kind, health string, d time.Duration) {
	m.h.WithLabelValues(kind, health).Observe(d.Seconds())
}
