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
	return ConnectWith(ctx, url, maxConns, log, nil)
}

// ConnectWith is Connect whose pool reports to avail (nil: none) whether the database
// answers, so the daemon's /healthz can say since when it has not. A URL without
// connect_timeout gets DefaultConnectTimeout: while the database is away each request fails
// within it instead of hanging.
func ConnectWith(ctx context.Context, url string, maxConns int32, log zerolog.Logger, avail *Availability) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse OIKOS_DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if avail != nil && cfg.ConnConfig.Tracer == nil {
		cfg.ConnConfig.Tracer = avail.Tracer()
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

// ListenConfig parses url into the connection config of a session outside the pool (the
// eventbus notifier's LISTEN), named applicationName in pg_stat_activity.
func ListenConfig(url, applicationName string) (*pgx.ConnConfig, error) {
	c, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	c.RuntimeParams["application_name"] = applicationName
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	return c, nil
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

// BatchTx is a transaction whose statements travel in pipelined batches, for writers that
// must cost few round trips: BEGIN rides in the first batch sent and COMMIT at the end of
// the last one, so a transaction of n batches costs n round trips where InTx costs n + 2.
// Build each batch with Batch, send the intermediate ones with Send and the last with
// Commit. Only InBatchTx makes one.
type BatchTx struct {
	conn             *pgxpool.Conn
	begun, committed bool
}

// InBatchTx runs fn with a BatchTx on a connection of pool and rolls the transaction back
// when fn returns an error, panics or returns without having committed (fn may also send
// nothing at all: then there is no transaction and nothing to undo). Like InTx, what fn
// writes commits together or not at all.
func InBatchTx(ctx context.Context, pool *pgxpool.Pool, fn func(t *BatchTx) error) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// A connection left inside a transaction (the rollback failed) is closed by Release,
	// never handed out again.
	defer conn.Release()
	t := &BatchTx{conn: conn}
	defer func() {
		p := recover()
		if t.begun && !t.committed && conn.Conn().PgConn().TxStatus() != 'I' {
			if _, rerr := conn.Exec(context.WithoutCancel(ctx), "rollback"); rerr != nil {
				_ = conn.Conn().Close(context.WithoutCancel(ctx))
			}
		}
		if p != nil {
			panic(p)
		}
		if err == nil && t.begun && !t.committed {
			err = errors.New("pg: batch transaction ended without Commit; rolled back")
		}
	}()
	return fn(t)
}

// Batch returns an empty batch to queue statements on; the first batch of the transaction
// starts with BEGIN.
func (t *BatchTx) Batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue("begin")
	}
	return b
}

// Send sends b, which must come from Batch, and reads all its results: the callbacks queued
// on its statements run in order, and the first error is returned. After a failed statement
// the server skips the rest of the batch and the transaction can only roll back.
func (t *BatchTx) Send(ctx context.Context, b *pgx.Batch) error {
	if t.committed {
		return errors.New("pg: batch transaction already committed")
	}
	if !t.begun {
		if len(b.QueuedQueries) == 0 || b.QueuedQueries[0].SQL != "begin" {
			return errors.New("pg: the first batch of a BatchTx must come from Batch")
		}
		t.begun = true
	}
	return t.conn.SendBatch(ctx, b).Close()
}

// Commit queues COMMIT at the end of b and sends it, so the transaction ends in the same
// round trip as its last statements (a lock taken in b, such as the event outbox's, is held
// only while the server runs the rest of b). A failed statement makes the server skip the
// rest of the batch, COMMIT included; but a callback that fails on its own (a Scan into the
// wrong type) cannot stop a COMMIT the server already ran, so callbacks queued in b must
// fail only when the server reported an error.
func (t *BatchTx) Commit(ctx context.Context, b *pgx.Batch) error {
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	if err := t.Send(ctx, b); err != nil {
		return err
	}
	t.committed = true
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
	return MigrateTo(ctx, pool, 0)
}

// MigrateTo applies the pending migrations up to version (0: all), as Migrate does: the
// schema an older release left, for the tests of upgrades and of restoring its backups.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) ([]int64, error) {
	p, db, err := provider(pool, true)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	defer p.Close()
	var res []*goose.MigrationResult
	if version == 0 {
		res, err = p.Up(ctx)
	} else {
		res, err = p.UpTo(ctx, version)
	}
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	applied := make([]int64, 0, len(res))
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// MigrateDownTo undoes the applied migrations newer than version, newest first, under the
// same lock: the upgrade tests build an older release's schema from a current database.
func MigrateDownTo(ctx context.Context, pool *pgxpool.Pool, version int64) ([]int64, error) {
	p, db, err := provider(pool, true)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	defer p.Close()
	res, err := p.DownTo(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("migrate down to %d: %w", version, err)
	}
	undone := make([]int64, 0, len(res))
	for _, r := range res {
		undone = append(undone, r.Source.Version)
	}
	return undone, nil
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
