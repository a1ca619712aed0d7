package graphstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/storage"
)

const (
	// qLockIdempotencyKey serialises requests with the same scope $1 and key $2 until the
	// transaction ends.
	qLockIdempotencyKey = `SELECT pg_advisory_xact_lock(hashtextextended($1 || E'\n' || $2, 0))`
	qIdempotencyKey     = `SELECT request_hash, status_code, response FROM idempotency_keys WHERE scope = $1 AND key = $2`
	qStoreIdempotent    = `INSERT INTO idempotency_keys (key, scope, request_hash, status_code, response)
		VALUES ($1, $2, $3, $4, $5)`
)

// StoredResponse is a recorded response to an idempotent request.
type StoredResponse struct {
	// RequestHash is the hash of the request body the response answered.
	RequestHash string
	Status      int
	Body        json.RawMessage
}

// LockIdempotencyKey locks scope and key for the rest of the transaction and returns the
// response stored under them; found is false when there is none yet.
func (s *Store) LockIdempotencyKey(ctx context.Context, scope, key string) (r StoredResponse, found bool, err error) {
	if _, err := s.db.Exec(ctx, qLockIdempotencyKey, scope, key); err != nil {
		return r, false, fmt.Errorf("lock idempotency key: %w", err)
	}
	err = s.db.QueryRow(ctx, qIdempotencyKey, scope, key).Scan(&r.RequestHash, &r.Status, &r.Body)
	switch {
	case storage.IsNoRows(err):
		return StoredResponse{}, false, nil
	case err != nil:
		return StoredResponse{}, false, fmt.Errorf("read idempotency key: %w", err)
	}
	return r, true, nil
}

// StoreIdempotent records the response to scope and key, in the request's transaction.
func (s *Store) StoreIdempotent(ctx context.Context, scope, key, requestHash string, status int, body []byte) error {
	if _, err := s.db.Exec(ctx, qStoreIdempotent, key, scope, requestHash, status, body); err != nil {
		return fmt.Errorf("store idempotent response: %w", err)
	}
	return nil
}
