package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// idempotency is an Idempotency-Key being honoured by the current transaction.
type idempotency struct {
	scope, key, hash string
}

// IdempotencyScope is the scope a key is unique in: method, path and actor, so two
// callers (or two endpoints) never see each other's keys.
func IdempotencyScope(m Meta) string { return m.Method + " " + m.Path + " " + m.Actor }

// RequestHash is the sha256 of the canonical JSON of body (struct fields in declaration
// order, map keys sorted).
func RequestHash(body any) (string, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return "", fmt.Errorf("hash request: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// beginIdempotent serialises requests with the same scope and key (an advisory lock held
// until the transaction ends) and looks the key up. A stored record with the same request
// hash is a replay; with another hash it is ErrIdempotencyMismatch. Otherwise the caller
// proceeds and calls finish in the same transaction, so the record commits with the create.
func beginIdempotent(ctx context.Context, tx pgx.Tx, m Meta, body any) (*idempotency, *Replay, error) {
	hash, err := RequestHash(body)
	if err != nil {
		return nil, nil, err
	}
	i := &idempotency{scope: IdempotencyScope(m), key: m.IdempotencyKey, hash: hash}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || E'\n' || $2, 0))`, i.scope, i.key); err != nil {
		return nil, nil, fmt.Errorf("lock idempotency key: %w", err)
	}
	var stored string
	var r Replay
	err = tx.QueryRow(ctx, `SELECT request_hash, status_code, response FROM idempotency_keys WHERE scope = $1 AND key = $2`,
		i.scope, i.key).Scan(&stored, &r.Status, &r.Body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return i, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("read idempotency key: %w", err)
	case stored != hash:
		return nil, nil, &ValidationError{Field: "Idempotency-Key", Err: ErrIdempotencyMismatch,
			Reason: fmt.Sprintf("key %q was already used for a different request body", i.key)}
	}
	return nil, &r, nil
}

// finish stores the response for later replays, in the create's transaction.
func (i *idempotency) finish(ctx context.Context, tx pgx.Tx, status int, resp any) error {
	body, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("store idempotent response: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (key, scope, request_hash, status_code, response)
		VALUES ($1, $2, $3, $4, $5)`, i.key, i.scope, i.hash, status, body); err != nil {
		return fmt.Errorf("store idempotent response: %w", err)
	}
	return nil
}
