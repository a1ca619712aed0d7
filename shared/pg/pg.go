// Package pg holds the PostgreSQL plumbing every daemon shares: the connection pool, the
// transaction helper, the embedded goose migrations and the schema check that makes the
// scheduler and the agent refuse to run against a schema the api has not migrated yet.
package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/migrations"
)

// ErrSchemaPending is returned by CheckSchema when migrations are waiting to be applied.
var ErrSchemaPending = errors.New("database schema has pending migrations")

// Connect opens a pool and waits, until ctx ends, for the server to answer a ping. Compose
// starts every service at once, so a daemon that gave up on the first refused connection
// would race Postgres on every boot.
func Connect(ctx context.Context, url string, maxConns int32, log zerolog.Logger) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse OIKOS_DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	delay := 100 * time.Millisecond
	for {
		err = pool.Ping(ctx)
		if err == nil {
			return pool, nil
		}
		log.Warn().Err(err).Dur("retry_in", delay).Msg("database not reachable yet")
		select {
		case <-ctx.Done():
			pool.Close()
			return nil, fmt.Errorf("database not reachable: %w", err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// Querier is what both a pool and a transaction offer, so store code can run in either.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
}

// TxBeginner starts transactions; *pgxpool.Pool and pgx.Tx (savepoints) both satisfy it.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// InTx runs fn in a transaction and commits it when fn returns nil. Any error, or a panic,
// rolls back. The change, its audit entry and its event commit together or not at all.
func InTx(ctx context.Context, db TxBeginner, fn func(tx pgx.Tx) error) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func provider(pool *pgxpool.Pool, locked bool) (*goose.Provider, *sql.DB, error) {
	sub, err := fs.Sub(migrations.FS, migrations.Dir)
	if err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	var opts []goose.ProviderOption
	if locked {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, opts...)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("goose: %w", err)
	}
	return p, db, nil
}

// Migrate applies every pending migration under goose's session advisory lock, so two api
// processes starting together never migrate at once. It returns the versions applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	p, db, err := provider(pool, true)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	defer p.Close()
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	applied := make([]int64, 0, len(res))
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// CheckSchema returns ErrSchemaPending (wrapped with the versions) when the database is
// behind the migrations compiled into this binary, and an error when it is ahead of them: a
// daemon must not run against a schema it does not know.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	p, db, err := provider(pool, false)
	if err != nil {
		return err
	}
	defer db.Close()
	defer p.Close()
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case current < target:
		return fmt.Errorf("%w: database is at version %d, this build needs %d; start oikos-api (it migrates) or run `oikos migrate`",
			ErrSchemaPending, current, target)
	case current > target:
		return fmt.Errorf("database schema version %d is newer than this build (%d): upgrade this daemon", current, target)
	}
	return nil
}

// IsUniqueViolation reports whether err is a unique-constraint violation, optionally of the
// named constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}
