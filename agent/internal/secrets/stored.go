package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/oikos-hq/oikos/shared/secretbox"
)

// StoredReader reads the secrets table the api writes (`oikos secret set`): the agent's
// storage package.
type StoredReader interface {
	Sealed(ctx context.Context, name string) (sealed []byte, keyID string, ok bool, err error)
	Names(ctx context.Context) ([]string, error)
}

// stored is the backend of the secrets table, opened with the agent's OIKOS_SECRETS_KEY.
type stored struct {
	r   StoredReader
	box *secretbox.Box
}

// NewStored is the backend of the secrets `oikos secret set` keeps, sealed under box's key.
func NewStored(r StoredReader, box *secretbox.Box) Backend { return &stored{r: r, box: box} }

func (s *stored) Name() string { return "stored" }

func (s *stored) List(ctx context.Context) ([]string, error) { return s.r.Names(ctx) }

func (s *stored) Resolve(ctx context.Context, name string) (string, error) {
	n, err := secretbox.Name(name)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	sealed, keyID, ok, err := s.r.Sealed(ctx, n)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%w: no secret named %q is stored (oikos secret set %s)", ErrNotFound, n, n)
	}
	return s.box.Open(n, sealed, keyID)
}

// chain asks its backends in order.
type chain []Backend

// Chain is one Backend over several, asked in order (nil ones are skipped): List is the
// union of their names, Resolve the first that has the name; a backend's failure other than
// ErrNotFound is the answer (a secret is never silently taken from the next one). Nil when
// none is given.
func Chain(bs ...Backend) Backend {
	var c chain
	for _, b := range bs {
		if b != nil {
			c = append(c, b)
		}
	}
	switch len(c) {
	case 0:
		return nil
	case 1:
		return c[0]
	}
	return c
}

func (c chain) Name() string {
	names := make([]string, len(c))
	for i, b := range c {
		names[i] = b.Name()
	}
	return strings.Join(names, "+")
}

func (c chain) List(ctx context.Context) ([]string, error) {
	var out []string
	for _, b := range c {
		names, err := b.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		}
		out = append(out, names...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (c chain) Resolve(ctx context.Context, name string) (string, error) {
	var last error
	for _, b := range c {
		v, err := b.Resolve(ctx, name)
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return "", err
		}
		last = err
	}
	return "", last
}

// Values resolves every secret b lists, for redaction: name -> value. A secret that fails
// to resolve is left out (its failure is the caller's to report where it is used).
func Values(ctx context.Context, b Backend) (map[string]string, error) {
	if b == nil {
		return nil, nil
	}
	names, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		if v, err := b.Resolve(ctx, n); err == nil {
			out[n] = v
		}
	}
	return out, nil
}
