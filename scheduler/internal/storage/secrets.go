package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The secrets table (migration 00020) is written by the api (`oikos secret set`); the
// scheduler reads a sealed value at the point of use (an HTTP check's header) and every
// value to redact them from execution output, opening each with its own OIKOS_SECRETS_KEY
// (scheduler/internal/secretref).
const (
	qSealedSecret = `SELECT ciphertext, key_id FROM secrets WHERE name = $1`
	qSealedAll    = `SELECT name, ciphertext, key_id FROM secrets ORDER BY name`
)

// Sealed is one stored secret, still sealed.
type Sealed struct {
	Name       string
	Ciphertext []byte
	KeyID      string
}

// SealedSecret returns the secret name still sealed; ok is false when there is none.
func (s *Store) SealedSecret(ctx context.Context, name string) (Sealed, bool, error) {
	out := Sealed{Name: name}
	err := s.db.QueryRow(ctx, qSealedSecret, name).Scan(&out.Ciphertext, &out.KeyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Sealed{}, false, nil
	}
	if err != nil {
		return Sealed{}, false, fmt.Errorf("read secret %s: %w", name, err)
	}
	return out, true, nil
}

// SealedSecrets returns every stored secret, still sealed.
func (s *Store) SealedSecrets(ctx context.Context) ([]Sealed, error) {
	rows, err := s.db.Query(ctx, qSealedAll)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []Sealed
	for rows.Next() {
		var x Sealed
		if err := rows.Scan(&x.Name, &x.Ciphertext, &x.KeyID); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}
