// Package app is the scheduler's composition root: it reads the configuration, connects to
// Postgres, refuses a stale schema, builds the one SSH pool the executor, the check runner and
// drift discovery share (one connection per host, host keys pinned in the database), wires
// those parts and the sweeps, and serves health until the context ends.
//
// It lives outside internal/ so that the end-to-end tests can build the real parts.
package app

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/checks"
	"github.com/oikos-hq/oikos/scheduler/internal/drift"
	"github.com/oikos-hq/oikos/scheduler/internal/executor"
	"github.com/oikos-hq/oikos/scheduler/internal/fleet"
	"github.com/oikos-hq/oikos/scheduler/internal/hostkeys"
	"github.com/oikos-hq/oikos/scheduler/internal/sweep"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/schema"
)

// Run starts the scheduler and blocks until ctx ends.
func Run(ctx context.Context, log zerolog.Logger) error {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	// The ontology decides coverage; it is the same embedded file the api derives checks with.
	onto, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		return fmt.Errorf("ontology: %w", err)
	}
	pool, err := pg.Connect(ctx, cfg.DatabaseURL, 30, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.Wait(ctx, pool, cfg.SchemaWait, log); err != nil {
		return err
	}
	signer, err := remote.LoadSigner(cfg.SSHKeyFile)
	if err != nil {
		return fmt.Errorf("OIKOS_SSH_KEY_FILE: %w", err)
	}
	ssh := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: hostkeys.New(pool, log), Logger: log})
	defer ssh.Close()
	graph := fleet.New(pool, fleet.Options{Logger: log})
	health := daemon.NewHealth()

	connCfg, err := pgx.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	connCfg.RuntimeParams["application_name"] = "oikos-scheduler-listener"
	// Every part that listens registers its handlers in its constructor, so all are built
	// before the notifier starts.
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: log})
	ex := executor.New(executor.Options{Pool: pool, SSH: ssh, Fleet: graph, Notifier: notifier, Logger: log})
	runner, err := checks.NewRunner(checks.Options{Pool: pool, SSH: ssh, Fleet: graph, Notifier: notifier, Logger: log,
		Metrics: health.Metrics, NameMap: cfg.NameMap, AllowNonLoopback: cfg.AllowNonLoopback, TLSConfig: cfg.CheckTLS,
		Concurrency: cfg.CheckConcurrency})
	if err != nil {
		return err
	}
	sweeper, err := sweep.New(sweep.Options{Pool: pool, Ontology: onto, Logger: log, Metrics: health.Metrics, Retention: cfg.Retention})
	if err != nil {
		return err
	}
	discovery, err := drift.New(drift.Options{Pool: pool, SSH: ssh, Fleet: graph, Notifier: notifier, Logger: log, Metrics: health.Metrics})
	if err != nil {
		return err
	}

	health.AddCheck("database", func(ctx context.Context) error { return pool.Ping(ctx) })
	health.AddCheck("listener", func(context.Context) error {
		if !notifier.Connected() {
			return fmt.Errorf("event listener is not connected")
		}
		return nil
	})
	health.Metrics.GaugeFunc("oikos_scheduler_ssh_connections", "Open SSH connections (one per host).",
		func() float64 { return float64(ssh.OpenConnections()) })
	health.Metrics.GaugeFunc("oikos_scheduler_executions_running", "Executions running now.",
		func() float64 { return float64(ex.Running()) })

	if err := notifier.Start(ctx); err != nil {
		return err
	}
	defer notifier.Stop()
	for _, part := range []interface {
		Start(context.Context) error
		Stop()
	}{ex, runner, sweeper, discovery} {
		if err := part.Start(ctx); err != nil {
			return err
		}
		defer part.Stop()
	}
	mux := health.Mux()
	mux.Handle("GET /status", runner.StatusHandler())
	return daemon.Serve(ctx, log, cfg.Addr, http.Handler(mux), nil)
}
