// Package secretstore holds the SQL of the secrets table (issue #31): sealed values, the
// name, when and by whom each was set. The api is its one writer (`oikos secret set/rm`);
// sealing and opening are api/internal/secrets' with shared/secretbox. Every mutation
// writes its audit row and event here, in its own transaction, naming the secret only.
package secretstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Audit actions and event types of the secrets (name only).
const (
	ActionSet    = "secret.set"
	ActionRemove = "secret.remove"
	EventSet     = "secret.set"
	EventRemoved = "secret.removed"
)

// ErrNotFound: no secret of that name.
var ErrNotFound = errors.New("no such secret")

const (
	qUpsert = `INSERT INTO secrets (name, ciphertext, key_id, set_at, set_by) VALUES ($1, $2, $3, now(), $4)
ON CONFLICT (name) DO UPDATE SET ciphertext = EXCLUDED.ciphertext, key_id = EXCLUDED.key_id, set_at = now(), set_by = EXCLUDED.set_by
RETURNING set_at, (xmax = 0)`
	qDelete = `DELETE FROM secrets WHERE name = $1 RETURNING set_at, set_by`
	qList   = `SELECT name, set_at, set_by FROM secrets ORDER BY name`
	qSealed = `SELECT ciphertext, key_id FROM secrets WHERE name = $1`
)

// Queries names every SQL constant of the package; the package test prepares each.
var Queries = map[string]string{"qUpsert": qUpsert, "qDelete": qDelete, "qList": qList, "qSealed": qSealed}

// Info is a secret as listed: never its value.
type Info struct {
	Name  string    `json:"name"`
	SetAt time.Time `json:"set_at"`
	SetBy string    `json:"set_by"`
}

// Meta is who changes a secret, for the audit row and the event.
type Meta struct {
	Actor, Method, Path, CorrelationID string
}

// Store reads and writes the secrets table.
type Store struct{ db storage.DB }

// New returns a Store on db.
func New(db storage.DB) *Store { return &Store{db: db} }

// Set stores sealed under name (replacing a value of that name) with its audit row and
// event, in one transaction; created is false for a replacement.
func (s *Store) Set(ctx context.Context, m Meta, name string, sealed []byte, keyID string) (info Info, created bool, err error) {
	err = storage.InTx(ctx, s.db, func(tx storage.DB) error {
		info = Info{Name: name, SetBy: m.Actor}
		if err := tx.QueryRow(ctx, qUpsert, name, sealed, keyID, m.Actor).Scan(&info.SetAt, &created); err != nil {
			return fmt.Errorf("store secret %s: %w", name, err)
		}
		after := map[string]any{"name": name, "created": created}
		return record(ctx, tx, m, ActionSet, EventSet, nil, after)
	})
	return info, created, err
}

// Remove deletes the secret name with its audit row and event; ErrNotFound if there is none.
func (s *Store) Remove(ctx context.Context, m Meta, name string) (Info, error) {
	info := Info{Name: name}
	err := storage.InTx(ctx, s.db, func(tx storage.DB) error {
		err := tx.QueryRow(ctx, qDelete, name).Scan(&info.SetAt, &info.SetBy)
		if storage.IsNoRows(err) {
			return fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		if err != nil {
			return fmt.Errorf("remove secret %s: %w", name, err)
		}
		return record(ctx, tx, m, ActionRemove, EventRemoved, map[string]any{"name": name}, nil)
	})
	return info, err
}

// List returns every secret's name, when and by whom it was set.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	rows, err := s.db.Query(ctx, qList)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	out := []Info{}
	for rows.Next() {
		var i Info
		if err := rows.Scan(&i.Name, &i.SetAt, &i.SetBy); err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// Sealed returns the sealed value of name and the id of the key it is sealed under; ok is
// false when there is no such secret.
func (s *Store) Sealed(ctx context.Context, name string) (sealed []byte, keyID string, ok bool, err error) {
	err = s.db.QueryRow(ctx, qSealed, name).Scan(&sealed, &keyID)
	if storage.IsNoRows(err) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("read secret %s: %w", name, err)
	}
	return sealed, keyID, true, nil
}

func record(ctx context.Context, tx storage.DB, m Meta, action, event string, before, after any) error {
	row := audit.Row{Actor: m.Actor, Action: action, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID}
	if before != nil {
		row.Before = before
	}
	if after != nil {
		row.After = after
	}
	if err := storage.WriteAudit(ctx, tx, row); err != nil {
		return err
	}
	payload := after
	if payload == nil {
		payload = before
	}
	if _, err := storage.AppendEvent(ctx, tx, eventbus.Event{Type: event, CorrelationID: m.CorrelationID, Actor: m.Actor}, payload); err != nil {
		return fmt.Errorf("event %s: %w", event, err)
	}
	return nil
}
