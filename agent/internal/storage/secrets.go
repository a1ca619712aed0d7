package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The secrets table (migration 00020) is written by the api (`oikos secret set`); the agent
// reads a sealed value at the point of use and opens it with its own OIKOS_SECRETS_KEY
// (agent/internal/secrets).
const (
	qSealedSecret = `SELECT ciphertext, key_id FROM secrets WHERE name = $1`
	qSecretNames  = `SELECT name FROM secrets ORDER BY name`
)

// SealedSecret returns the sealed value of the secret name and its key id; ok is false
// when there is none.
func SealedSecret(ctx context.Context, db DB, name string) (sealed []byte, keyID string, ok bool, err error) {
	err = db.QueryRow(ctx, qSealedSecret, name).Scan(&sealed, &keyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("read secret %s: %w", name, err)
	}
	return sealed, keyID, true, nil
}

// SecretNames lists the stored secrets' names.
func SecretNames(ctx context.Context, db DB) ([]string, error) {
	rows, err := db.Query(ctx, qSecretNames)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// SecretReader reads the secrets table on db (agent/internal/secrets.StoredReader).
type SecretReader struct{ DB DB }

// Sealed is SealedSecret on r.DB.
func (r SecretReader) Sealed(ctx context.Context, name string) ([]byte, string, bool, error) {
	return SealedSecret(ctx, r.DB, name)
}

// Names is SecretNames on r.DB.
func (r SecretReader) Names(ctx context.Context) ([]string, error) { return SecretNames(ctx, r.DB) }
