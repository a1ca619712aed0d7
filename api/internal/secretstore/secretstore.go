// Package secretstore is the api's side of the secrets `oikos secret set` stores (issue #31):
// it checks names and values, seals values with shared/secretbox under the api's
// OIKOS_SECRETS_KEY before they reach the database, lists names (never values), removes, and
// resolves a name for the api's own point of use (a notification channel's URL written
// secret:NAME). The agent and the scheduler open the same rows with the same key.
package secretstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/secretstore"
	"github.com/oikos-hq/oikos/shared/secretbox"
)

// Info is a secret as listed.
type Info = secretstore.Info

// Meta is who changes a secret.
type Meta = secretstore.Meta

// Service manages the stored secrets.
type Service struct {
	db  *secretstore.Store
	box *secretbox.Box // nil: no key configured
}

// New is the service on pool; box is nil when the api has no OIKOS_SECRETS_KEY, and then
// Set and Resolve answer what to configure while List and Remove still work.
func New(pool storage.DB, box *secretbox.Box) *Service {
	return &Service{db: secretstore.New(pool), box: box}
}

// errNoKey is the conflict a store without a key answers.
func errNoKey() error {
	return fmt.Errorf("%w: the api cannot seal secrets: %v", apierr.ErrConflict, secretbox.ErrNoKey)
}

func name(n string) (string, error) {
	c, err := secretbox.Name(n)
	if err != nil {
		return "", apierr.Invalid("name", "%s", strings.TrimPrefix(err.Error(), secretbox.ErrName.Error()+": "))
	}
	return c, nil
}

// Set seals value under name; created is false when it replaced a value.
func (s *Service) Set(ctx context.Context, m Meta, n, value string) (Info, bool, error) {
	c, err := name(n)
	if err != nil {
		return Info{}, false, err
	}
	switch {
	case value == "":
		return Info{}, false, apierr.Invalid("value", "is empty")
	case len(value) > secretbox.MaxValueBytes:
		return Info{}, false, apierr.Invalid("value", "is %d bytes; at most %d", len(value), secretbox.MaxValueBytes)
	case !utf8.ValidString(value):
		return Info{}, false, apierr.Invalid("value", "is not UTF-8 text")
	}
	if s.box == nil {
		return Info{}, false, errNoKey()
	}
	return s.db.Set(ctx, m, c, s.box.Seal(c, value), s.box.KeyID())
}

// List returns every secret's name, when and by whom it was set.
func (s *Service) List(ctx context.Context) ([]Info, error) { return s.db.List(ctx) }

// Remove deletes a secret.
func (s *Service) Remove(ctx context.Context, m Meta, n string) (Info, error) {
	c, err := name(n)
	if err != nil {
		return Info{}, err
	}
	info, err := s.db.Remove(ctx, m, c)
	if errors.Is(err, secretstore.ErrNotFound) {
		return info, fmt.Errorf("%w: no secret named %q (oikos secret list shows them)", apierr.ErrNotFound, c)
	}
	return info, err
}

// Resolve returns the value of the stored secret name, for the api's own point of use.
// Its errors name the secret, never a value.
func (s *Service) Resolve(ctx context.Context, n string) (string, error) {
	c, err := secretbox.Name(n)
	if err != nil {
		return "", err
	}
	sealed, keyID, ok, err := s.db.Sealed(ctx, c)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("no secret named %q is stored (oikos secret set %s)", c, c)
	}
	if s.box == nil {
		return "", fmt.Errorf("secret %q: %w", c, secretbox.ErrNoKey)
	}
	return s.box.Open(c, sealed, keyID)
}
