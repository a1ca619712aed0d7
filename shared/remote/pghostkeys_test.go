package remote

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// pgtest gives each test its own database cloned from the migrated template, so these tests
// run against the ssh_host_keys table the migrations create, never a copy of it. Without
// OIKOS_TEST_DATABASE_URL the test binary starts a private cluster; there is no skip.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestPGHostKeys(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var signals []string
	store := NewPGHostKeys(db.Pool, func(_ context.Context, addr, want, got string) {
		signals = append(signals, addr+" "+want+" "+got)
	}, zerolog.Nop())
	const addr = "127.0.10.1:2222"
	a, b := newSigner(t).PublicKey(), newSigner(t).PublicKey()

	if _, ok, err := store.Get(ctx, addr); err != nil || ok {
		t.Fatalf("unknown host: ok=%v err=%v", ok, err)
	}
	// First use pins; the same key verifies; the row records type, key and fingerprint.
	if err := verifyHostKey(ctx, store, addr, a, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if err := verifyHostKey(ctx, store, addr, a, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	var (
		keyType, fp         string
		key                 []byte
		firstSeen, lastSeen time.Time
	)
	if err := db.Pool.QueryRow(ctx, `SELECT key_type, public_key, fingerprint, first_seen, last_seen
		FROM ssh_host_keys WHERE address = $1`, addr).Scan(&keyType, &key, &fp, &firstSeen, &lastSeen); err != nil {
		t.Fatal(err)
	}
	if keyType != "ssh-ed25519" || fp != Fingerprint(a.Marshal()) || string(key) != string(a.Marshal()) {
		t.Errorf("row: type %q fingerprint %q key matches %v", keyType, fp, string(key) == string(a.Marshal()))
	}
	if lastSeen.Before(firstSeen) {
		t.Errorf("last_seen %v before first_seen %v", lastSeen, firstSeen)
	}

	// Get stamps last_seen: the table shows when each host was last reached.
	if _, err := db.Pool.Exec(ctx, `UPDATE ssh_host_keys SET last_seen = now() - interval '1 day' WHERE address = $1`, addr); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := store.Get(ctx, addr); err != nil || !ok || Fingerprint(got) != Fingerprint(a.Marshal()) {
		t.Fatalf("Get pinned: ok=%v err=%v", ok, err)
	}
	var fresh bool
	if err := db.Pool.QueryRow(ctx, `SELECT last_seen > now() - interval '1 hour' FROM ssh_host_keys WHERE address = $1`, addr).
		Scan(&fresh); err != nil {
		t.Fatal(err)
	}
	if !fresh {
		t.Errorf("Get did not stamp last_seen")
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
	err := verifyHostKey(ctx, store, addr, b, zerolog.Nop())
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
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM ssh_host_keys`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("ssh_host_keys has %d rows (err %v), want 1", rows, err)
	}
}

// Two schedulers meeting a new host at once with different keys: the insert is first-wins,
// exactly one pins, and the other sees a changed key rather than overwriting the pin.
func TestPGHostKeysPinRace(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const addr = "127.0.10.2:2222"
	const racers = 8
	keys := make([][]byte, racers)
	for i := range keys {
		keys[i] = newSigner(t).PublicKey().Marshal()
	}
	errs := make([]error, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		store := NewPGHostKeys(db.Pool, nil, zerolog.Nop())
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = store.Put(ctx, addr, keys[i])
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		var changed *HostKeyChangedError
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("racers %d and %d both pinned %s", winner, i, addr)
			}
			winner = i
		case !errors.As(err, &changed):
			t.Errorf("racer %d: err = %v, want nil or *HostKeyChangedError", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer pinned %s: %v", addr, errs)
	}
	var pinned []byte
	if err := db.Pool.QueryRow(ctx, `SELECT public_key FROM ssh_host_keys WHERE address = $1`, addr).Scan(&pinned); err != nil {
		t.Fatal(err)
	}
	if string(pinned) != string(keys[winner]) {
		t.Errorf("the pinned key is not the winner's")
	}
}
