package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// HostKeyStore pins SSH host keys on first use. Keys are the SSH wire
// encoding of the public key (ssh.PublicKey.Marshal), addresses are the
// dialled "ip:port".
type HostKeyStore interface {
	// Get returns the pinned key for addr; ok is false when none is pinned.
	Get(ctx context.Context, addr string) (key []byte, ok bool, err error)
	// Put pins key for addr. If a different key is already pinned (another
	// process won the race), it returns a *HostKeyChangedError.
	Put(ctx context.Context, addr string, key []byte) error
	// Mismatch records that addr offered got while want is pinned, so an
	// operator hears about it (the Postgres store raises a signal).
	Mismatch(ctx context.Context, addr string, want, got []byte)
}

// HostKeyChangedError is the refusal of a host whose key differs from the
// pinned one. It matches ErrHostKeyChanged.
type HostKeyChangedError struct {
	Addr string
	Want []byte // pinned key
	Got  []byte // key the host offered
}

// Error names the address and both fingerprints, so the operator can
// check the new key against the host before re-pinning.
func (e *HostKeyChangedError) Error() string {
	return fmt.Sprintf("host key for %s changed: pinned %s, offered %s; refusing to connect (if the host was reinstalled, remove its pinned key)",
		e.Addr, Fingerprint(e.Want), Fingerprint(e.Got))
}

// Unwrap lets errors.Is(err, ErrHostKeyChanged) match.
func (e *HostKeyChangedError) Unwrap() error { return ErrHostKeyChanged }

// Fingerprint is the OpenSSH SHA256 fingerprint of a wire-encoded public key,
// the form `ssh-keygen -l` prints, so operators can compare it by eye.
func Fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// verifyHostKey applies trust on first use: unknown → pin, equal → accept,
// different → refuse and report the mismatch. A store that cannot be read
// refuses too: accepting an unverified key because the database is down would
// turn an outage into a hole.
func verifyHostKey(ctx context.Context, store HostKeyStore, addr string, key ssh.PublicKey, log zerolog.Logger) error {
	got := key.Marshal()
	want, ok, err := store.Get(ctx, addr)
	if err != nil {
		return fmt.Errorf("read pinned host key for %s: %w", addr, err)
	}
	if !ok {
		if err := store.Put(ctx, addr, got); err != nil {
			var changed *HostKeyChangedError
			if errors.As(err, &changed) {
				store.Mismatch(ctx, addr, changed.Want, got)
				return err
			}
			return fmt.Errorf("pin host key for %s: %w", addr, err)
		}
		log.Info().Str("addr", addr).Str("fingerprint", Fingerprint(got)).Str("key_type", key.Type()).
			Msg("pinned ssh host key on first use")
		return nil
	}
	if bytes.Equal(want, got) {
		return nil
	}
	store.Mismatch(ctx, addr, want, got)
	changed := &HostKeyChangedError{Addr: addr, Want: want, Got: got}
	log.Error().Str("addr", addr).Str("pinned", Fingerprint(want)).Str("offered", Fingerprint(got)).
		Msg("ssh host key changed; connection refused")
	return changed
}

// MemoryHostKeys is an in-memory HostKeyStore for tests and tools; it keeps
// every reported mismatch so a test can assert the signal was raised.
type MemoryHostKeys struct {
	// OnMismatch, if set, is called for every mismatch (with fingerprints).
	OnMismatch func(ctx context.Context, addr, want, got string)

	mu         sync.Mutex
	keys       map[string][]byte
	mismatches []HostKeyChangedError
}

// NewMemoryHostKeys returns an empty store.
func NewMemoryHostKeys() *MemoryHostKeys {
	return &MemoryHostKeys{keys: map[string][]byte{}}
}

// Get returns the pinned key for addr.
func (m *MemoryHostKeys) Get(_ context.Context, addr string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[addr]
	return append([]byte(nil), k...), ok, nil
}

// Put pins key for addr unless a different key is already pinned.
func (m *MemoryHostKeys) Put(_ context.Context, addr string, key []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.keys[addr]; ok && !bytes.Equal(old, key) {
		return &HostKeyChangedError{Addr: addr, Want: append([]byte(nil), old...), Got: append([]byte(nil), key...)}
	}
	if m.keys == nil {
		m.keys = map[string][]byte{}
	}
	m.keys[addr] = append([]byte(nil), key...)
	return nil
}

// Mismatch records the event and calls OnMismatch.
func (m *MemoryHostKeys) Mismatch(ctx context.Context, addr string, want, got []byte) {
	m.mu.Lock()
	m.mismatches = append(m.mismatches, HostKeyChangedError{Addr: addr, Want: append([]byte(nil), want...), Got: append([]byte(nil), got...)})
	cb := m.OnMismatch
	m.mu.Unlock()
	if cb != nil {
		cb(ctx, addr, Fingerprint(want), Fingerprint(got))
	}
}

// Mismatches returns every mismatch reported so far.
func (m *MemoryHostKeys) Mismatches() []HostKeyChangedError {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]HostKeyChangedError(nil), m.mismatches...)
}
