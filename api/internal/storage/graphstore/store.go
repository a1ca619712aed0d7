// Package graphstore holds the SQL of the graph's mutation path (api/internal/graph): entities,
// relationships, knowledge, idempotency keys, the ontology tables, the bulk writes of the
// seed ingest, and the pipelined attribute update. The graph service validates and decides;
// it calls these typed methods inside one transaction per mutation (Store.InTx, or a Store On
// the caller's transaction), so the change, its audit row, its events and its re-derived
// checks (api/internal/storage/checksync) commit together or not at all.
//
// Every statement is a registered constant (queries.go) prepared against the migrated schema
// by storage_test.go. Errors are the api's sentinels (api/internal/apierr): a missing row is
// ErrNotFound, a unique violation ErrDuplicate, wrapped with what was asked for.
package graphstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/checksync"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Store runs the graph's statements on one DB (the pool or a transaction).
type Store struct {
	db    storage.DB
	check *checksync.Syncer
}

// New returns a Store on pool; log receives check derivation's warnings.
func New(pool *storage.Pool, log zerolog.Logger) *Store {
	return &Store{db: pool, check: checksync.New(log)}
}

// On returns a Store on db (a pool or a transaction) whose check derivation logs nowhere,
// for callers that only lock or read (the seed ingest); the graph service builds its own
// with New and Store.On.
func On(db storage.DB) *Store { return &Store{db: db, check: checksync.New(zerolog.Nop())} }

// On returns a Store with s's check syncer on db (a caller's transaction).
func (s *Store) On(db storage.DB) *Store { return &Store{db: db, check: s.check} }

// DB is what the Store runs on (for stores of other domains joining its transaction).
func (s *Store) DB() storage.DB { return s.db }

// InTx runs fn with a Store on one transaction of s's DB (a savepoint when s runs on a
// transaction) and commits when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return storage.InTx(ctx, s.db, func(tx storage.DB) error { return fn(s.On(tx)) })
}

// onPool reports the pool s runs on, if it runs on the pool.
func (s *Store) onPool() (*pgxpool.Pool, bool) {
	p, ok := s.db.(*pgxpool.Pool)
	return p, ok
}

// WriteAudit writes one audit row (shared/audit).
func (s *Store) WriteAudit(ctx context.Context, r audit.Row) error {
	return storage.WriteAudit(ctx, s.db, r)
}

// AppendEvent appends e with payload to the outbox (shared/eventbus).
func (s *Store) AppendEvent(ctx context.Context, e eventbus.Event, payload any) error {
	_, err := storage.AppendEvent(ctx, s.db, e, payload)
	return err
}

// Now returns the transaction's now().
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.db.QueryRow(ctx, qNow).Scan(&now); err != nil {
		return time.Time{}, err
	}
	return now, nil
}

const qNow = `SELECT now()`

// AdvisoryLock takes the transaction-scoped advisory lock key (pg_advisory_xact_lock).
func (s *Store) AdvisoryLock(ctx context.Context, key int64) error {
	if _, err := s.db.Exec(ctx, qAdvisoryLock, key); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

const qAdvisoryLock = `SELECT pg_advisory_xact_lock($1)`
