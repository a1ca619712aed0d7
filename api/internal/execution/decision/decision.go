// Package decision is the operator's half of the gated execution path (docs/behaviours.md
// X5-X6, A5): an operator's decision on a queued execution's approval (approve, deny,
// revoke), which moves the execution with it and opens the windows docs/execution-contract.md
// names, and an operator's assent to an agent session's plan. An agent's token decides
// nothing of its own: it may only relay an operator's chat message the api recorded
// (api/internal/chat), and every relay is proved here, in the decision's transaction, before
// anything changes.
//
// Everything a decision changes is written in one transaction (execstore.Store.InTx): the
// approval, the execution, the windows, the chat message's use, the audit row, the events and
// the NOTIFY that wakes the scheduler. The gate, the model and the reads are
// api/internal/execution's; this package depends on it, never the other way.
package decision

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/execstore"
)

// Options configure a Service.
type Options struct {
	Pool   *storage.Pool
	Logger zerolog.Logger
}

// Service decides approvals and records assents to plans. It is safe for concurrent use.
type Service struct {
	store *execstore.Store
	log   zerolog.Logger
}

// New builds a Service.
func New(opts Options) (*Service, error) {
	if opts.Pool == nil {
		return nil, errors.New("decision: a pool is required")
	}
	return &Service{store: execstore.New(opts.Pool), log: opts.Logger}, nil
}

// inTx runs fn in a transaction on the pool.
func (s *Service) inTx(ctx context.Context, fn func(tx *execstore.Store) error) error {
	return s.store.InTx(ctx, fn)
}
