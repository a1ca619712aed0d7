// Package app is the agent's composition root: it reads the configuration, connects to
// Postgres, refuses a stale schema, wires the LLM loop and the tool server, and serves
// health until the context ends.
package app

import (
	"context"
	"net"
	"os"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/schema"
)

// Run starts the agent and blocks until ctx ends.
func Run(ctx context.Context, log zerolog.Logger) error {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	return run(ctx, cfg, log, nil)
}

// run is Run with its configuration; ready, when non-nil, receives the address the HTTP
// server listens on (tests listen on port 0).
func run(ctx context.Context, cfg Config, log zerolog.Logger, ready func(net.Addr)) error {
	pool, err := pg.Connect(ctx, cfg.DatabaseURL, 20, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.Wait(ctx, pool, cfg.SchemaWait, log); err != nil {
		return err
	}
	health := daemon.NewHealth()
	health.AddCheck("database", func(ctx context.Context) error { return pool.Ping(ctx) })
	return daemon.Serve(ctx, log, cfg.Addr, health.Metrics.InstrumentHandler(health.Mux()), ready)
}
