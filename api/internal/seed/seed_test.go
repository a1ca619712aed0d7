package seed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/seedfile"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type fixture struct {
	pool *pgxpool.Pool
	svc  *graph.Service
	o    *ontology.Ontology
	inv  *seedfile.Inventory
	kn   *seedfile.KnowledgeSet
}

func embedded(t testing.TB) (*ontology.Ontology, *seedfile.Inventory, *seedfile.KnowledgeSet) {
	t.Helper()
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatalf("parse ontology: %v", err)
	}
	inv, err := seedfile.ParseInventory(seeds.Inventory())
	if err != nil {
		t.Fatalf("parse inventory: %v", err)
	}
	kn, err := seedfile.ParseKnowledge(seeds.Knowledge())
	if err != nil {
		t.Fatalf("parse knowledge: %v", err)
	}
	return o, inv, kn
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := pgtest.New(t)
	o, inv, kn := embedded(t)
	svc, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{pool: db.Pool, svc: svc, o: o, inv: inv, kn: kn}
}

// tables are every table an ingest may write.
var tables = []string{"entity_types", "relationship_types", "entities", "relationships", "entity_status",
	"check_defs", "knowledge_entities", "events", "audit_log", "idempotency_keys", "metric_samples", "signals"}

// counts returns the row count of every table plus a fingerprint of mutable columns, so an
// in-place update (same count, new version) is noticed too.
func counts(t testing.TB, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	ctx := context.Background()
	for _, tb := range tables {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+tb).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", tb, err)
		}
		out[tb] = n
	}
	var v int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(version), 0) FROM entities`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	out["sum(entities.version)"] = v
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM check_defs WHERE enabled`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	out["enabled check_defs"] = v
	var ts int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(extract(epoch FROM updated_at) * 1e6), 0)::bigint FROM entity_types`).Scan(&ts); err != nil {
		t.Fatal(err)
	}
	out["max(entity_types.updated_at)"] = ts
	return out
}

func TestDoubleIngestIsNoOp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rep, err := Ingest(ctx, f.svc, f.o, f.inv, f.kn, Options{})
	if err != nil {
		t.Fatalf("first ingest: %v", err)
	}
	if rep.Created != len(f.inv.Entities)+len(f.kn.Documents) || rep.EdgesCreated == 0 || rep.ChecksChanged == 0 || !rep.OntologyChanged {
		t.Fatalf("first ingest report: %+v", rep)
	}
	t.Logf("first ingest: %s", rep)
	before := counts(t, f.pool)
	t.Logf("counts: %v", before)
	rep2, err := Ingest(ctx, f.svc, f.o, f.inv, f.kn, Options{})
	if err != nil {
		t.Fatalf("second ingest: %v", err)
	}
	after := counts(t, f.pool)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %d before the second ingest, %d after", k, v, after[k])
		}
	}
	want := Report{Unchanged: len(f.inv.Entities) + len(f.kn.Documents)}
	rep2.Duration = 0
	if rep2 != want {
		t.Errorf("second ingest report = %+v, want %+v", rep2, want)
	}
	d, err := Diff(ctx, f.pool, f.o, f.inv, f.kn)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Empty() {
		t.Errorf("diff after ingest is not empty: %+v", d)
	}
}

// mustIngest ingests and fails the test on error.
func mustIngest(t testing.TB, f *fixture, inv *seedfile.Inventory, kn *seedfile.KnowledgeSet) Report {
	t.Helper()
	rep, err := Ingest(context.Background(), f.svc, f.o, inv, kn, Options{})
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return rep
}

func TestSeededChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	mustIngest(t, f, f.inv, f.kn)

	// 21 ingress routes give 21 distinct http checks, each on its own route.
	routes := 0
	for _, e := range f.inv.Entities {
		if e.Type == "ingress-route" {
			routes++
		}
	}
	var defs, slugs, targets int
	if err := f.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT d.slug), count(DISTINCT d.target_id)
		FROM check_defs d JOIN entities t ON t.id = d.target_id WHERE t.type = 'ingress-route' AND d.kind = 'http' AND d.enabled`).
		Scan(&defs, &slugs, &targets); err != nil {
		t.Fatal(err)
	}
	if routes != 21 || defs != 21 || slugs != 21 || targets != 21 {
		t.Errorf("%d routes -> %d http checks, %d slugs, %d targets; want 21 each", routes, defs, slugs, targets)
	}

	// lxc:jellyfin and service:jellyfin keep their own checks.
	checksOf := func(slug string) map[string]bool {
		rows, err := f.pool.Query(ctx, `SELECT d.slug FROM check_defs d JOIN entities t ON t.id = d.target_id WHERE t.slug = $1 AND d.enabled`, slug)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]bool{}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out[s] = true
		}
		return out
	}
	lxc, svc := checksOf("lxc:jellyfin"), checksOf("service:jellyfin")
	if len(lxc) != 4 || len(svc) != 2 {
		t.Errorf("lxc:jellyfin checks %v, service:jellyfin checks %v", lxc, svc)
	}
	for s := range lxc {
		if svc[s] {
			t.Errorf("check %s shared by lxc:jellyfin and service:jellyfin", s)
		}
	}

	// Check rows point at the monitored entity; check entities never get status and never
	// dangle; monitored entities have a status row.
	var bad int
	if err := f.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM check_defs d JOIN entities c ON c.id = d.entity_id JOIN entities t ON t.id = d.target_id
			WHERE c.type <> 'check' OR t.type = 'check' OR c.slug <> d.slug) +
		(SELECT count(*) FROM entity_status st JOIN entities e ON e.id = st.entity_id WHERE e.type = 'check') +
		(SELECT count(*) FROM entities c WHERE c.type = 'check' AND NOT EXISTS (SELECT 1 FROM check_defs d WHERE d.entity_id = c.id)) +
		(SELECT count(*) FROM check_defs d WHERE NOT EXISTS (SELECT 1 FROM entity_status st WHERE st.entity_id = d.target_id))`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("%d violations of the check row invariants", bad)
	}

	// A re-seed derives no duplicate and keeps every check's id.
	ids := func() map[string]string {
		rows, err := f.pool.Query(ctx, `SELECT slug, entity_id::text FROM check_defs`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var s, id string
			if err := rows.Scan(&s, &id); err != nil {
				t.Fatal(err)
			}
			out[s] = id
		}
		return out
	}
	first := ids()
	if rep := mustIngest(t, f, f.inv, f.kn); rep.ChecksChanged != 0 {
		t.Errorf("re-seed changed %d checks", rep.ChecksChanged)
	}
	second := ids()
	if len(first) != len(second) {
		t.Errorf("%d checks before the re-seed, %d after", len(first), len(second))
	}
	for s, id := range first {
		if second[s] != id {
			t.Errorf("check %s changed entity id %s -> %s", s, id, second[s])
		}
	}
}

// TestRuntimeFactsSurvive: attributes learned at run time are kept by a re-seed; a seed
// value that differs wins, with one audit row and event for the entity.
func TestRuntimeFactsSurvive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	mustIngest(t, f, f.inv, f.kn)
	if _, err := f.svc.UpdateAttributes(ctx, graph.Meta{Actor: "agent"}, "lxc:jellyfin", map[string]any{"gpu": "intel-arc", "cores": 8}, nil); err != nil {
		t.Fatal(err)
	}
	// The seed now says 6 cores; run time said 8 and learned gpu.
	_, inv, _ := embedded(t)
	for i := range inv.Entities {
		if inv.Entities[i].Slug() == "lxc:jellyfin" {
			inv.Entities[i].Attributes["cores"] = 6
		}
	}
	before := counts(t, f.pool)
	rep := mustIngest(t, f, inv, f.kn)
	if rep.Updated != 1 || rep.Created != 0 || rep.EdgesCreated != 0 {
		t.Errorf("report %s", rep)
	}
	after := counts(t, f.pool)
	if after["audit_log"] != before["audit_log"]+1 || after["events"] != before["events"]+1 {
		t.Errorf("audit %d->%d, events %d->%d; want one more of each", before["audit_log"], after["audit_log"], before["events"], after["events"])
	}
	e, err := f.svc.GetEntity(ctx, "lxc:jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	if e.Attributes["gpu"] != "intel-arc" || e.Attributes["cores"] != float64(6) || e.Attributes["vmid"] != float64(101) {
		t.Errorf("attributes after re-seed: %v", e.Attributes)
	}
	// The state is seeded only on creation: a guest put into maintenance stays there.
	if _, err := f.svc.SetState(ctx, graph.Meta{Actor: "op"}, "lxc:jellyfin", "maintenance", nil); err != nil {
		t.Fatal(err)
	}
	mustIngest(t, f, inv, f.kn)
	if e, _ := f.svc.GetEntity(ctx, "lxc:jellyfin"); e.State != "maintenance" {
		t.Errorf("re-seed reset the state to %s", e.State)
	}
}

func TestMalformedSeedChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	files := Embedded()
	inventory := string(files.Inventory)
	replace := func(old, new string) []byte {
		if !strings.Contains(inventory, old) {
			t.Fatalf("inventory has no %q", old)
		}
		return []byte(strings.Replace(inventory, old, new, 1))
	}
	jellyfin := "  - {type: lxc, name: jellyfin, attributes: {vmid: 101,"
	hostsEdge := `  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:jellyfin"}`
	// The lines are found in the inventory itself, so the demo fleet can grow
	// without these cases going stale.
	at := func(text string) string {
		i := strings.Index(inventory, text)
		if i < 0 {
			t.Fatalf("inventory has no %q", text)
		}
		return fmt.Sprintf("inventory.yaml:%d", strings.Count(inventory[:i], "\n")+1)
	}
	jellyfinLine, hostsLine := at(jellyfin), at(hostsEdge)
	nextLine := fmt.Sprintf("inventory.yaml:%d", strings.Count(inventory[:strings.Index(inventory, jellyfin)], "\n")+2)
	cases := []struct {
		name      string
		inventory []byte
		knowledge []byte
		want      []string // substrings of the error
	}{
		{"bad yaml", replace("entities:", "entities: [\n  - {"), nil, []string{"inventory.yaml:", "invalid YAML"}},
		{"unknown type", replace(jellyfin, "  - {type: spaceship, name: jellyfin, attributes: {vmid: 101,"), nil,
			[]string{jellyfinLine, "spaceship:jellyfin", "type", "unknown entity type"}},
		{"forbidden edge", replace(hostsEdge,
			`  - {type: hosts, source: "service:jellyfin", target: "lxc:jellyfin"}`), nil,
			[]string{hostsLine, "service:jellyfin -hosts-> lxc:jellyfin", "forbids"}},
		{"duplicate slug", replace(jellyfin, jellyfin[:len(jellyfin)-len(" attributes: {vmid: 101,")]+" attributes: {vmid: 999}}\n"+jellyfin), nil,
			[]string{nextLine, "lxc:jellyfin", "duplicate slug"}},
		{"wrong attribute type", replace(jellyfin, "  - {type: lxc, name: jellyfin, attributes: {vmid: one,"), nil,
			[]string{jellyfinLine, "lxc:jellyfin", "attributes.vmid", "expected integer"}},
		{"scheduler-owned attribute", replace(jellyfin, "  - {type: lxc, name: jellyfin, attributes: {health: up, vmid: 101,"), nil,
			[]string{jellyfinLine, "lxc:jellyfin", "attributes.health", "scheduler"}},
		{"unknown edge endpoint", replace(`target: "lxc:jellyfin"}`, `target: "lxc:nope"}`), nil,
			[]string{hostsLine, "lxc:nope", "target"}},
		{"knowledge about unknown entity", nil, []byte("documents:\n  - slug: runbook:x\n    kind: runbook\n    title: X\n    about: [lxc:nope]\n    body: text\n"),
			[]string{"knowledge.yaml:2", "runbook:x", "about"}},
	}
	// Some of it is in the database already; a failed ingest must change nothing at all.
	half := *f.inv
	half.Entities = half.Entities[:len(half.Entities)/2]
	half.Relationships = nil
	mustIngest(t, f, &half, nil)
	for _, c := range cases {
		before := counts(t, f.pool)
		fl := Embedded()
		if c.inventory != nil {
			fl.Inventory = c.inventory
		}
		if c.knowledge != nil {
			fl.Knowledge = c.knowledge
		}
		o, inv, kn, err := Load(fl)
		if err == nil {
			_, err = Ingest(ctx, f.svc, o, inv, kn, Options{})
		}
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !errors.Is(err, seedfile.ErrInvalidSeed) {
			t.Errorf("%s: %v is not a seed error", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
		after := counts(t, f.pool)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: %s changed %d -> %d", c.name, k, v, after[k])
			}
		}
	}
}

func TestDiffReportsDrift(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	mustIngest(t, f, f.inv, f.kn)
	m := graph.Meta{Actor: "op"}
	if _, err := f.svc.UpdateAttributes(ctx, m, "lxc:jellyfin", map[string]any{"cores": 12}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.CreateEntity(ctx, m, graph.CreateEntityInput{Type: "site", Name: "attic"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.CreateRelationship(ctx, m, "depends-on", "lxc:jellyfin", "site:attic", nil); err != nil {
		t.Fatal(err)
	}
	_, inv, kn := embedded(t)
	inv.Entities = append(inv.Entities, seedfile.EntitySeed{Type: "site", Name: "garage", Attributes: map[string]any{}})
	kn.Documents[0].Title = "A new title"
	before := counts(t, f.pool)
	d, err := Diff(ctx, f.pool, f.o, inv, kn)
	if err != nil {
		t.Fatal(err)
	}
	sameCounts := counts(t, f.pool)
	for k, v := range before {
		if sameCounts[k] != v {
			t.Errorf("diff wrote: %s %d -> %d", k, v, sameCounts[k])
		}
	}
	render := func(items []DiffItem) string {
		var parts []string
		for _, i := range items {
			parts = append(parts, i.String())
		}
		return strings.Join(parts, "\n")
	}
	if len(d.Missing) != 1 || d.Missing[0].Ref != "site:garage" {
		t.Errorf("missing:\n%s", render(d.Missing))
	}
	if len(d.Extra) != 2 || d.Extra[0].Ref != "site:attic" || d.Extra[1].Ref != "lxc:jellyfin -depends-on-> site:attic" {
		t.Errorf("extra:\n%s", render(d.Extra))
	}
	changed := render(d.Changed)
	if len(d.Changed) != 2 || !strings.Contains(changed, "lxc:jellyfin attributes.cores: seed 4, database 12") ||
		!strings.Contains(changed, kn.Documents[0].Slug+" title") {
		t.Errorf("changed:\n%s", changed)
	}
}
