package authstore

import (
	"context"
	"time"

	"github.com/oikos-hq/oikos/api/internal/storage"
)

const (
	qDropOldSessions = `DELETE FROM web_sessions WHERE expires_at < $1`
	qInsertSession   = `INSERT INTO web_sessions (secret_hash, token_id, expires_at, user_agent)
			VALUES ($1, $2, $3, $4) RETURNING id::text`
	qSessionBySecret = `SELECT s.id::text, s.expires_at, s.revoked_at IS NOT NULL, t.name, t.role, t.revoked_at IS NOT NULL
		FROM web_sessions s JOIN api_tokens t ON t.id = s.token_id WHERE s.secret_hash = $1`
	qEndSession = `UPDATE web_sessions s SET revoked_at = now() FROM api_tokens t
			WHERE s.secret_hash = $1 AND s.revoked_at IS NULL AND t.id = s.token_id
			RETURNING s.id::text, s.expires_at, t.name`
)

// Session is one web_sessions row with the token it stands for.
type Session struct {
	ID        string
	ExpiresAt time.Time
	// SignedOut: the session was ended.
	SignedOut bool
	// TokenName and TokenRole are the token's; TokenRevoked says it was revoked since.
	TokenName, TokenRole string
	TokenRevoked         bool
}

// DropSessionsBefore deletes the rows of sessions that expired before t.
func (s *Store) DropSessionsBefore(ctx context.Context, t time.Time) error {
	_, err := s.db.Exec(ctx, qDropOldSessions, t)
	return err
}

// InsertSession opens a session of token tokenID whose secret hashes to hash, and returns
// its id.
func (s *Store) InsertSession(ctx context.Context, hash, tokenID string, expires time.Time, userAgent string) (string, error) {
	var id string
	err := s.db.QueryRow(ctx, qInsertSession, hash, tokenID, expires, userAgent).Scan(&id)
	return id, err
}

// SessionBySecret reads the session whose secret hashes to hash; ErrNotFound when none does.
func (s *Store) SessionBySecret(ctx context.Context, hash string) (Session, error) {
	var r Session
	err := s.db.QueryRow(ctx, qSessionBySecret, hash).
		Scan(&r.ID, &r.ExpiresAt, &r.SignedOut, &r.TokenName, &r.TokenRole, &r.TokenRevoked)
	if storage.IsNoRows(err) {
		return Session{}, ErrNotFound
	}
	return r, err
}

// EndSession signs out the live session whose secret hashes to hash and returns it (ID,
// ExpiresAt, TokenName); ErrNotFound when no live session has it.
func (s *Store) EndSession(ctx context.Context, hash string) (Session, error) {
	var r Session
	err := s.db.QueryRow(ctx, qEndSession, hash).Scan(&r.ID, &r.ExpiresAt, &r.TokenName)
	if storage.IsNoRows(err) {
		return Session{}, ErrNotFound
	}
	return r, err
}
