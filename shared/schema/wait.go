// Package schema lets the daemons that do not migrate (scheduler, agent) wait a bounded time
// for the api to bring the schema up to date, then refuse to run with a clear message.
package schema

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/pg"
)

// Wait returns nil once the database schema matches this build. While migrations are pending
// it re-checks every second for up to wait (the api may be migrating right now), then returns
// the pending error so the daemon exits saying what to do.
func Wait(ctx context.Context, pool *pgxpool.Pool, wait time.Duration, log zerolog.Logger) error {
	deadline := time.Now().Add(wait)
	for {
		err := pg.CheckSchema(ctx, pool)
		if err == nil || !errors.Is(err, pg.ErrSchemaPending) || time.Now().After(deadline) {
			return err
		}
		log.Warn().Err(err).Msg("waiting for the api to migrate the schema")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
