package onboard

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/remote"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k.Marshal()
}

// An address under the gate is never pinned on first use: captured and refused, or pinned
// only with the vouched fingerprint. Other addresses pass through.
func TestKeyGate(t *testing.T) {
	ctx := context.Background()
	inner := remote.NewMemoryHostKeys()
	g := NewKeyGate(inner, nil)
	key := newKey(t)

	gt, done := g.open("10.0.0.1:22", "")
	err := g.Put(ctx, "10.0.0.1:22", key)
	if !errors.Is(err, ErrAwaitingConfirmation) {
		t.Fatalf("capture: %v", err)
	}
	if fp, typ := g.offeredKey(gt); fp != remote.Fingerprint(key) || typ != "ssh-ed25519" {
		t.Fatalf("captured %s %s", typ, fp)
	}
	done()
	if _, ok, _ := inner.Get(ctx, "10.0.0.1:22"); ok {
		t.Fatal("a captured key was pinned")
	}

	_, done = g.open("10.0.0.1:22", remote.Fingerprint(newKey(t)))
	if err := g.Put(ctx, "10.0.0.1:22", key); !errors.Is(err, ErrFingerprintMismatch) {
		t.Fatalf("wrong fingerprint: %v", err)
	}
	done()
	_, done = g.open("10.0.0.1:22", remote.Fingerprint(key))
	if err := g.Put(ctx, "10.0.0.1:22", key); err != nil {
		t.Fatalf("vouched: %v", err)
	}
	done()
	if _, ok, _ := inner.Get(ctx, "10.0.0.1:22"); !ok {
		t.Fatal("the vouched key was not pinned")
	}
	// Outside the gate: trust on first use, as for the rest of the fleet.
	if err := g.Put(ctx, "10.0.0.2:22", key); err != nil {
		t.Fatal(err)
	}
}

func TestPVEVersion(t *testing.T) {
	for out, want := range map[string]string{
		"pve-manager/8.3.0/c1689ccb1065a83b (running kernel: 6.8.12-4-pve)\n": "8.3.0",
		"pve-manager/7.4-17/513c62be (running kernel: 5.15.131-2-pve)":        "7.4-17",
		"bash: pveversion: command not found":                                 "",
	} {
		if got := pveVersion(out); got != want {
			t.Errorf("%q: %q, want %q", out, got, want)
		}
	}
}
