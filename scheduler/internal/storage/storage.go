// Package storage holds all of the scheduler's SQL (issue #29): the domain packages
// (checkrun, drift, executor, fleet, hostkeys, incidents, onboard, results, sweep) and the
// composition root call its typed methods and never import pgx. The writers of the tables
// the daemons share stay in shared (audit, signals, eventbus, leasetable) and in
// scheduler/internal/leases; storage calls them inside its own transactions.
//
// Every SQL string is a named package-level constant registered in Queries (queries.go);
// storage_test.go prepares each against the migrated schema and fails on a constant that is
// not registered.
package storage

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Pool is the daemon's connection pool. Domain packages hold one only to hand it to New;
// they never run SQL on it.
type Pool = pgxpool.Pool

// DB is what a Store runs on: the pool, or a transaction (both are a pg.Querier and a
// pg.TxBeginner; Begin on a transaction opens a savepoint).
type DB interface {
	pg.Querier
	pg.TxBeginner
}

// ErrNotFound is returned where pgx would return pgx.ErrNoRows.
var ErrNotFound = errors.New("storage: not found")

// Store runs the scheduler's queries on one DB.
type Store struct {
	db DB
}

// New returns a Store on db (usually the daemon's *Pool). A nil pool gives a nil Store.
func New(db *Pool) *Store {
	if db == nil {
		return nil
	}
	return &Store{db: db}
}

// On returns a Store on any DB (a pool or a transaction).
func On(db DB) *Store { return &Store{db: db} }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if p, ok := s.db.(*pgxpool.Pool); ok {
		return p.Ping(ctx)
	}
	_, err := s.db.Exec(ctx, qPing)
	return err
}

const qPing = `SELECT 1`

// notFound maps pgx.ErrNoRows to ErrNotFound and leaves other errors alone.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// InTx runs fn with a Store on one transaction and commits when fn returns nil (pg.InTx):
// the change, its audit entry and its event commit together or not at all.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return pg.InTx(ctx, s.db, func(tx pgx.Tx) error { return fn(&Store{db: tx}) })
}

// AppendEvent appends e to the outbox (eventbus.Append).
func (s *Store) AppendEvent(ctx context.Context, e eventbus.Event, payload any) (int64, error) {
	return eventbus.Append(ctx, s.db, e, payload)
}

// WriteAudit writes one audit row (audit.Write).
func (s *Store) WriteAudit(ctx context.Context, r audit.Row) error {
	return audit.Write(ctx, s.db, r)
}

// ListenConfig parses url into the connection config of a session outside the pool (the
// eventbus notifier's LISTEN, the leases' session), named applicationName in pg_stat_activity.
func ListenConfig(url, applicationName string) (*pgx.ConnConfig, error) {
	return pg.ListenConfig(url, applicationName)
}

var errNotPool = errors.New("storage: a pipelined transaction needs a Store on the pool")

// Notify sends a NOTIFY on channel (eventbus.Notify).
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	return eventbus.Notify(ctx, s.db, channel, payload)
}
