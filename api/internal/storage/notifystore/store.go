// Package notifystore holds all of the notification subsystem's SQL (issue #29): channels
// and rules with their audit rows and events, the stored secret values, the deliveries and
// their attempts, the dispatcher's cursor and the worker's claims. The domain packages
// (api/internal/notify, notifyworker) and the handlers (notifyapi) call its typed methods
// and never import pgx; a change of several statements runs in InTx, so a mutation, its
// audit row and its event commit together.
//
// Every SQL string is a named package-level constant registered in Queries (queries.go);
// store_test.go prepares each against the migrated schema.
package notifystore

import (
	"context"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Store runs the notification queries on one DB (the pool or a transaction).
type Store struct {
	db storage.DB
}

// New returns a Store on the pool.
func New(pool *storage.Pool) *Store { return &Store{db: pool} }

// On returns a Store on any DB (a pool or a transaction).
func On(db storage.DB) *Store { return &Store{db: db} }

// InTx runs fn with a Store on one transaction and commits when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return storage.InTx(ctx, s.db, func(tx storage.DB) error { return fn(&Store{db: tx}) })
}

// Meta is who changes something, through which request: what the audit row and the event
// record.
type Meta struct {
	Actor, Method, Path, CorrelationID string
}

// Record writes a mutation's audit row and its event. Before and after are the api's views
// (a channel's references and redacted URL, never its values); the event's payload is after,
// or before when nothing is left.
func (s *Store) Record(ctx context.Context, m Meta, action, event string, before, after any) error {
	row := audit.Row{Actor: m.Actor, Action: action, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID}
	if before != nil {
		row.Before = before
	}
	if after != nil {
		row.After = after
	}
	if err := storage.WriteAudit(ctx, s.db, row); err != nil {
		return err
	}
	payload := after
	if payload == nil {
		payload = before
	}
	if _, err := storage.AppendEvent(ctx, s.db, eventbus.Event{Type: event, CorrelationID: m.CorrelationID, Actor: m.Actor}, payload); err != nil {
		return fmt.Errorf("event %s: %w", event, err)
	}
	return nil
}

// The signals table's writer stays in shared/signals; these run it on the Store's DB (the
// transaction inside InTx).

// RaiseSignal raises sig (signals.Store.Raise).
func (s *Store) RaiseSignal(ctx context.Context, st *signals.Store, sig signals.Signal) (signals.Raised, error) {
	return st.Raise(ctx, s.db, sig)
}

// ResolveSignal resolves the open signal dedupKey (signals.Store.Resolve).
func (s *Store) ResolveSignal(ctx context.Context, st *signals.Store, dedupKey, reason string) (bool, error) {
	return st.Resolve(ctx, s.db, dedupKey, reason)
}
