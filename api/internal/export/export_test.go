package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/seed"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/seedfile"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// db is one test database with its graph service.
type db struct {
	pool *pgxpool.Pool
	svc  *graph.Service
}

// demo loads the embedded seeds (ontology, demo inventory, knowledge).
func demo(t *testing.T) (*ontology.Ontology, *seedfile.Inventory, *seedfile.KnowledgeSet) {
	t.Helper()
	o, inv, kn, err := seed.Load(seed.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	return o, inv, kn
}

func newDB(t *testing.T, o *ontology.Ontology) *db {
	t.Helper()
	d := pgtest.New(t)
	svc, err := graph.New(graph.Options{Pool: d.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return &db{pool: d.Pool, svc: svc}
}

func (d *db) ingest(t *testing.T, o *ontology.Ontology, inv *seedfile.Inventory, kn *seedfile.KnowledgeSet) seed.Report {
	t.Helper()
	rep, err := seed.Ingest(context.Background(), d.svc, o, inv, kn, seed.Options{})
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return rep
}

// lived is the demo fleet after some time of use: attributes learned at run time (of every
// JSON kind), a state changed, an entity created and wired in, one destroyed with an edge
// left to it, a task and an edge from the fleet to a runbook (neither of which is fleet).
func lived(t *testing.T) (*db, *ontology.Ontology, *seedfile.KnowledgeSet) {
	t.Helper()
	ctx := context.Background()
	o, inv, kn := demo(t)
	d := newDB(t, o)
	d.ingest(t, o, inv, kn)
	m := graph.Meta{Actor: "op"}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must3 := func(_, _ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.svc.UpdateAttributes(ctx, m, "lxc:jellyfin", map[string]any{
		"gpu": "intel-arc", "kernel": "6.8", "zip": "007", "looks_bool": "true", "empty": "",
		"ports": []any{8096, 8920}, "mixed": []any{1, "2", true, nil, 2.5},
		"limits": map[string]any{"cpu": 2.5, "mem": map[string]any{"soft": 1024, "hard": nil}},
		"cores":  6, "big": int64(4294967297), "ratio": 0.1, "transcode": false, "notes": "line one\nline two\n",
	}, nil))
	must(d.svc.SetState(ctx, m, "lxc:sonarr", "maintenance", nil))
	must3(d.svc.CreateEntity(ctx, m, graph.CreateEntityInput{Type: "service", Name: "whisper", State: "planned",
		Attributes: map[string]any{"unit": "whisper.service", "port": 9000}}))
	must3(d.svc.CreateRelationship(ctx, m, "runs-on", "service:whisper", "lxc:jellyfin", nil))
	must3(d.svc.CreateEntity(ctx, m, graph.CreateEntityInput{Type: "site", Name: "attic"}))
	must3(d.svc.CreateRelationship(ctx, m, "located-in", "proxmox-host:atlas", "site:attic", nil))
	must(d.svc.SetState(ctx, m, "site:attic", "destroyed", nil))
	must3(d.svc.CreateEntity(ctx, m, graph.CreateEntityInput{Type: "task", Name: "upgrade-jellyfin",
		Attributes: map[string]any{"goal": "upgrade jellyfin"}}))
	must3(d.svc.CreateRelationship(ctx, m, "involves", "task:upgrade-jellyfin", "lxc:jellyfin", nil))
	must3(d.svc.CreateRelationship(ctx, m, "depends-on", "lxc:jellyfin", "runbook:stuck-probe", nil))
	return d, o, kn
}

func readFleet(t *testing.T, d *db, o *ontology.Ontology, types ...string) (*Fleet, *seedfile.Inventory, []byte) {
	t.Helper()
	f, err := Read(context.Background(), d.pool, o, types)
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.YAML()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := seedfile.ParseInventoryFile("fleet.yaml", out)
	if err != nil {
		t.Fatalf("the export does not parse: %v\n%s", err, out)
	}
	return f, inv, out
}

// fingerprint is every table a seed could write, counted, plus the entities' versions.
func fingerprint(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT count(*) FROM entities), (SELECT coalesce(sum(version), 0) FROM entities),
		(SELECT md5(coalesce(string_agg(slug || state || attributes::text, ',' ORDER BY slug), '')) FROM entities),
		(SELECT count(*) FROM relationships), (SELECT count(*) FROM check_defs),
		(SELECT count(*) FROM check_defs WHERE enabled), (SELECT count(*) FROM knowledge_entities),
		(SELECT count(*) FROM audit_log), (SELECT count(*) FROM events))`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExportReseedIsNoOp: the export of a fleet, seeded back into its own database, writes
// nothing; and it leaves out what is not fleet.
func TestExportReseedIsNoOp(t *testing.T) {
	t.Parallel()
	d, o, kn := lived(t)
	f, inv, out := readFleet(t, d, o)

	// What is in it and what is not.
	for _, e := range f.Entities {
		for _, root := range ExcludedRoots {
			if o.IsA(e.Type, root) {
				t.Errorf("%s is exported (a %s)", e.Slug(), root)
			}
		}
		if e.State == "destroyed" {
			t.Errorf("destroyed %s is exported", e.Slug())
		}
	}
	slugs := map[string]Entity{}
	for _, e := range f.Entities {
		slugs[e.Slug()] = e
	}
	for _, want := range []string{"lxc:jellyfin", "service:whisper", "agent:nomos", "proxmox-host:atlas"} {
		if _, ok := slugs[want]; !ok {
			t.Errorf("%s is not exported", want)
		}
	}
	if _, ok := slugs["site:attic"]; ok {
		t.Error("the destroyed site:attic is exported")
	}
	if s := slugs["lxc:sonarr"].State; s != "maintenance" {
		t.Errorf("lxc:sonarr exported in state %q", s)
	}
	if s := slugs["service:whisper"].State; s != "planned" {
		t.Errorf("service:whisper exported in state %q", s)
	}
	for _, r := range f.Edges {
		if r.Type == AboutEdge || strings.HasPrefix(r.Target, "site:attic") || strings.HasPrefix(r.Source, "task:") ||
			strings.HasPrefix(r.Target, "runbook:") {
			t.Errorf("edge %+v is exported", r)
		}
		if _, ok := slugs[r.Source]; !ok {
			t.Errorf("edge %+v: source not exported", r)
		}
		if _, ok := slugs[r.Target]; !ok {
			t.Errorf("edge %+v: target not exported", r)
		}
	}
	if !slices.Contains(f.Edges, Edge{Type: "runs-on", Source: "service:whisper", Target: "lxc:jellyfin"}) {
		t.Error("the run-time edge service:whisper -runs-on-> lxc:jellyfin is not exported")
	}
	for _, want := range []string{"# Oikos fleet inventory", "oikos seed --inventory fleet.yaml", `kernel: "6.8"`,
		`zip: "007"`, `looks_bool: "true"`, "big: 4294967297", "ports: [8096, 8920]", "transcode: false"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the export lacks %q", want)
		}
	}

	// Deterministic: the same snapshot renders the same bytes.
	f2, err := Read(context.Background(), d.pool, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	f2.At = f.At
	if out2, _ := f2.YAML(); !bytes.Equal(out, out2) {
		t.Error("two exports of the same fleet differ")
	}

	// Seeded back (as `oikos seed --inventory fleet.yaml` does, with the knowledge seed):
	// nothing is written.
	if err := seed.Validate(o, inv, kn); err != nil {
		t.Fatalf("the export does not validate: %v", err)
	}
	before := fingerprint(t, d.pool)
	rep := d.ingest(t, o, inv, kn)
	if rep.Created != 0 || rep.Updated != 0 || rep.EdgesCreated != 0 || rep.ChecksChanged != 0 {
		t.Errorf("re-seeding the export wrote: %s", rep)
	}
	if after := fingerprint(t, d.pool); after != before {
		t.Errorf("re-seeding the export changed the database:\n%s\n%s", before, after)
	}
	diff, err := seed.Diff(context.Background(), d.pool, o, inv, kn)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.Missing)+len(diff.Changed) != 0 {
		t.Errorf("drift against the export: %+v", diff)
	}
}

// rows are the fleet's rows of a database, keyed without ids: entity slug → type, name,
// state and attributes (jsonb's canonical text), and the live edges between fleet entities.
type rows struct {
	entities map[string]string
	edges    []string
	checks   []string
}

func fleetRows(t *testing.T, pool *pgxpool.Pool, o *ontology.Ontology) rows {
	t.Helper()
	ctx := context.Background()
	types, err := FleetTypes(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rows{entities: map[string]string{}}
	q, err := pool.Query(ctx, `SELECT slug, type, name, state, attributes::text FROM entities
		WHERE type = ANY($1) AND state <> 'destroyed'`, types)
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var slug, typ, name, state, attrs string
		if err := q.Scan(&slug, &typ, &name, &state, &attrs); err != nil {
			t.Fatal(err)
		}
		r.entities[slug] = fmt.Sprintf("%s %s %s %s", typ, name, state, attrs)
	}
	q.Close()
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	collect := func(sql string, args ...any) []string {
		q, err := pool.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		var out []string
		for q.Next() {
			var s string
			if err := q.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := q.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(out)
		return out
	}
	r.edges = collect(`SELECT s.slug || ' -' || r.type || '-> ' || t.slug FROM relationships r
		JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
		WHERE r.valid_to IS NULL AND r.type <> 'about' AND s.type = ANY($1) AND t.type = ANY($1)
		  AND s.state <> 'destroyed' AND t.state <> 'destroyed'`, types)
	// The checks the seed derives from those entities come out the same too.
	r.checks = collect(`SELECT d.slug || ' ' || d.kind || ' ' || t.slug FROM check_defs d
		JOIN entities t ON t.id = d.target_id WHERE d.enabled AND t.type = ANY($1) AND t.state <> 'destroyed'`, types)
	return r
}

// TestExportSeedsFreshDatabase: the export, seeded into an empty database that holds only
// the ontology and the knowledge seed, reproduces the fleet row for row.
func TestExportSeedsFreshDatabase(t *testing.T) {
	t.Parallel()
	src, o, kn := lived(t)
	_, inv, _ := readFleet(t, src, o)

	dst := newDB(t, o)
	// The ontology and the knowledge seed alone (their about links need the fleet, which
	// is not there yet) ...
	bare := *kn
	bare.Documents = slices.Clone(kn.Documents)
	for i := range bare.Documents {
		bare.Documents[i].About = nil
	}
	dst.ingest(t, o, nil, &bare)
	// ... then `oikos seed --inventory fleet.yaml`.
	rep := dst.ingest(t, o, inv, kn)
	if rep.Created != len(inv.Entities) {
		t.Errorf("seeding the export into a fresh database: %s; want %d created", rep, len(inv.Entities))
	}

	want, got := fleetRows(t, src.pool, o), fleetRows(t, dst.pool, o)
	if len(want.entities) == 0 || len(want.edges) == 0 || len(want.checks) == 0 {
		t.Fatalf("nothing to compare: %d entities, %d edges, %d checks", len(want.entities), len(want.edges), len(want.checks))
	}
	for _, slug := range slices.Sorted(maps.Keys(want.entities)) {
		if got.entities[slug] != want.entities[slug] {
			t.Errorf("%s:\n  source %s\n  fresh  %s", slug, want.entities[slug], got.entities[slug])
		}
	}
	for slug := range got.entities {
		if _, ok := want.entities[slug]; !ok {
			t.Errorf("%s is in the fresh database only", slug)
		}
	}
	if !slices.Equal(want.edges, got.edges) {
		t.Errorf("edges differ:\n  source %d %v\n  fresh  %d %v", len(want.edges), want.edges, len(got.edges), got.edges)
	}
	if !slices.Equal(want.checks, got.checks) {
		t.Errorf("checks differ:\n  source %d %v\n  fresh  %d %v", len(want.checks), want.checks, len(got.checks), got.checks)
	}
	// And the fresh database exports the same file.
	_, _, a := readFleet(t, src, o)
	_, _, b := readFleet(t, dst, o)
	strip := func(b []byte) string {
		lines := strings.Split(string(b), "\n")
		return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "# Exported at ") }), "\n")
	}
	if strip(a) != strip(b) {
		t.Error("the fresh database's export differs from the source's")
	}
}

// TestExportTypeFilter: --type keeps the types named and their subtypes, and the partial
// file still seeds (its edges to other types are left out).
func TestExportTypeFilter(t *testing.T) {
	t.Parallel()
	o, inv, kn := demo(t)
	d := newDB(t, o)
	d.ingest(t, o, inv, kn)
	seeded := map[string]int{}
	for _, e := range inv.Entities {
		seeded[e.Type]++
	}

	for _, c := range []struct {
		types []string
		roots []string
	}{
		{[]string{"guest"}, []string{"guest"}},
		{[]string{"service", "ingress-route"}, []string{"service", "ingress-route"}},
		{[]string{"machine"}, []string{"machine"}},
	} {
		f, part, _ := readFleet(t, d, o, c.types...)
		got := map[string]int{}
		for _, e := range f.Entities {
			got[e.Type]++
		}
		want := map[string]int{}
		for typ, n := range seeded {
			if slices.ContainsFunc(c.roots, func(r string) bool { return o.IsA(typ, r) }) {
				want[typ] = n
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("--type %v: exported %v, want %v", c.types, got, want)
		}
		if len(want) < 2 {
			t.Errorf("--type %v: only %v; the case does not show subtypes", c.types, want)
		}
		in := map[string]bool{}
		for _, e := range f.Entities {
			in[e.Slug()] = true
		}
		for _, r := range f.Edges {
			if !in[r.Source] || !in[r.Target] {
				t.Errorf("--type %v: edge %+v leaves the export", c.types, r)
			}
		}
		// The partial file seeds: into its own database as a no-op, into a fresh one at all.
		// (Without the knowledge seed: its about links name entities of every type, which a
		// partial inventory does not declare.)
		if rep := d.ingest(t, o, part, nil); rep.Created+rep.Updated+rep.EdgesCreated+rep.ChecksChanged != 0 {
			t.Errorf("--type %v: re-seed wrote %s", c.types, rep)
		}
		fresh := newDB(t, o)
		if rep := fresh.ingest(t, o, part, nil); rep.Created != len(part.Entities) || rep.EdgesCreated != len(part.Relationships) {
			t.Errorf("--type %v: fresh seed %s; want %d entities and %d edges", c.types, rep, len(part.Entities), len(part.Relationships))
		}
	}
	// guest and service together: edges between them (service -runs-on-> lxc) are kept.
	f, _, _ := readFleet(t, d, o, "guest", "service")
	if !slices.ContainsFunc(f.Edges, func(r Edge) bool { return r.Type == "runs-on" }) {
		t.Errorf("--type guest,service keeps no runs-on edge: %v", f.Edges)
	}
}

// TestExportUnknownType: an unknown type, or a type that is not fleet, is a 422 naming the
// field type.
func TestExportUnknownType(t *testing.T) {
	t.Parallel()
	o, _, _ := demo(t)
	d := newDB(t, o)
	for _, c := range []struct {
		types    []string
		sentinel error
		detail   string
	}{
		{[]string{"lxc", "spaceship"}, ontology.ErrUnknownType, `unknown entity type "spaceship"`},
		{[]string{"check"}, apierr.ErrInvalid, "not part of the fleet export"},
		{[]string{"knowledge"}, apierr.ErrInvalid, "not part of the fleet export"},
		{[]string{"runbook"}, apierr.ErrInvalid, "not part of the fleet export"},
	} {
		_, err := Read(context.Background(), d.pool, o, c.types)
		var fe *apierr.FieldError
		if !errors.As(err, &fe) || fe.Field != "type" || !errors.Is(err, c.sentinel) {
			t.Errorf("%v: %v", c.types, err)
			continue
		}
		p, _ := request.ToProblem(err)
		if p.Status != http.StatusUnprocessableEntity || p.Field != "type" || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("%v: problem %+v", c.types, p)
		}
	}
}
