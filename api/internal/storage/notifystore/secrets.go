package notifystore

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/oikos-hq/oikos/api/internal/storage"
)

// notification_secrets keeps the values an operator sent inline (a channel's URL, a
// webhook's signing secret); the channel row names them "stored:<id>" (notify.Secrets), and
// no endpoint returns them.

const (
	qSecret       = `SELECT value FROM notification_secrets WHERE id = $1`
	qInsertSecret = `INSERT INTO notification_secrets (id, value) VALUES ($1, $2)`
	qDeleteSecret = `DELETE FROM notification_secrets WHERE id = $1`
)

// StoredSecret returns the stored value id (a uuid); ok is false when there is none.
func (s *Store) StoredSecret(ctx context.Context, id string) (value string, ok bool, err error) {
	err = s.db.QueryRow(ctx, qSecret, id).Scan(&value)
	if storage.IsNoRows(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return value, true, nil
}

// StoreSecret keeps value and returns its id.
func (s *Store) StoreSecret(ctx context.Context, value string) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	if _, err := s.db.Exec(ctx, qInsertSecret, id, value); err != nil {
		return "", fmt.Errorf("store secret: %w", err)
	}
	return id.String(), nil
}

// DropSecret deletes the stored value id.
func (s *Store) DropSecret(ctx context.Context, id string) error {
	if _, err := s.db.Exec(ctx, qDeleteSecret, id); err != nil {
		return fmt.Errorf("drop stored secret: %w", err)
	}
	return nil
}
