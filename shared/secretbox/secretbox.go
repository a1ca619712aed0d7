// Package secretbox is what the three daemons share about the secrets `oikos secret set`
// stores (issue #31): the names, the `secret:NAME` reference a tool argument or a configured
// value is written as, and the sealing of values with AES-256-GCM under a key that lives
// outside the database.
//
// Why a key outside the database: the secrets table is in every backup and every dump, and
// the api, the scheduler and the agent all need to read it (a web-fetch header, an HTTP
// check's header, a notification URL). Sealing each value under OIKOS_SECRETS_KEY (or the
// file OIKOS_SECRETS_KEY_FILE names) keeps a leaked dump useless without the key, while any
// daemon given the key resolves any name without a second store to keep in sync. The name is
// the associated data, so a ciphertext moved to another name does not open.
//
// This package holds no SQL: each daemon reads the table through its own storage package.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Configuration variables.
const (
	KeyVar     = "OIKOS_SECRETS_KEY"
	KeyFileVar = "OIKOS_SECRETS_KEY_FILE"
)

// RefPrefix starts a reference to a secret: "secret:grafana_token".
const RefPrefix = "secret:"

// MaxValueBytes bounds a secret's value.
const MaxValueBytes = 64 << 10

// Errors.
var (
	// ErrNoKey: neither OIKOS_SECRETS_KEY nor OIKOS_SECRETS_KEY_FILE is set.
	ErrNoKey = errors.New("no secrets key is configured: set OIKOS_SECRETS_KEY (32 random bytes, base64: `openssl rand -base64 32`) or OIKOS_SECRETS_KEY_FILE in the environment of the api, the scheduler and the agent")
	// ErrKey: the configured key is unusable.
	ErrKey = errors.New("invalid secrets key")
	// ErrWrongKey: a value was sealed under another key than this daemon's.
	ErrWrongKey = errors.New("sealed under another OIKOS_SECRETS_KEY")
	// ErrName: not a valid secret name.
	ErrName = errors.New("invalid secret name")
)

// Box seals and opens values under one key.
type Box struct {
	aead cipher.AEAD
	id   string
}

// FromEnv loads the key from OIKOS_SECRETS_KEY or the file OIKOS_SECRETS_KEY_FILE names
// (getenv defaults to os.Getenv): ErrNoKey when neither is set, an error wrapping ErrKey for
// a key that is not 32 bytes in base64 or hex, both set, or a key file others may read.
func FromEnv(getenv func(string) string) (*Box, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	raw, file := strings.TrimSpace(getenv(KeyVar)), strings.TrimSpace(getenv(KeyFileVar))
	switch {
	case raw != "" && file != "":
		return nil, fmt.Errorf("%w: set %s or %s, not both", ErrKey, KeyVar, KeyFileVar)
	case raw == "" && file == "":
		return nil, ErrNoKey
	case file != "":
		info, err := os.Stat(file)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrKey, KeyFileVar, err)
		}
		// A key everyone on the host can read protects nothing.
		if info.Mode().Perm()&0o007 != 0 {
			return nil, fmt.Errorf("%w: %s=%s is readable by other users (mode %04o); chmod 600 it, or 640 with the daemons' group",
				ErrKey, KeyFileVar, file, info.Mode().Perm())
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrKey, KeyFileVar, err)
		}
		raw = strings.TrimSpace(string(b))
		box, err := Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", KeyFileVar, file, err)
		}
		return box, nil
	}
	box, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyVar, err)
	}
	return box, nil
}

// Parse makes a Box of a key written as base64 (standard or URL alphabet, padded or not)
// or hex, 32 bytes either way.
func Parse(s string) (*Box, error) {
	var key []byte
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		key = b
	} else {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(s); err == nil {
				key = b
				break
			}
		}
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: want 32 random bytes in base64 or hex (`openssl rand -base64 32`)", ErrKey)
	}
	return New(key)
}

// New makes a Box of a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: %d bytes, want 32", ErrKey, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	sum := sha256.Sum256(append([]byte("oikos-secrets-key-id\x00"), key...))
	return &Box{aead: aead, id: hex.EncodeToString(sum[:8])}, nil
}

// KeyID names the key without revealing it (stored beside each value).
func (b *Box) KeyID() string { return b.id }

// Seal returns nonce || ciphertext of value, bound to name.
func (b *Box) Seal(name, value string) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("secretbox: no randomness: " + err.Error()) // crypto/rand never fails on supported systems
	}
	return b.aead.Seal(nonce, nonce, []byte(value), []byte(name))
}

// Open returns the value sealed for name; keyID is the id stored beside it.
func (b *Box) Open(name string, sealed []byte, keyID string) (string, error) {
	if keyID != b.id {
		return "", fmt.Errorf("secret %q: %w (key id %s; this daemon's is %s): give every daemon the same key", name, ErrWrongKey, keyID, b.id)
	}
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return "", fmt.Errorf("secret %q: the stored value is damaged", name)
	}
	v, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(name))
	if err != nil {
		return "", fmt.Errorf("secret %q: the stored value does not open under this key (damaged, or moved from another name)", name)
	}
	return string(v), nil
}

// Name returns name canonical (trimmed, lower-cased) or an error wrapping ErrName: letters,
// digits, '_', '-' and '.', not starting with '.', at most 128 bytes — the names every
// backend accepts (an OIKOS_SECRET_<NAME> variable, a file of OIKOS_SECRETS_DIR).
func Name(name string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" {
		return "", fmt.Errorf("%w: empty", ErrName)
	}
	if len(n) > 128 {
		return "", fmt.Errorf("%w: %d bytes, at most 128", ErrName, len(n))
	}
	if n[0] == '.' {
		return "", fmt.Errorf("%w %q: must not start with '.'", ErrName, name)
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return "", fmt.Errorf("%w %q: use letters, digits, '_', '-' and '.'", ErrName, name)
		}
	}
	return n, nil
}

// Ref reports whether s is a reference "secret:NAME" and returns the canonical name; ok with
// a non-nil error is a reference whose name is invalid.
func Ref(s string) (name string, ok bool, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), RefPrefix)
	if !ok {
		return "", false, nil
	}
	n, err := Name(rest)
	return n, true, err
}
