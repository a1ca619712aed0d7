package onboard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/hostconnect"
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
//
// Outside an attempt, an address whose latest connection request is not `connected` (a
// machine being added: awaiting confirmation, failed, still pending) is never pinned either,
// whatever dials it — a check of a guest whose host is still planned, an execution — so the
// only way a new machine's key is trusted is the operator's.
type KeyGate struct {
	inner remote.HostKeyStore
	db    *storage.Store

	mu    sync.Mutex
	gates map[string]*gate
}

type gate struct {
	expect string // "" captures
	// offered is set by the first key the address presented.
	offered, keyType string
}

// NewKeyGate wraps inner; db is where host_connects is read (nil: only open gates apply).
func NewKeyGate(inner remote.HostKeyStore, db *storage.Pool) *KeyGate {
	return &KeyGate{inner: inner, db: storage.New(db), gates: map[string]*gate{}}
}

// ErrNotConfirmed refuses a first-use pin of a machine that is being added.
var ErrNotConfirmed = errors.New("host key not confirmed by an operator")

// onboarding returns the status of addr's latest connection request, "" when it has none.
func (k *KeyGate) onboarding(ctx context.Context, addr string) (string, error) {
	if k.db == nil {
		return "", nil
	}
	return k.db.HostConnectStatus(ctx, addr)
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
	if g == nil {
		status, err := k.onboarding(ctx, addr)
		switch {
		case err != nil:
			return fmt.Errorf("read %s's onboarding: %w", addr, err)
		case status != "" && status != hostconnect.StatusConnected:
			return fmt.Errorf("%w: %s is being added to the fleet (%s) and offered %s; only `oikos add` with the operator's confirmation pins it",
				ErrNotConfirmed, addr, status, remote.Fingerprint(key))
		}
		return k.inner.Put(ctx, addr, key)
	}
	switch {
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
