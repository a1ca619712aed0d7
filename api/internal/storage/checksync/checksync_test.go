package checksync_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage/checksync"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
	"github.com/oikos-hq/oikos/testkit/syncbuf"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var (
	ctx = context.Background()
	op  = graph.Meta{Actor: "tester"}
)

func setup(t *testing.T) (*graph.Service, *pgxpool.Pool, *ontology.Ontology) {
	t.Helper()
	db := pgtest.New(t)
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SyncOntology(ctx, o); err != nil {
		t.Fatal(err)
	}
	return svc, db.Pool, o
}

func create(t *testing.T, svc *graph.Service, typ, name string, attrs map[string]any) graph.Entity {
	t.Helper()
	e, _, err := svc.CreateEntity(ctx, op, graph.CreateEntityInput{Type: typ, Name: name, Attributes: attrs})
	if err != nil {
		t.Fatalf("create %s:%s: %v", typ, name, err)
	}
	return e
}

func targetOf(e graph.Entity) checks.Target {
	return checks.Target{ID: e.ID, Slug: e.Slug, Type: e.Type, Name: e.Name, State: e.State, Attributes: e.Attributes}
}

// TestLookupFailureDegradesToSkip makes the hosts-edge read fail (lock timeout) and checks
// that the sync logs it, skips the guest's checks and leaves the transaction usable.
func TestLookupFailureDegradesToSkip(t *testing.T) {
	t.Parallel()
	svc, pool, o := setup(t)
	create(t, svc, "proxmox-host", "atlas", map[string]any{"node": "atlas"})
	guest := create(t, svc, "lxc", "web", map[string]any{"vmid": 101})
	if _, _, err := svc.CreateRelationship(ctx, op, "hosts", "proxmox-host:atlas", "lxc:web", nil); err != nil {
		t.Fatal(err)
	}
	guest, _ = svc.GetEntity(ctx, guest.Slug)

	// Another session holds relationships exclusively until the test is done with it.
	locker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Rollback(ctx) }()
	if _, err := locker.Exec(ctx, `LOCK TABLE relationships IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	var logs syncbuf.Buffer
	s := checksync.New(zerolog.New(&logs))
	var ch checksync.Changes
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
			return err
		}
		var err error
		if ch, err = s.Sync(ctx, tx, o, targetOf(guest)); err != nil {
			return err
		}
		// The transaction is still usable after the failed read.
		_, err = tx.Exec(ctx, `UPDATE entities SET attributes = attributes || '{"touched": true}' WHERE id = $1`, guest.ID)
		return err
	})
	if err != nil {
		t.Fatalf("sync with a failing lookup aborted the transaction: %v", err)
	}
	if !strings.Contains(logs.String(), "graph read for check derivation failed") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	if len(ch.Disabled) != 4 || len(ch.Added) != 0 {
		t.Errorf("changes with the host unknown: %+v", ch)
	}
	_ = locker.Rollback(ctx)

	// The next sync heals it.
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		ch, err = s.Sync(ctx, tx, o, targetOf(guest))
		return err
	})
	if err != nil || len(ch.Updated) != 4 {
		t.Errorf("healing sync: %+v %v", ch, err)
	}
}

// TestBulkAndSingleAgree derives with the per-entity lookup (through the graph service) and
// then with the bulk snapshot: the bulk pass must find nothing to change, and running either
// twice writes nothing.
func TestBulkAndSingleAgree(t *testing.T) {
	t.Parallel()
	svc, pool, o := setup(t)
	create(t, svc, "proxmox-host", "atlas", map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1"})
	create(t, svc, "workstation", "mac", map[string]any{"lan_ipv4": "127.0.12.1", "os": "darwin"})
	ents := []graph.Entity{
		create(t, svc, "lxc", "a", map[string]any{"vmid": 1, "host": "atlas"}),
		create(t, svc, "lxc", "b", map[string]any{"vmid": 2}),
		create(t, svc, "vm", "c", map[string]any{"vmid": 3, "host": "proxmox-host:atlas", "qemu_guest_agent": true}),
		create(t, svc, "backup-target", "tm", map[string]any{"path": "/Backups", "max_age_minutes": 1500}),
		create(t, svc, "ingress-route", "x.lab.example", map[string]any{"public_host": "x.lab.example"}),
		create(t, svc, "service", "x", map[string]any{"unit": "x.service", "url": "https://x.lab.example/"}),
	}
	for _, e := range [][3]string{{"hosts", "proxmox-host:atlas", "lxc:b"}, {"backs-up-to", "workstation:mac", "backup-target:tm"}} {
		if _, _, err := svc.CreateRelationship(ctx, op, e[0], e[1], e[2], nil); err != nil {
			t.Fatal(err)
		}
	}
	var targets []checks.Target
	for _, e := range ents {
		fresh, err := svc.GetEntity(ctx, e.Slug)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, targetOf(fresh))
	}
	var total int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM check_defs WHERE enabled`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	// host and workstation: 4 machine probes each; lxc a, b: 4 each; vm c: 4; backup: 1;
	// ingress: 1; service: process + http.
	if total != 4+4+4+4+4+1+1+2 {
		t.Errorf("%d enabled checks after single-entity syncs", total)
	}
	s := checksync.New(zerolog.Nop())
	for range 2 {
		err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
			ch, err := s.SyncMany(ctx, tx, o, targets)
			if err == nil && ch.Changed() {
				t.Errorf("bulk sync disagrees with single syncs: %+v", ch)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var holder string
	if err := pool.QueryRow(ctx, `SELECT config->>'holder' FROM check_defs WHERE slug = 'check:backup-target.tm.backup-freshness'`).Scan(&holder); err != nil || holder != "workstation:mac" {
		t.Errorf("backup holder %q (%v)", holder, err)
	}
}

// TestOrphanCheckEntityIsReused: a check entity left without a definition keeps its id when
// the check is derived again (the original generated a fresh uuid and broke the FK).
func TestOrphanCheckEntityIsReused(t *testing.T) {
	t.Parallel()
	svc, pool, o := setup(t)
	route := create(t, svc, "ingress-route", "y.lab.example", map[string]any{"public_host": "y.lab.example"})
	var entityID string
	if err := pool.QueryRow(ctx, `DELETE FROM check_defs WHERE slug = 'check:ingress-route.y.lab.example.http' RETURNING entity_id::text`).Scan(&entityID); err != nil {
		t.Fatal(err)
	}
	s := checksync.New(zerolog.Nop())
	var ch checksync.Changes
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		var err error
		ch, err = s.Sync(ctx, tx, o, targetOf(route))
		return err
	})
	if err != nil || len(ch.Added) != 1 {
		t.Fatalf("re-derive: %+v %v", ch, err)
	}
	var again string
	if err := pool.QueryRow(ctx, `SELECT entity_id::text FROM check_defs WHERE slug = 'check:ingress-route.y.lab.example.http'`).Scan(&again); err != nil || again != entityID {
		t.Errorf("check entity id %s, want the orphan's %s (%v)", again, entityID, err)
	}
}

// TestUnknownSaysWhy (S5): before any check reports, a monitored entity's status says why it
// is unknown: its first check is due, or no check can be derived and what is missing; a
// reason is replaced when the entity's checks change but never once a check has reported.
func TestUnknownSaysWhy(t *testing.T) {
	t.Parallel()
	svc, pool, _ := setup(t)
	reason := func(slug string) string {
		t.Helper()
		var r string
		if err := pool.QueryRow(ctx, `SELECT st.reason FROM entity_status st JOIN entities e ON e.id = st.entity_id WHERE e.slug = $1`, slug).Scan(&r); err != nil {
			t.Fatalf("%s: %v", slug, err)
		}
		return r
	}
	create(t, svc, "router", "gateway", map[string]any{"model": "x"})
	if r := reason("router:gateway"); !strings.HasPrefix(r, "no check can be derived: ") {
		t.Errorf("router without an address: %q", r)
	}
	create(t, svc, "host", "box", map[string]any{"lan_ipv4": "127.0.11.9"})
	if r := reason("host:box"); !strings.HasPrefix(r, "not checked yet: ") {
		t.Errorf("host with checks, none reported: %q", r)
	}
	// A reported check owns the reason from then on.
	if _, err := pool.Exec(ctx, `UPDATE entity_status st SET health = 'up', reason = 'all 4 checks up', last_check_at = now()
		FROM entities e WHERE e.id = st.entity_id AND e.slug = 'host:box'`); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.UpdateAttributes(ctx, op, "host:box", map[string]any{"lan_ipv4": "127.0.11.10"}, nil); err != nil {
		t.Fatal(err)
	}
	if r := reason("host:box"); r != "all 4 checks up" {
		t.Errorf("a sync rewrote a reported reason: %q", r)
	}
}
