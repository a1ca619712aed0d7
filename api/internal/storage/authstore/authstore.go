// Package authstore holds the SQL of the api's credentials (issue #29): the bearer tokens
// (api_tokens, of which only hashes are stored) and the dashboard's sign-in sessions
// (web_sessions, each standing for the token it was opened with). api/internal/auth and
// api/internal/websession hash, check and decide; this package only reads and writes rows.
//
// Every SQL string is a named package-level constant registered in Queries.
package authstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Errors of the store.
var (
	// ErrNameTaken: a token of that name exists already (api_tokens_name_key).
	ErrNameTaken = errors.New("a token with that name exists")
	// ErrNotFound: no row answers the lookup.
	ErrNotFound = errors.New("authstore: not found")
)

// Queries names every SQL constant of the package; the package test prepares each.
var Queries = map[string]string{
	"qInsertToken":     qInsertToken,
	"qTokenByHash":     qTokenByHash,
	"qTouchToken":      qTouchToken,
	"qUpsertToken":     qUpsertToken,
	"qRevokeToken":     qRevokeToken,
	"qListTokens":      qListTokens,
	"qDropOldSessions": qDropOldSessions,
	"qInsertSession":   qInsertSession,
	"qSessionBySecret": qSessionBySecret,
	"qEndSession":      qEndSession,
}

// Store reads and writes tokens and sessions on one DB.
type Store struct {
	db storage.DB
}

// New returns a Store on db (the api's pool, or a transaction).
func New(db storage.DB) *Store { return &Store{db: db} }

// InTx runs fn with a Store on one transaction and commits when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return storage.InTx(ctx, s.db, func(tx storage.DB) error { return fn(&Store{db: tx}) })
}

// WriteAudit writes one audit row.
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
