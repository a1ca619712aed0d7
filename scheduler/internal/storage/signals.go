package storage

import (
	"context"
	"fmt"

	"github.com/oikos-hq/oikos/shared/signals"
)

// The signals table's writer stays in shared/signals; these run it on the Store's DB (a
// transaction inside InTx), so a domain package never holds a pgx handle.

// RaiseSignal raises sig (signals.Store.Raise).
func (s *Store) RaiseSignal(ctx context.Context, st *signals.Store, sig signals.Signal) (signals.Raised, error) {
	return st.Raise(ctx, s.db, sig)
}

// ResolveSignal resolves the open signal dedupKey (signals.Store.Resolve).
func (s *Store) ResolveSignal(ctx context.Context, st *signals.Store, dedupKey, reason string) (bool, error) {
	return st.Resolve(ctx, s.db, dedupKey, reason)
}

// DescribeSignal updates an open signal's description (signals.Store.Describe).
func (s *Store) DescribeSignal(ctx context.Context, st *signals.Store, dedupKey, severity, summary string, details map[string]any) (bool, error) {
	return st.Describe(ctx, s.db, dedupKey, severity, summary, details)
}

// OpenSignals lists the open signals of kind (signals.Store.Open).
func (s *Store) OpenSignals(ctx context.Context, st *signals.Store, kind string) ([]string, error) {
	return st.Open(ctx, s.db, kind)
}

// SyncSignals makes the open signals of kind exactly want (signals.Store.Sync).
func (s *Store) SyncSignals(ctx context.Context, st *signals.Store, kind string, want []signals.Signal, clearedReason string) (raised, created, resolved int, err error) {
	return st.Sync(ctx, s.db, kind, want, clearedReason)
}

func fmtErr(what string, err error) error { return fmt.Errorf("%s: %w", what, err) }
