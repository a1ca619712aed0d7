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

	"github.com/oikos-hq/oikos/api/internal/storage"
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

// DB is what the store runs on: inside InTx, the transaction, on which the caller writes
// the change's audit row and event (storage.WriteAudit, storage.AppendEvent).
func (s *Store) DB() storage.DB { return s.db }
