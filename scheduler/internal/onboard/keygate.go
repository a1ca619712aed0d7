package onboard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/oikos-hq/oikos/shared/remote"
)

// ErrAwaitingConfirmation ends a capture dial: the machine's key is recorded, not trusted.
var ErrAwaitingConfirmation = errors.New("host key awaits the operator's confirmation")

// ErrFingerprintMismatch ends a dial whose offered key is not the one the operator vouched for.
var ErrFingerprintMismatch = errors.New("host key does not match the fingerprint given")

// KeyGate wraps the pool's host key store so that an address being onboarded is never
// trusted on first use. Every other address passes through untouched. While an address is
// under the gate, pinning a key for it (the first-use path of the pool) either
//   - records the offered key and refuses (capture: the operator has vouched for nothing), or
//   - pins it only when its fingerprint is the one the operator gave, refusing otherwise.
//
// A key already pinned for the address is checked by the store as usual, so a changed key is
// refused and raises host_key_changed exactly as on any other connection.
type KeyGate struct {
	inner remote.HostKeyStore

	mu    sync.Mutex
	gates map[string]*gate
}

type gate struct {
	expect string // "" captures
	// offered is set by the first key the address presented.
	offered, keyType string
}

// NewKeyGate wraps inner.
func NewKeyGate(inner remote.HostKeyStore) *KeyGate {
	return &KeyGate{inner: inner, gates: map[string]*gate{}}
}

// open puts addr under the gate until the returned function is called.
func (k *KeyGate) open(addr, expect string) (*gate, func()) {
	g := &gate{expect: expect}
	k.mu.Lock()
	k.gates[addr] = g
	k.mu.Unlock()
	return g, func() {
		k.mu.Lock()
		if k.gates[addr] == g {
			delete(k.gates, addr)
		}
		k.mu.Unlock()
	}
}

// offeredKey returns what addr's gate saw.
func (k *KeyGate) offeredKey(g *gate) (fingerprint, keyType string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return g.offered, g.keyType
}

// Get implements remote.HostKeyStore.
func (k *KeyGate) Get(ctx context.Context, addr string) ([]byte, bool, error) {
	return k.inner.Get(ctx, addr)
}

// Put implements remote.HostKeyStore: the first-use pin, gated.
func (k *KeyGate) Put(ctx context.Context, addr string, key []byte) error {
	k.mu.Lock()
	g := k.gates[addr]
	if g != nil {
		g.offered, g.keyType = remote.Fingerprint(key), keyTypeOf(key)
	}
	k.mu.Unlock()
	switch {
	case g == nil:
		return k.inner.Put(ctx, addr, key)
	case g.expect == "":
		return fmt.Errorf("%w: %s offered %s", ErrAwaitingConfirmation, addr, remote.Fingerprint(key))
	case g.expect != remote.Fingerprint(key):
		return fmt.Errorf("%w: %s offered %s, the fingerprint given is %s; nothing was pinned",
			ErrFingerprintMismatch, addr, remote.Fingerprint(key), g.expect)
	default:
		return k.inner.Put(ctx, addr, key)
	}
}

// Mismatch implements remote.HostKeyStore.
func (k *KeyGate) Mismatch(ctx context.Context, addr string, want, got []byte) {
	k.inner.Mismatch(ctx, addr, want, got)
}

// keyTypeOf reads the algorithm name that starts an SSH wire-encoded public key.
func keyTypeOf(key []byte) string {
	if len(key) < 4 {
		return ""
	}
	n := int(key[0])<<24 | int(key[1])<<16 | int(key[2])<<8 | int(key[3])
	if n <= 0 || 4+n > len(key) {
		return ""
	}
	return string(key[4 : 4+n])
}
