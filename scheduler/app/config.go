package app

import (
	"crypto/tls"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/drift"
	"github.com/oikos-hq/oikos/scheduler/internal/httpprobe"
	"github.com/oikos-hq/oikos/scheduler/internal/incidents"
	"github.com/oikos-hq/oikos/scheduler/internal/leases"
	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/scheduler/internal/sweep"
	"github.com/oikos-hq/oikos/shared/config"
	"github.com/oikos-hq/oikos/shared/netmap"
)

// Config is the scheduler's configuration, read from OIKOS_* variables (README table).
type Config struct {
	DatabaseURL string        // OIKOS_DATABASE_URL
	Addr        string        // OIKOS_SCHEDULER_ADDR: health, metrics and /status
	SchemaWait  time.Duration // OIKOS_SCHEMA_WAIT: how long to wait for the api's migrations
	SSHKeyFile  string        // OIKOS_SSH_KEY_FILE: private key for the fleet (only the scheduler reads it)
	// SSHKeyGenerate is OIKOS_SSH_KEY_GENERATE: when SSHKeyFile does not exist, generate an
	// ed25519 key there (compose keeps it in a volume) instead of refusing to start.
	SSHKeyGenerate bool
	// Retention is how long metric samples are kept (OIKOS_METRICS_RETENTION).
	Retention time.Duration
	// NameMap maps the names http and tcp checks dial to IP literals (OIKOS_CHECK_NAME_MAP);
	// the scheduler never resolves a name itself.
	NameMap map[string]string
	// CheckTLS trusts the system roots plus OIKOS_CHECK_CA_FILE for https checks.
	CheckTLS *tls.Config
	// AllowNonLoopback lets http and tcp checks dial real networks
	// (OIKOS_CHECK_ALLOW_NON_LOOPBACK); off in labs and tests.
	AllowNonLoopback bool
	// CheckConcurrency caps checks running at once (OIKOS_CHECK_CONCURRENCY).
	CheckConcurrency int
	// ResultsBuffer is OIKOS_RESULTS_BUFFER, how many check results wait in memory while the
	// database is unreachable (default results.DefaultBuffer: two minutes at 100 checks/s).
	ResultsBuffer int
	// ID is OIKOS_SCHEDULER_ID, this scheduler's name among several: the holder of its
	// leases and the claimed_by of its executions (default "<hostname>:<pid>").
	ID string
	// LeaseRenew and LeaseExpiry are OIKOS_LEASE_RENEW (5s) and OIKOS_LEASE_EXPIRY (15s).
	LeaseRenew, LeaseExpiry time.Duration
	// DriftEvery is OIKOS_DRIFT_INTERVAL, how old the latest full drift report may get before
	// a scheduled one (24h); PlacementEvery is OIKOS_PLACEMENT_INTERVAL, how often the
	// clusters alone are listed so the graph follows moved guests (60s).
	DriftEvery, PlacementEvery time.Duration
	// Incidents: the failure and success thresholds in runs (OIKOS_INCIDENT_FAILURE_THRESHOLD,
	// OIKOS_INCIDENT_SUCCESS_THRESHOLD) and per check kind (OIKOS_INCIDENT_THRESHOLDS).
	Incidents incidents.Thresholds
}

// LoadConfig reads and validates the configuration.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.New(getenv)
	c := Config{
		DatabaseURL:      r.String("OIKOS_DATABASE_URL", ""),
		Addr:             r.String("OIKOS_SCHEDULER_ADDR", ":8091"),
		SchemaWait:       r.Duration("OIKOS_SCHEMA_WAIT", 60*time.Second),
		SSHKeyFile:       r.String("OIKOS_SSH_KEY_FILE", ""),
		SSHKeyGenerate:   r.Bool("OIKOS_SSH_KEY_GENERATE", false),
		AllowNonLoopback: r.Bool("OIKOS_CHECK_ALLOW_NON_LOOPBACK", false),
		CheckConcurrency: r.Int("OIKOS_CHECK_CONCURRENCY", 32),
	}
	r.Require("OIKOS_DATABASE_URL", c.DatabaseURL)
	r.Require("OIKOS_SSH_KEY_FILE", c.SSHKeyFile)
	var err error
	c.Retention = r.Duration("OIKOS_METRICS_RETENTION", sweep.DefaultRetention)
	if c.NameMap, err = netmap.Parse(r.String("OIKOS_CHECK_NAME_MAP", "")); err != nil {
		r.Fail("OIKOS_CHECK_NAME_MAP: %v", err)
	}
	if ca := r.String("OIKOS_CHECK_CA_FILE", ""); ca != "" {
		if c.CheckTLS, err = httpprobe.LoadCAFile(ca); err != nil {
			r.Fail("OIKOS_CHECK_CA_FILE: %v", err)
		}
	}
	c.Incidents.Failure = r.Int("OIKOS_INCIDENT_FAILURE_THRESHOLD", incidents.DefaultFailure)
	c.Incidents.Success = r.Int("OIKOS_INCIDENT_SUCCESS_THRESHOLD", incidents.DefaultSuccess)
	if c.Incidents.Failure < 1 || c.Incidents.Success < 1 {
		r.Fail("OIKOS_INCIDENT_FAILURE_THRESHOLD and OIKOS_INCIDENT_SUCCESS_THRESHOLD must be at least 1 (runs)")
	}
	if c.Incidents.ByKind, err = incidents.ParseByKind(r.String("OIKOS_INCIDENT_THRESHOLDS", "")); err != nil {
		r.Fail("OIKOS_INCIDENT_THRESHOLDS: %v", err)
	}
	if c.ResultsBuffer = r.Int("OIKOS_RESULTS_BUFFER", results.DefaultBuffer); c.ResultsBuffer < 1 {
		r.Fail("OIKOS_RESULTS_BUFFER must be at least 1 (results kept while the database is unreachable)")
	}
	if c.CheckConcurrency < 1 {
		r.Fail("OIKOS_CHECK_CONCURRENCY must be at least 1")
	}
	c.DriftEvery = r.Duration("OIKOS_DRIFT_INTERVAL", drift.DefaultEvery)
	c.PlacementEvery = r.Duration("OIKOS_PLACEMENT_INTERVAL", drift.DefaultPlacement)
	if c.DriftEvery <= 0 || c.PlacementEvery <= 0 {
		r.Fail("OIKOS_DRIFT_INTERVAL and OIKOS_PLACEMENT_INTERVAL must be positive durations (24h, 60s)")
	}
	c.ID = r.String("OIKOS_SCHEDULER_ID", schedulerID())
	c.LeaseRenew = r.Duration("OIKOS_LEASE_RENEW", leases.DefaultRenew)
	c.LeaseExpiry = r.Duration("OIKOS_LEASE_EXPIRY", leases.DefaultExpiry)
	if c.LeaseRenew <= 0 || c.LeaseExpiry < 2*c.LeaseRenew {
		r.Fail("OIKOS_LEASE_EXPIRY: %s must be at least twice OIKOS_LEASE_RENEW (%s)", c.LeaseExpiry, c.LeaseRenew)
	}
	return c, r.Err()
}
