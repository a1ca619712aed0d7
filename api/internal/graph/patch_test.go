package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/seed"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

var bg = context.Background()

// seededService is a service over a fresh database holding the seed fleet (ontology,
// inventory with its derived checks, knowledge).
func seededService(t *testing.T) (*graph.Service, *pgxpool.Pool, *ontology.Ontology) {
	t.Helper()
	db := pgtest.New(t)
	o, inv, kn, err := seed.Load(seed.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	s, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Ingest(bg, s, o, inv, kn, seed.Options{Logger: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	return s, db.Pool, o
}

// checkRows is every check definition and check entity, keyed by slug, as q sees them.
func checkRows(t *testing.T, q pg.Querier) map[string]string {
	t.Helper()
	rows, err := q.Query(bg, `SELECT e.slug, e.state, e.attributes::text, coalesce(d.target_id::text, ''), coalesce(d.kind, ''),
		coalesce(d.config::text, ''), coalesce(d.interval_seconds, 0), coalesce(d.timeout_seconds, 0), coalesce(d.enabled, false)
		FROM entities e LEFT JOIN check_defs d ON d.entity_id = e.id WHERE e.type = 'check'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var slug, state, attrs, target, kind, cfg string
		var interval, timeout int
		var enabled bool
		if err := rows.Scan(&slug, &state, &attrs, &target, &kind, &cfg, &interval, &timeout, &enabled); err != nil {
			t.Fatal(err)
		}
		out[slug] = fmt.Sprintf("%s %s %s %s %s %d %d %v", state, attrs, target, kind, cfg, interval, timeout, enabled)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// requireFullyDerived re-derives the checks of every monitored-type entity in one bulk pass
// (the seed ingest's code path, with its own graph snapshot) in a transaction it rolls back,
// and fails if that pass would write anything: the incremental mutations must leave exactly
// the check rows a full re-derivation gives.
func requireFullyDerived(t *testing.T, s *graph.Service, pool *pgxpool.Pool, o *ontology.Ontology, after string) {
	t.Helper()
	var slugs []string
	rows, err := pool.Query(bg, `SELECT slug, type FROM entities WHERE type <> 'check' ORDER BY slug`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var slug, typ string
		if err := rows.Scan(&slug, &typ); err != nil {
			t.Fatal(err)
		}
		if !o.IsA(typ, "knowledge") {
			slugs = append(slugs, slug)
		}
	}
	rows.Close()
	before := checkRows(t, pool)
	tx, err := pool.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(bg) }()
	n, err := s.SyncChecksBulk(bg, tx, graph.Meta{Actor: "full-pass"}, o, slugs)
	if err != nil {
		t.Fatalf("full re-derivation after %s: %v", after, err)
	}
	if n != 0 {
		var diff []string
		full := checkRows(t, tx)
		for slug, v := range full {
			if before[slug] != v {
				diff = append(diff, fmt.Sprintf("%s:\n  stored    %s\n  full pass %s", slug, before[slug], v))
			}
		}
		slices.Sort(diff)
		t.Fatalf("after %s\na full re-derivation changes %d check definitions:\n%s", after, n, strings.Join(diff, "\n"))
	}
}

// patchMenu proposes attribute changes; most are read by derivation (or by the lookups of
// other entities' derivations), some are not. Values may be refused by the ontology for a
// given type; the test then moves on.
var patchMenu = []func(r *rand.Rand) (string, any){
	func(r *rand.Rand) (string, any) { return "version", fmt.Sprint(r.IntN(1000)) },
	func(r *rand.Rand) (string, any) { return "notes", fmt.Sprint("n", r.IntN(10)) },
	func(r *rand.Rand) (string, any) { return "unit", pickOf(r, "a.service", "b.service", nil) },
	func(r *rand.Rand) (string, any) {
		return "url", pickOf(r, "https://a.lab.example/", "https://b.lab.example/health", "not a url", nil)
	},
	func(r *rand.Rand) (string, any) {
		return "public_host", pickOf(r, "a.lab.example", "b.lab.example", nil)
	},
	func(r *rand.Rand) (string, any) { return "port", pickOf(r, 22, 8080, nil) },
	func(r *rand.Rand) (string, any) {
		return "host", pickOf(r, "atlas", "boreas", "proxmox-host:ceres", "nowhere", nil)
	},
	func(r *rand.Rand) (string, any) { return "os", pickOf(r, "linux", "darwin", nil) },
	func(r *rand.Rand) (string, any) {
		return "monitoring", pickOf(r, "none",
			[]any{map[string]any{"kind": "ssh-script", "script": "cpu", "interval": "90s"}},
			[]any{map[string]any{"kind": "http", "disabled": true}},
			[]any{map[string]any{"kind": "tcp"}}, nil)
	},
	func(r *rand.Rand) (string, any) { return "check_interval", pickOf(r, "2m", 300, nil) },
	func(r *rand.Rand) (string, any) { return "expect_status", pickOf(r, 204, nil) },
	func(r *rand.Rand) (string, any) { return "path", pickOf(r, "/backups/a", nil) },
	func(r *rand.Rand) (string, any) { return "max_age_minutes", pickOf(r, 600, nil) },
	func(r *rand.Rand) (string, any) { return "qemu_guest_agent", pickOf(r, true, false, nil) },
	func(r *rand.Rand) (string, any) { return "vmid", pickOf(r, 4242, nil) },
	func(r *rand.Rand) (string, any) { return "lan_ipv4", pickOf(r, "127.0.30.1", nil) },
	func(r *rand.Rand) (string, any) { return "public_ipv4", pickOf(r, "127.0.31.1", nil) },
}

func pickOf(r *rand.Rand, vs ...any) any { return vs[r.IntN(len(vs))] }

// fleetRefs lists the slugs of the seeded entities a PATCH may target, and the current
// hosts and backs-up-to edges.
func fleetRefs(t *testing.T, pool *pgxpool.Pool, o *ontology.Ontology) (slugs, hosts, guests, machines, backups []string) {
	t.Helper()
	rows, err := pool.Query(bg, `SELECT slug, type FROM entities WHERE type <> 'check' ORDER BY slug`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var slug, typ string
		if err := rows.Scan(&slug, &typ); err != nil {
			t.Fatal(err)
		}
		if o.IsA(typ, "knowledge") {
			continue
		}
		slugs = append(slugs, slug)
		switch {
		case o.IsA(typ, "proxmox-host"):
			hosts = append(hosts, slug)
		case o.IsA(typ, "guest"):
			guests = append(guests, slug)
		case typ == "backup-target":
			backups = append(backups, slug)
		}
		if o.IsA(typ, "machine") || o.IsA(typ, "guest") {
			machines = append(machines, slug)
		}
	}
	return slugs, hosts, guests, machines, backups
}

// TestPatchesKeepChecksFullyDerived applies random PATCH sequences (and the edge changes
// that move lookups) to the seed fleet and checks that the check rows always equal what a
// full re-derivation gives, and that every PATCH answers what a read of the entity returns.
// The PATCH path re-derives from definitions read ahead in its first round trip and queues
// the writes into its last; this holds it to the full, unbatched derivation.
func TestPatchesKeepChecksFullyDerived(t *testing.T) {
	t.Parallel()
	s, pool, o := seededService(t)
	requireFullyDerived(t, s, pool, o, "the seed ingest")
	slugs, hosts, guests, machines, backups := fleetRefs(t, pool, o)
	if len(hosts) == 0 || len(guests) == 0 || len(backups) == 0 {
		t.Fatalf("seed fleet lacks hosts (%d), guests (%d) or backup targets (%d)", len(hosts), len(guests), len(backups))
	}
	m := graph.Meta{Actor: "random", Method: "PATCH", Path: "/api/v1/entities", CorrelationID: "corr-random"}
	r := rand.New(rand.NewPCG(4, 2))
	applied, refused := 0, 0
	var log []string
	edgeStep := func(r *rand.Rand) string {
		switch r.IntN(3) {
		case 0:
			g := guests[r.IntN(len(guests))]
			h := hosts[r.IntN(len(hosts))]
			if _, _, err := s.CreateRelationship(bg, m, "hosts", h, g, nil); err != nil {
				return fmt.Sprintf("edge %s hosts %s: %v", h, g, err)
			}
			return fmt.Sprintf("edge %s hosts %s", h, g)
		case 1:
			b := backups[r.IntN(len(backups))]
			h := machines[r.IntN(len(machines))]
			if _, _, err := s.CreateRelationship(bg, m, "backs-up-to", h, b, nil); err != nil {
				return fmt.Sprintf("edge %s backs-up-to %s: %v", h, b, err)
			}
			return fmt.Sprintf("edge %s backs-up-to %s", h, b)
		default:
			var id, desc string
			err := pool.QueryRow(bg, `SELECT r.id::text, s.slug || ' ' || r.type || ' ' || t.slug FROM relationships r
				JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
				WHERE r.valid_to IS NULL AND r.type IN ('hosts', 'backs-up-to') ORDER BY r.id OFFSET $1 LIMIT 1`, r.IntN(8)).Scan(&id, &desc)
			if err != nil {
				return "end edge: none found"
			}
			if _, err := s.EndRelationship(bg, m, id); err != nil {
				t.Fatalf("end %s: %v", desc, err)
			}
			return "end " + desc
		}
	}
	// Most PATCHes go to machines, guests, backup targets and backup holders: the lookups
	// (owning host, backup holder) tie one entity's checks to another's attributes.
	linked := slices.Concat(machines, guests, backups)
	patchStep := func(r *rand.Rand, check bool) (string, bool) {
		slug := slugs[r.IntN(len(slugs))]
		attrs := map[string]any{}
		switch r.IntN(6) {
		case 0, 1, 2:
			slug = linked[r.IntN(len(linked))]
		case 3:
			// A current backup holder: its os is part of the checks of what it holds.
			_ = pool.QueryRow(bg, `SELECT s.slug FROM relationships r JOIN entities s ON s.id = r.source_id
				WHERE r.type = 'backs-up-to' AND r.valid_to IS NULL ORDER BY s.slug OFFSET $1 LIMIT 1`, r.IntN(4)).Scan(&slug)
			attrs["os"] = pickOf(r, "linux", "darwin", nil)
		}
		for range 1 + r.IntN(3) {
			k, v := patchMenu[r.IntN(len(patchMenu))](r)
			attrs[k] = v
		}
		got, err := s.UpdateAttributes(bg, m, slug, attrs, nil)
		var ve *graph.ValidationError
		if errors.As(err, &ve) {
			return fmt.Sprintf("refused %s %v: %v", slug, attrs, err), false
		}
		if err != nil {
			t.Fatalf("patch %s %v: %v", slug, attrs, err)
		}
		if check {
			read, err := s.GetEntity(bg, slug)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(read)
			if string(a) != string(b) {
				t.Fatalf("patch %s %v answered\n%s\nbut the entity reads\n%s", slug, attrs, a, b)
			}
		}
		return fmt.Sprintf("patch %s %v", slug, attrs), true
	}
	// One writer, checking every answer and, every 20 steps, the check rows.
	for i := 1; i <= 200; i++ {
		var step string
		if r.IntN(8) == 0 {
			step = edgeStep(r)
		} else {
			var ok bool
			if step, ok = patchStep(r, true); ok {
				applied++
			} else {
				refused++
			}
		}
		log = append(log, step)
		if i%20 == 0 {
			requireFullyDerived(t, s, pool, o, fmt.Sprintf("steps %d-%d:\n%v", i-19, i, log[len(log)-20:]))
		}
	}
	// Four writers at once (row locks, the outbox lock and derivation interleaving).
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for range 30 {
				var ok bool
				if r.IntN(8) == 0 {
					edgeStep(r)
					continue
				}
				_, ok = patchStep(r, false)
				mu.Lock()
				if ok {
					applied++
				} else {
					refused++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	requireFullyDerived(t, s, pool, o, "concurrent writers")
	if applied < 150 {
		t.Fatalf("only %d PATCHes applied (%d refused): the sequence tests too little", applied, refused)
	}
}

// TestPatchHolderOSRederivesHeldBackups: a backup target's check names the holder's os, so
// a PATCH of the holder's os re-derives the checks of the targets it holds, in its
// transaction, and announces them.
func TestPatchHolderOSRederivesHeldBackups(t *testing.T) {
	t.Parallel()
	s, pool, o := seededService(t)
	var holder, target, slug string
	err := pool.QueryRow(bg, `SELECT s.slug, t.slug, d.slug FROM relationships r JOIN entities s ON s.id = r.source_id
		JOIN entities t ON t.id = r.target_id JOIN check_defs d ON d.target_id = t.id AND d.kind = 'backup-freshness' AND d.enabled
		WHERE r.type = 'backs-up-to' AND r.valid_to IS NULL ORDER BY s.slug LIMIT 1`).Scan(&holder, &target, &slug)
	if err != nil {
		t.Fatalf("no held backup target with a check in the seed fleet: %v", err)
	}
	osOf := func() string {
		var v string
		if err := pool.QueryRow(bg, `SELECT config->>'os' FROM check_defs WHERE slug = $1`, slug).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := "darwin"
	if osOf() == "darwin" {
		want = "linux"
	}
	var lastEvent int64
	if err := pool.QueryRow(bg, `SELECT coalesce(max(id), 0) FROM events`).Scan(&lastEvent); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateAttributes(bg, graph.Meta{Actor: "tester"}, holder, map[string]any{"os": want}, nil); err != nil {
		t.Fatal(err)
	}
	if got := osOf(); got != want {
		t.Fatalf("%s holds %s; after its os became %s the check %s says os %s", holder, target, want, slug, got)
	}
	var types []string
	rows, err := pool.Query(bg, `SELECT type FROM events WHERE id > $1 ORDER BY id`, lastEvent)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var typ string
		if err := rows.Scan(&typ); err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
	}
	rows.Close()
	if !slices.Equal(types, []string{"entity.updated", "checks.changed"}) {
		t.Errorf("events %v, want entity.updated then checks.changed", types)
	}
	requireFullyDerived(t, s, pool, o, "the holder's os change")
}

// TestPatchAnswersNewStatus: a PATCH that makes an unmonitored entity monitored creates its
// status row in the same batch and answers with it, as a read afterwards does.
func TestPatchAnswersNewStatus(t *testing.T) {
	t.Parallel()
	s, pool, _ := seededService(t)
	var slug string
	err := pool.QueryRow(bg, `SELECT e.slug FROM entities e JOIN entity_types et ON et.name = e.type
		WHERE et.monitoring_none AND e.state = 'active' AND NOT EXISTS (SELECT 1 FROM entity_status st WHERE st.entity_id = e.id)
		ORDER BY e.slug LIMIT 1`).Scan(&slug)
	if err != nil {
		t.Fatalf("no unmonitored entity in the seed fleet: %v", err)
	}
	got, err := s.UpdateAttributes(bg, graph.Meta{Actor: "tester"}, slug, map[string]any{
		"monitoring": []any{map[string]any{"kind": "tcp"}}, "host_address": "127.0.40.1", "port": 22}, nil)
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.GetEntity(bg, slug)
	if err != nil {
		t.Fatal(err)
	}
	if got.Health != "unknown" || read.Health != got.Health || read.Version != got.Version || !read.UpdatedAt.Equal(got.UpdatedAt) {
		t.Errorf("answer health %q version %d at %v; read health %q version %d at %v",
			got.Health, got.Version, got.UpdatedAt, read.Health, read.Version, read.UpdatedAt)
	}
}
