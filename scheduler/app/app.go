// Package app is the scheduler's composition root: it reads the configuration, connects to
// Postgres, refuses a stale schema, builds the one SSH pool the executor, the check runner and
// drift discovery share (one connection per host, host keys pinned in the database), wires
// those parts and the sweeps, and serves health until the context ends.
//
// It lives outside internal/ so that the end-to-end tests can build the real parts.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	gossh "golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/scheduler/internal/checkrun"
	"github.com/oikos-hq/oikos/scheduler/internal/drift"
	"github.com/oikos-hq/oikos/scheduler/internal/executor"
	"github.com/oikos-hq/oikos/scheduler/internal/fleet"
	"github.com/oikos-hq/oikos/scheduler/internal/hostkeys"
	"github.com/oikos-hq/oikos/scheduler/internal/incidents"
	"github.com/oikos-hq/oikos/scheduler/internal/leases"
	"github.com/oikos-hq/oikos/scheduler/internal/onboard"
	"github.com/oikos-hq/oikos/scheduler/internal/secretref"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/scheduler/internal/sweep"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/schema"
	"github.com/oikos-hq/oikos/shared/secretbox"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Run starts the scheduler and blocks until ctx ends.
func Run(ctx context.Context, log zerolog.Logger) error {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	return run(ctx, cfg, log, nil)
}

// loadKey reads the fleet's SSH key, generating it first when asked to (compose's volume).
func loadKey(cfg Config, log zerolog.Logger) (gossh.Signer, error) {
	if !cfg.SSHKeyGenerate {
		s, err := remote.LoadSigner(cfg.SSHKeyFile)
		if err != nil {
			return nil, fmt.Errorf("OIKOS_SSH_KEY_FILE: %w", err)
		}
		return s, nil
	}
	s, created, err := remote.EnsureKeyFile(cfg.SSHKeyFile, onboard.KeyComment)
	if err != nil {
		return nil, fmt.Errorf("OIKOS_SSH_KEY_FILE: %w", err)
	}
	if created {
		log.Info().Str("file", cfg.SSHKeyFile).Msg("generated the scheduler's SSH key; `oikos ssh-key` prints the line the fleet must trust")
	}
	return s, nil
}

func schedulerID() string {
	h, _ := os.Hostname()
	return h + ":" + strconv.Itoa(os.Getpid())
}

// run is Run with its configuration; ready, when non-nil, receives the address the HTTP
// server listens on (tests listen on port 0).
func run(ctx context.Context, cfg Config, log zerolog.Logger, ready func(net.Addr)) error {
	// The ontology decides coverage; it is the same embedded file the api derives checks with.
	onto, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		return fmt.Errorf("ontology: %w", err)
	}
	// avail learns from the pool whether the database answers, for /healthz.
	avail := pg.NewAvailability(log)
	pool, err := pg.ConnectWith(ctx, cfg.DatabaseURL, 30, log, avail)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.Wait(ctx, pool, cfg.SchemaWait, log); err != nil {
		return err
	}
	signer, err := loadKey(cfg, log)
	if err != nil {
		return err
	}
	if err := onboard.PublishKey(ctx, pool, signer, cfg.ID); err != nil {
		return err
	}
	// Addresses being onboarded are never trusted on first use (onboard.KeyGate).
	keyGate := onboard.NewKeyGate(hostkeys.New(pool, log), pool)
	ssh := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: keyGate, Logger: log})
	defer ssh.Close()
	graph := fleet.New(pool, fleet.Options{Logger: log})
	// The stored secrets (`oikos secret set`) open with OIKOS_SECRETS_KEY: an http check's
	// secret:NAME headers and the redaction of execution output. Without the key such a
	// check says so and output is redacted of the well-known formats only; an unusable key
	// stops the start.
	box, err := secretbox.FromEnv(os.Getenv)
	if err != nil && !errors.Is(err, secretbox.ErrNoKey) {
		return fmt.Errorf("secrets: %w", err)
	}
	secrets := secretref.New(pool, box)
	health := daemon.NewHealth()
	// The SSH pool is this package's, shared by the executor, the check runner and drift: its
	// gauge is registered here, not by any of them.
	metrics.Register(health.Metrics, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oikos_scheduler_ssh_connections", Help: "Open SSH connections (one per host).",
	}, func() float64 { return float64(ssh.OpenConnections()) }))

	connCfg, err := storage.ListenConfig(cfg.DatabaseURL, "oikos-scheduler-listener")
	if err != nil {
		return err
	}
	// Every part that listens registers its handlers in its constructor, so all are built
	// before the notifier starts.
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: log})
	// Several schedulers share the fleet through leases (scheduler/internal/leases): every
	// part below does only the work of the units this one holds.
	work := &LeaseWork{Log: log, Fleet: graph, SSH: ssh}
	lm, err := leases.New(leases.Options{Pool: pool, ID: cfg.ID, Logger: log, Renew: cfg.LeaseRenew, Expiry: cfg.LeaseExpiry,
		Session: connCfg, OnChange: func(c leases.Change) { work.OnChange(ctx, c) }, Busy: work.Busy})
	if err != nil {
		return err
	}
	// A migration that ran through Oikos is followed at once (no wait for the placement
	// interval): the graph's hosts edge moves with the guest (api/internal/placement).
	var discovery *drift.Service
	ex := executor.New(executor.Options{Pool: pool, SSH: ssh, Fleet: graph, Notifier: notifier, Logger: log, Metrics: health.Metrics,
		Secrets: secrets, SchedulerID: cfg.ID, Owned: lm.Owned, SweepEvery: cfg.LeaseExpiry, OnEnd: func(x executor.Ended) {
			if x.Status == executor.StatusCompleted && drift.IsMigration(x.Command) && discovery != nil {
				discovery.PlacementNow()
			}
		}})
	engine, err := incidents.New(incidents.Options{Pool: pool, Logger: log, Metrics: health.Metrics, Thresholds: cfg.Incidents})
	if err != nil {
		return err
	}
	runner, err := checkrun.NewRunner(checkrun.Options{Pool: pool, SSH: ssh, Fleet: graph, Notifier: notifier, Logger: log,
		Metrics: health.Metrics, NameMap: cfg.NameMap, AllowNonLoopback: cfg.AllowNonLoopback, TLSConfig: cfg.CheckTLS, Secrets: secrets,
		Concurrency: cfg.CheckConcurrency, ResultsBuffer: cfg.ResultsBuffer, OnFlush: engine.Flushed, Lease: lm.Lease, Holder: cfg.ID})
	if err != nil {
		return err
	}
	sweeper, err := sweep.New(sweep.Options{Pool: pool, Ontology: onto, Logger: log, Metrics: health.Metrics, Retention: cfg.Retention})
	if err != nil {
		return err
	}
	discovery, err = drift.New(drift.Options{Pool: pool, SSH: ssh, Fleet: graph, Notifier: notifier, Logger: log, Metrics: health.Metrics,
		SchedulerID: cfg.ID, Lease: lm.Lease, Every: cfg.DriftEvery, PlacementEvery: cfg.PlacementEvery})
	if err != nil {
		return err
	}
	connects, err := onboard.New(onboard.Options{Pool: pool, SSH: ssh, Gate: keyGate, Notifier: notifier, Logger: log,
		SchedulerID: cfg.ID, Owned: lm.Owned, OnRequest: lm.Wake})
	if err != nil {
		return err
	}
	work.Executor, work.Runner, work.Onboard = ex, runner, connects

	health.AddDatabaseChecks(pool, notifier)
	health.WatchDatabase(pool, avail)

	stop, err := startstop.StartAll(ctx, notifier, lm, ex, runner, engine, sweeper, discovery, connects)
	if err != nil {
		return err
	}
	defer stop()
	mux := health.Mux()
	mux.Handle("GET /status", statusHandler(pool, lm, runner))
	return daemon.Serve(ctx, log, cfg.Addr, health.Metrics.InstrumentHandler(mux), ready)
}
