package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/storage/graphstore"
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
func beginIdempotent(ctx context.Context, st *graphstore.Store, m Meta, body any) (*idempotency, *Replay, error) {
	hash, err := RequestHash(body)
	if err != nil {
		return nil, nil, err
	}
	i := &idempotency{scope: IdempotencyScope(m), key: m.IdempotencyKey, hash: hash}
	stored, found, err := st.LockIdempotencyKey(ctx, i.scope, i.key)
	switch {
	case err != nil:
		return nil, nil, err
	case !found:
		return i, nil, nil
	case stored.RequestHash != hash:
		return nil, nil, &ValidationError{Field: "Idempotency-Key", Err: ErrIdempotencyMismatch,
			Reason: fmt.Sprintf("key %q was already used for a different request body", i.key)}
	}
	return nil, &Replay{Status: stored.Status, Body: stored.Body}, nil
}

// finish stores the response for later replays, in the create's transaction.
func (i *idempotency) finish(ctx context.Context, st *graphstore.Store, status int, resp any) error {
	body, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("store idempotent response: %w", err)
	}
	return st.StoreIdempotent(ctx, i.scope, i.key, i.hash, status, body)
}
