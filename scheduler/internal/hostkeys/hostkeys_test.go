package hostkeys_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/scheduler/internal/fleet/fleettest"
	"github.com/oikos-hq/oikos/scheduler/internal/hostkeys"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

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

// A mismatch reported by the pinning store becomes one critical signal on the machine at that
// address, with one signal.raised in the outbox and one audit row; a repeat bumps the same
// signal's occurrences and appends nothing (it used to append signal.raised every time).
func TestMismatchRaisesOneSignalPerAddress(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	fleettest.SeedTypes(t, db.Pool)
	host := fleettest.InsertEntity(t, db.Pool, "proxmox-host", "atlas", "", map[string]any{"lan_ipv4": "127.0.10.1", "ssh_port": 2222})
	ctx := context.Background()
	store := hostkeys.New(db.Pool, zerolog.Nop())
	const addr = "127.0.10.1:2222"
	a, b := newKey(t), newKey(t)
	if err := store.Put(ctx, addr, a); err != nil {
		t.Fatal(err)
	}
	store.Mismatch(ctx, addr, a, b)
	store.Mismatch(ctx, addr, a, b)
	store.Mismatch(ctx, addr, a, b)

	var (
		kind, severity, status, entity string
		occurrences                    int64
		details                        map[string]string
	)
	if err := db.Pool.QueryRow(ctx, `SELECT kind, severity, status, coalesce(entity_id::text, ''), occurrences, details
		FROM signals WHERE dedup_key = $1`, "host_key_changed:"+addr).
		Scan(&kind, &severity, &status, &entity, &occurrences, &details); err != nil {
		t.Fatalf("signal row: %v", err)
	}
	if kind != "host_key_changed" || severity != "critical" || status != "open" || entity != host || occurrences != 3 {
		t.Errorf("signal = %s %s %s entity %s occurrences %d", kind, severity, status, entity, occurrences)
	}
	if details["pinned"] != remote.Fingerprint(a) || details["offered"] != remote.Fingerprint(b) || details["address"] != addr {
		t.Errorf("details = %v", details)
	}
	rows, err := db.Pool.Query(ctx, `SELECT coalesce(entity_id::text, ''), payload FROM events WHERE type = 'signal.raised' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var ent string
		var payload json.RawMessage
		if err := rows.Scan(&ent, &payload); err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Fatal(err)
		}
		n++
		if ent != host || p["kind"] != "host_key_changed" || p["dedup_key"] != "host_key_changed:"+addr ||
			p["severity"] != "critical" || p["entity_id"] != host || p["occurrences"] != float64(n) {
			t.Errorf("event %d: entity %s payload %s", n, ent, payload)
		}
	}
	if n != 1 {
		t.Errorf("%d signal.raised events, want 1 (a repeat is an occurrence, not an opening)", n)
	}
	var audits int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'signal.raise' AND actor = 'scheduler' AND entity_id = $1`,
		host).Scan(&audits); err != nil || audits != 1 {
		t.Errorf("%d signal.raise audit rows (%v), want 1", audits, err)
	}
}

// An address that names no machine still raises the signal, unattached.
func TestUnknownAddressUnattached(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	id, err := hostkeys.Raise(ctx, db.Pool, "127.0.99.1:22", "SHA256:a", "SHA256:b")
	if err != nil {
		t.Fatal(err)
	}
	var entity *string
	if err := db.Pool.QueryRow(ctx, `SELECT entity_id::text FROM signals WHERE id = $1`, id).Scan(&entity); err != nil || entity != nil {
		t.Errorf("entity = %v, err %v", entity, err)
	}
}
