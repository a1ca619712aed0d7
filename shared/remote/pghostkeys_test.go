package remote

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// TestPGHostKeys runs against a real Postgres when OIKOS_TEST_DATABASE_URL is
// set. Everything happens in one transaction on a temporary table that
// shadows any real ssh_host_keys, and is rolled back.
func TestPGHostKeys(t *testing.T) {
	url := os.Getenv("OIKOS_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("OIKOS_TEST_DATABASE_URL not set")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE ssh_host_keys (
		address text PRIMARY KEY,
		key_type text NOT NULL,
		public_key bytea NOT NULL,
		fingerprint text NOT NULL,
		first_seen timestamptz NOT NULL DEFAULT now(),
		last_seen timestamptz
	) ON COMMIT DROP`); err != nil {
		t.Fatal(err)
	}

	var signals []string
	store := NewPGHostKeys(tx, func(_ context.Context, addr, want, got string) {
		signals = append(signals, addr+" "+want+" "+got)
	}, zerolog.Nop())
	const addr = "127.0.10.1:2222"
	a, b := newSigner(t).PublicKey(), newSigner(t).PublicKey()

	if _, ok, err := store.Get(ctx, addr); err != nil || ok {
		t.Fatalf("unknown host: ok=%v err=%v", ok, err)
	}
	// First use pins; the same key verifies; the row records type and fingerprint.
	if err := verifyHostKey(ctx, store, addr, a, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if err := verifyHostKey(ctx, store, addr, a, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	var keyType, fp string
	var lastSeen *time.Time
	if err := tx.QueryRow(ctx, `SELECT key_type, fingerprint, last_seen FROM ssh_host_keys WHERE address = $1`, addr).
		Scan(&keyType, &fp, &lastSeen); err != nil {
		t.Fatal(err)
	}
	if keyType != "ssh-ed25519" || fp != Fingerprint(a.Marshal()) || lastSeen == nil {
		t.Errorf("row: type %q fingerprint %q last_seen %v", keyType, fp, lastSeen)
	}
	// Losing a pin race to the same key is fine; to a different key is a change.
	if err := store.Put(ctx, addr, a.Marshal()); err != nil {
		t.Errorf("re-pin same key: %v", err)
	}
	var changed *HostKeyChangedError
	if err := store.Put(ctx, addr, b.Marshal()); !errors.As(err, &changed) {
		t.Errorf("re-pin other key: err = %v", err)
	}
	// A changed key is refused and signalled with both fingerprints.
	err = verifyHostKey(ctx, store, addr, b, zerolog.Nop())
	if !errors.Is(err, ErrHostKeyChanged) {
		t.Fatalf("err = %v, want ErrHostKeyChanged", err)
	}
	want := addr + " " + Fingerprint(a.Marshal()) + " " + Fingerprint(b.Marshal())
	if len(signals) != 1 || signals[0] != want {
		t.Errorf("signals = %q, want [%q]", signals, want)
	}
	if key, _, _ := store.Get(ctx, addr); Fingerprint(key) != Fingerprint(a.Marshal()) {
		t.Errorf("pin replaced")
	}
}
