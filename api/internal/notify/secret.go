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

	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/storage/notifystore"
	"github.com/oikos-hq/oikos/shared/secretbox"
)

// A channel names its URL and its signing secret by reference (E5), never by value:
//
//	env:NAME      the api's environment variable NAME, read at every send
//	file:/path    the file's content (trimmed), read at every send, so a rotated file is used
//	stored:<id>   a value the operator sent inline, kept in notification_secrets
//	secret:NAME   a secret set with `oikos secret set NAME`, sealed in the secrets table
//
// The channel row, its audit rows and its events hold only the reference. Errors about a
// reference name the reference, never the value.

// Reference schemes.
const (
	refEnv    = "env"
	refFile   = "file"
	refStored = "stored"
	refSecret = "secret"
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
	case scheme == refSecret:
		if n, err := secretbox.Name(name); err == nil {
			return scheme, n, nil
		}
	}
	return "", "", fmt.Errorf("%w %q: use env:NAME (a variable of the api's environment), file:/absolute/path or secret:NAME (oikos secret set)", ErrSecret, ref)
}

// Secrets resolves references.
type Secrets struct {
	// Getenv reads the api's environment (os.Getenv when nil).
	Getenv func(string) string
	// ReadFile reads a file (os.ReadFile when nil).
	ReadFile func(string) ([]byte, error)
	// Stored resolves secret:NAME, a secret of the secrets table (api/internal/secretstore);
	// nil: such references are refused.
	Stored func(ctx context.Context, name string) (string, error)
}

// Resolve returns the value ref stands for, reading stored values through db.
func (s Secrets) Resolve(ctx context.Context, db *notifystore.Store, ref string) (string, error) {
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
	case refSecret:
		if s.Stored == nil {
			return "", fmt.Errorf("%w secret:%s: this api has no secret store", ErrSecret, name)
		}
		v, err := s.Stored(ctx, name)
		if err != nil {
			return "", fmt.Errorf("%w secret:%s: %v", ErrSecret, name, err)
		}
		return v, nil
	default:
		v, ok, err := db.StoredSecret(ctx, name)
		if err != nil {
			return "", fmt.Errorf("%w stored:%s: %w", ErrSecret, name, err)
		}
		if !ok {
			return "", fmt.Errorf("%w stored:%s: no such stored secret", ErrSecret, name)
		}
		return v, nil
	}
}

// storeSecret keeps an inline value in notification_secrets and returns its reference.
func storeSecret(ctx context.Context, db *notifystore.Store, value string) (string, error) {
	id, err := db.StoreSecret(ctx, value)
	if err != nil {
		return "", err
	}
	return refStored + ":" + id, nil
}

// dropSecret deletes the stored value a reference names, if it names one.
func dropSecret(ctx context.Context, db *notifystore.Store, ref *string) error {
	if ref == nil {
		return nil
	}
	scheme, name, err := parseRef(*ref)
	if err != nil || scheme != refStored {
		return nil
	}
	return db.DropSecret(ctx, name)
}

// ResolveTarget resolves a channel's references for one send.
func ResolveTarget(ctx context.Context, db *notifystore.Store, s Secrets, kind, urlRef string, secretRef *string) (notifytarget.Target, error) {
	t := notifytarget.Target{Kind: kind}
	u, err := s.Resolve(ctx, db, urlRef)
	if err != nil {
		return t, err
	}
	t.URL = u
	if secretRef != nil {
		if t.Secret, err = s.Resolve(ctx, db, *secretRef); err != nil {
			return t, err
		}
	}
	if kind == notifytarget.ChannelWebhook && t.Secret == "" {
		return t, errors.New("the webhook has no signing secret")
	}
	return t, nil
}
