package notify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/pg"
)

// A channel names its URL and its signing secret by reference (E5), never by value:
//
//	env:NAME      the api's environment variable NAME, read at every send
//	file:/path    the file's content (trimmed), read at every send, so a rotated file is used
//	stored:<id>   a value the operator sent inline, kept in notification_secrets
//
// The channel row, its audit rows and its events hold only the reference. Errors about a
// reference name the reference, never the value.

// Reference schemes.
const (
	refEnv    = "env"
	refFile   = "file"
	refStored = "stored"
)

// ErrSecret is wrapped by every failure to resolve a reference.
var ErrSecret = errors.New("secret reference")

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// parseRef splits and checks a reference; the error says what a reference looks like.
func parseRef(ref string) (scheme, name string, err error) {
	scheme, name, ok := strings.Cut(strings.TrimSpace(ref), ":")
	switch {
	case !ok:
	case scheme == refEnv && envName.MatchString(name):
		return scheme, name, nil
	case scheme == refFile && filepath.IsAbs(name):
		return scheme, filepath.Clean(name), nil
	case scheme == refStored:
		if _, err := uuid.Parse(name); err == nil {
			return scheme, name, nil
		}
	}
	return "", "", fmt.Errorf("%w %q: use env:NAME (a variable of the api's environment) or file:/absolute/path", ErrSecret, ref)
}

// Secrets resolves references.
type Secrets struct {
	// Getenv reads the api's environment (os.Getenv when nil).
	Getenv func(string) string
	// ReadFile reads a file (os.ReadFile when nil).
	ReadFile func(string) ([]byte, error)
}

// Resolve returns the value ref stands for, reading stored values through q.
func (s Secrets) Resolve(ctx context.Context, q pg.Querier, ref string) (string, error) {
	scheme, name, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	switch scheme {
	case refEnv:
		getenv := s.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return "", fmt.Errorf("%w env:%s: the variable is not set in the api's environment", ErrSecret, name)
		}
		return v, nil
	case refFile:
		read := s.ReadFile
		if read == nil {
			read = os.ReadFile
		}
		b, err := read(name)
		if err != nil {
			// The path error names the path, never the content.
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("%w file:%s: %v", ErrSecret, name, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%w file:%s: the file is empty", ErrSecret, name)
		}
		return v, nil
	default:
		var v string
		err := q.QueryRow(ctx, `SELECT value FROM notification_secrets WHERE id = $1`, name).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("%w stored:%s: no such stored secret", ErrSecret, name)
		}
		if err != nil {
			return "", fmt.Errorf("%w stored:%s: %w", ErrSecret, name, err)
		}
		return v, nil
	}
}

// storeSecret keeps an inline value in notification_secrets and returns its reference.
func storeSecret(ctx context.Context, q pg.Querier, value string) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	if _, err := q.Exec(ctx, `INSERT INTO notification_secrets (id, value) VALUES ($1, $2)`, id, value); err != nil {
		return "", fmt.Errorf("store secret: %w", err)
	}
	return refStored + ":" + id.String(), nil
}

// dropSecret deletes the stored value a reference names, if it names one.
func dropSecret(ctx context.Context, q pg.Querier, ref *string) error {
	if ref == nil {
		return nil
	}
	scheme, name, err := parseRef(*ref)
	if err != nil || scheme != refStored {
		return nil
	}
	if _, err := q.Exec(ctx, `DELETE FROM notification_secrets WHERE id = $1`, name); err != nil {
		return fmt.Errorf("drop stored secret: %w", err)
	}
	return nil
}
