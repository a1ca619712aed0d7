// Package secretref resolves the `secret:NAME` references of the scheduler's configured
// values (an HTTP check's header) at the point of use, and builds the redactor that takes
// the stored secrets' values out of execution output (issue #31).
//
// The values live sealed in the secrets table the api writes (`oikos secret set`), opened
// here with the scheduler's own OIKOS_SECRETS_KEY (shared/secretbox). Nothing is cached: a
// value set or removed is used by the next probe, and a value is held only for the request
// or the run that needs it. Errors name the secret, never its value.
package secretref

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/redact"
	"github.com/oikos-hq/oikos/shared/secretbox"
)

// Errors.
var (
	// ErrNotSet: no secret of that name is stored.
	ErrNotSet = errors.New("is not set")
	// ErrNoKey: the scheduler was started without OIKOS_SECRETS_KEY(_FILE).
	ErrNoKey = errors.New("cannot be opened: the scheduler has no OIKOS_SECRETS_KEY (or OIKOS_SECRETS_KEY_FILE)")
)

// Resolver opens stored secrets. A nil Resolver, or one without a key, resolves no
// reference (each says why) and redacts the well-known formats only.
type Resolver struct {
	st  *storage.Store
	box *secretbox.Box
}

// New is a Resolver reading pool's secrets table and opening values with box (nil: the
// scheduler has no key).
func New(pool *storage.Pool, box *secretbox.Box) *Resolver {
	return &Resolver{st: storage.New(pool), box: box}
}

// Resolve returns the value of the secret name: "secret NAME is not set (oikos secret set
// NAME)" wrapping ErrNotSet when there is none.
func (r *Resolver) Resolve(ctx context.Context, name string) (string, error) {
	n, err := secretbox.Name(name)
	if err != nil {
		return "", fmt.Errorf("secret %q: %w", name, err)
	}
	if r == nil || r.box == nil || r.st == nil {
		return "", fmt.Errorf("secret %s %w", n, ErrNoKey)
	}
	s, ok, err := r.st.SealedSecret(ctx, n)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("secret %s %w (oikos secret set %s)", n, ErrNotSet, n)
	}
	v, err := r.box.Open(n, s.Ciphertext, s.KeyID)
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", n, err)
	}
	return v, nil
}

// Value is v with each space-separated word written `secret:NAME` replaced by the
// secret's value ("Bearer secret:grafana_token"), as the agent's http_get headers are.
func (r *Resolver) Value(ctx context.Context, v string) (string, error) {
	words := strings.Split(v, " ")
	for i, w := range words {
		name, ok, err := secretbox.Ref(w)
		if !ok {
			continue
		}
		if err != nil {
			return "", err
		}
		if words[i], err = r.Resolve(ctx, name); err != nil {
			return "", err
		}
	}
	return strings.Join(words, " "), nil
}

// Redactor redacts every stored secret's value and the well-known credential formats. When
// the values cannot be read (no key, the database) it still redacts the formats, and says
// why in err for the caller to log.
func (r *Resolver) Redactor(ctx context.Context) (*redact.Redactor, error) {
	if r == nil || r.box == nil || r.st == nil {
		return redact.New(nil), nil
	}
	all, err := r.st.SealedSecrets(ctx)
	if err != nil {
		return redact.New(nil), err
	}
	values := make(map[string]string, len(all))
	var bad error
	for _, s := range all {
		v, err := r.box.Open(s.Name, s.Ciphertext, s.KeyID)
		if err != nil {
			bad = fmt.Errorf("secret %s: %w", s.Name, err)
			continue
		}
		values[s.Name] = v
	}
	return redact.New(values), bad
}
