// Package execstore holds the SQL of the api's gated execution path (issue #29): executions,
// their approvals, the approval windows decisions open, the output chunks the scheduler
// writes, and the few reads of other tables the gate decides on (the target entity, a
// session's task, a session's plan). The execution packages (api/internal/execution and
// below) call its typed methods and never import pgx.
//
// Everything one request changes is written in one transaction (Store.InTx): the execution,
// its approval, the windows a decision opens, the audit row, the events and the NOTIFY that
// wakes the scheduler; the graph service's bulk path joins the same transaction through DB.
//
// Every SQL string is a named package-level constant registered in Queries (queries.go);
// the package test prepares each against the migrated schema.
package execstore

import (
	"context"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Store runs the execution path's queries on one DB (the pool or a transaction).
type Store struct {
	db storage.DB
}

// New returns a Store on the api's pool.
func New(pool *storage.Pool) *Store { return &Store{db: pool} }

// On returns a Store on any DB (a pool or a transaction).
func On(db storage.DB) *Store { return &Store{db: db} }

// DB is what the store runs on: inside InTx, the transaction, which other domains' stores
// (the graph's bulk path, the chat record) join.
func (s *Store) DB() storage.DB { return s.db }

// InTx runs fn with a Store on one transaction and commits when fn returns nil: the change,
// its audit entry and its events commit together or not at all.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return storage.InTx(ctx, s.db, func(tx storage.DB) error { return fn(&Store{db: tx}) })
}

// WriteAudit writes one audit row (inside the caller's transaction when the store is on one).
func (s *Store) WriteAudit(ctx context.Context, r audit.Row) error {
	return storage.WriteAudit(ctx, s.db, r)
}

// AppendEvent appends an event to the outbox.
func (s *Store) AppendEvent(ctx context.Context, e eventbus.Event, payload any) error {
	if _, err := storage.AppendEvent(ctx, s.db, e, payload); err != nil {
		return fmt.Errorf("event %s: %w", e.Type, err)
	}
	return nil
}

// NotifyRunnable wakes the scheduler about execution id; inside a transaction it hears only
// if the transaction commits.
func (s *Store) NotifyRunnable(ctx context.Context, id string) error {
	if err := eventbus.Notify(ctx, s.db, eventbus.ChannelExec, id); err != nil {
		return fmt.Errorf("notify %s: %w", eventbus.ChannelExec, err)
	}
	return nil
}

// IsRequestRace reports whether err is one of the unique indexes that serialise requests
// firing (an identical pending execution, or a second pending approval of a session): a
// request that raced a decision, which the gate answers by reading the facts again.
func IsRequestRace(err error) bool {
	name, code := storage.Constraint(err)
	return code == "23505" && (name == "executions_pending_dedup_uniq" || name == "approvals_pending_session_uniq")
}
