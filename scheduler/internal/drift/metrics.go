package drift

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oikos-hq/oikos/shared/metrics"
)

// driftMetrics are the discovery's collectors (README, Metrics).
type driftMetrics struct {
	runs    *prometheus.CounterVec // by outcome: completed, failed
	missing prometheus.Gauge
	ghost   prometheus.Gauge
	// placements counts completed placement sweeps (the clusters alone).
	placements prometheus.Counter
}

func newDriftMetrics(reg prometheus.Registerer) *driftMetrics {
	return &driftMetrics{
		runs: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oikos_scheduler_drift_runs_total", Help: "Drift discoveries by outcome (completed, failed).",
		}, []string{"outcome"})),
		missing: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oikos_scheduler_drift_missing", Help: "Live guests without an entity (latest drift report).",
		})),
		ghost: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oikos_scheduler_drift_ghost", Help: "Entities whose guest is not live (latest drift report).",
		})),
		placements: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oikos_scheduler_placement_sweeps_total", Help: "Completed placement sweeps (the clusters listed so the graph follows moved guests).",
		})),
	}
}
