package authstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/storage"
)

const (
	qInsertToken = `INSERT INTO api_tokens (name, role, token_hash) VALUES ($1, $2, $3)`
	qTokenByHash = `SELECT id::text, name, role, token_hash, last_used_at, revoked_at IS NOT NULL
		FROM api_tokens WHERE token_hash = $1`
	qTouchToken = `UPDATE api_tokens SET last_used_at = now() WHERE id = $1`
	// The CTE reads the table as it was before the upsert, so it tells creation from
	// replacement in the same statement.
	qUpsertToken = `WITH prev AS (SELECT 1 FROM api_tokens WHERE name = $1)
		INSERT INTO api_tokens (name, role, token_hash) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET role = EXCLUDED.role, token_hash = EXCLUDED.token_hash, revoked_at = NULL
		RETURNING EXISTS (SELECT 1 FROM prev)`
	qRevokeToken = `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE name = $1`
	qListTokens  = `SELECT name, role, created_at, last_used_at, revoked_at FROM api_tokens ORDER BY name`
)

// Token is one api_tokens row (never a usable secret: Hash is the token's SHA-256).
type Token struct {
	ID, Name, Role, Hash string
	CreatedAt            time.Time
	LastUsedAt           *time.Time
	RevokedAt            *time.Time
	Revoked              bool
}

// InsertToken inserts a token; a name in use is ErrNameTaken.
func (s *Store) InsertToken(ctx context.Context, name, role, hash string) error {
	_, err := s.db.Exec(ctx, qInsertToken, name, role, hash)
	if n, code := storage.Constraint(err); code == "23505" && n == "api_tokens_name_key" {
		return fmt.Errorf("%w: %q", ErrNameTaken, name)
	}
	return err
}

// TokenByHash reads the token whose hash is hash (ID, Name, Role, Hash, LastUsedAt and
// Revoked); ErrNotFound when none has it.
func (s *Store) TokenByHash(ctx context.Context, hash string) (Token, error) {
	var t Token
	err := s.db.QueryRow(ctx, qTokenByHash, hash).Scan(&t.ID, &t.Name, &t.Role, &t.Hash, &t.LastUsedAt, &t.Revoked)
	if storage.IsNoRows(err) {
		return Token{}, ErrNotFound
	}
	return t, err
}

// TouchToken records that token id was used now.
func (s *Store) TouchToken(ctx context.Context, id string) error {
	_, err := s.db.Exec(ctx, qTouchToken, id)
	return err
}

// UpsertToken makes name an active token of role with hash, and reports whether the name
// existed before.
func (s *Store) UpsertToken(ctx context.Context, name, role, hash string) (existed bool, err error) {
	err = s.db.QueryRow(ctx, qUpsertToken, name, role, hash).Scan(&existed)
	return existed, err
}

// RevokeToken revokes the named token (keeping an earlier revocation's time); ErrNotFound
// when no token has the name.
func (s *Store) RevokeToken(ctx context.Context, name string) error {
	tag, err := s.db.Exec(ctx, qRevokeToken, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Tokens lists every token (Name, Role, CreatedAt, LastUsedAt, RevokedAt), by name.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := s.db.Query(ctx, qListTokens)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Token, error) {
		var t Token
		err := r.Scan(&t.Name, &t.Role, &t.CreatedAt, &t.LastUsedAt, &t.RevokedAt)
		t.Revoked = t.RevokedAt != nil
		return t, err
	})
}
