// Package fleetstore holds the SQL of bringing a real fleet into the graph (issue #29): the
// connection requests of machines being added and their outcomes (api/internal/onboard),
// the guests drift discovery found and adopting them, the services discovery found on a
// target and accepting them (api/internal/discover), and the advisory locks that serialise
// those changes. The graph's own writes stay the graph service's: a change that writes both
// runs in one InTx, whose transaction the graph service's ...Tx methods join.
//
// Every SQL string is a named package-level constant registered in Queries (queries.go);
// store_test.go prepares each against the migrated schema and fails on a constant that is
// not registered.
package fleetstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Store runs the fleet's queries on one DB (the pool or a transaction).
type Store struct {
	db storage.DB
}

// New returns a Store on the pool.
func New(pool *storage.Pool) *Store { return &Store{db: pool} }

// On returns a Store on any DB (a pool or a transaction).
func On(db storage.DB) *Store { return &Store{db: db} }

// InTx runs fn on one transaction and commits when fn returns nil (pg.InTx): st runs this
// package's queries on it, and tx is handed to the graph service's ...Tx methods so that
// their writes, audit rows and events commit with st's or not at all.
func (s *Store) InTx(ctx context.Context, fn func(st *Store, tx storage.DB) error) error {
	return pg.InTx(ctx, s.db, func(tx pgx.Tx) error { return fn(&Store{db: tx}, tx) })
}

// AppendEvent appends e to the outbox (eventbus.Append), in the Store's transaction when it
// runs on one.
func (s *Store) AppendEvent(ctx context.Context, e eventbus.Event, payload any) (int64, error) {
	return storage.AppendEvent(ctx, s.db, e, payload)
}

// WriteAudit writes one audit row (audit.Write).
func (s *Store) WriteAudit(ctx context.Context, r audit.Row) error {
	return storage.WriteAudit(ctx, s.db, r)
}

// Notify sends a NOTIFY on channel (eventbus.Notify); in a transaction it is delivered when
// the transaction commits.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	return eventbus.Notify(ctx, s.db, channel, payload)
}

// Entity reads the entity ref names (slug or id) with its health (storage.GetEntity): an
// apierr.ErrNotFound when there is none.
func (s *Store) Entity(ctx context.Context, ref string) (storage.Entity, error) {
	return storage.GetEntity(ctx, s.db, ref, false)
}

// notFound maps the driver's "no rows" to apierr.ErrNotFound naming what, and wraps other
// errors with what was read.
func notFound(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case storage.IsNoRows(err):
		return fmt.Errorf("%w: %s", apierr.ErrNotFound, what)
	default:
		return fmt.Errorf("read %s: %w", what, err)
	}
}

// lockKey takes the transaction-scoped advisory lock named key (hashed to a bigint): the
// changes that take the same key run one at a time, until the transaction ends.
func (s *Store) lockKey(ctx context.Context, key string) error {
	if _, err := s.db.Exec(ctx, qLockKey, key); err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	return nil
}

const qLockKey = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`

func isNoRows(err error) bool { return storage.IsNoRows(err) }
