package topology_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/seed"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/api/internal/topology"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/seedfile"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var meta = graph.Meta{Actor: "test"}

// fixture is one test's database with the graph service, the SQL read model (the
// reference) and an index.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	svc    *graph.Service
	onto   *ontology.Ontology
	reader *readmodel.Reader
	idx    *topology.Index
}

func newFixture(t *testing.T, opts ...func(*topology.Options)) *fixture {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	o := apitest.SeedOntology(t)
	svc, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SyncOntology(ctx, o); err != nil {
		t.Fatal(err)
	}
	topts := topology.Options{Pool: db.Pool, Forward: readmodel.BlastForward, Reverse: readmodel.BlastReverse, Logger: zerolog.Nop()}
	for _, f := range opts {
		f(&topts)
	}
	idx, err := topology.New(topts)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, pool: db.Pool, svc: svc, onto: o,
		reader: readmodel.New(db.Pool, func() *ontology.Ontology { return o }), idx: idx}
}

func (f *fixture) entity(typ, name string, attrs map[string]any) string {
	f.t.Helper()
	e, _, err := f.svc.CreateEntity(f.ctx, meta, graph.CreateEntityInput{Type: typ, Name: name, Attributes: attrs})
	if err != nil {
		f.t.Fatalf("create %s:%s: %v", typ, name, err)
	}
	return e.ID
}

func (f *fixture) link(typ, src, dst string) string {
	f.t.Helper()
	r, _, err := f.svc.CreateRelationship(f.ctx, meta, typ, src, dst, nil)
	if err != nil {
		f.t.Fatalf("link %s -%s-> %s: %v", src, typ, dst, err)
	}
	return r.ID
}

func (f *fixture) unlink(relID string) {
	f.t.Helper()
	if _, err := f.svc.EndRelationship(f.ctx, meta, relID); err != nil {
		f.t.Fatalf("end %s: %v", relID, err)
	}
}

func (f *fixture) id(slug string) string {
	f.t.Helper()
	var id string
	if err := f.pool.QueryRow(f.ctx, `SELECT id::text FROM entities WHERE slug = $1`, slug).Scan(&id); err != nil {
		f.t.Fatalf("id of %s: %v", slug, err)
	}
	return id
}

// radius is the index's answer as the api serves it.
func (f *fixture) radius(rootID string, depth int) []readmodel.Affected {
	f.t.Helper()
	r, err := f.idx.Dependents(f.ctx, rootID, depth)
	if err != nil {
		f.t.Fatal(err)
	}
	out, version, err := f.reader.AffectedEntities(f.ctx, r.IDs, r.Depths)
	if err != nil {
		f.t.Fatal(err)
	}
	if version < r.Changes {
		f.t.Fatalf("index at version %d ahead of the database's %d", r.Changes, version)
	}
	return out
}

// same fails unless the index and the recursive query answer exactly the same items.
func (f *fixture) same(rootID string, depth int) []readmodel.Affected {
	f.t.Helper()
	want, err := f.reader.BlastRadius(f.ctx, rootID, depth)
	if err != nil {
		f.t.Fatal(err)
	}
	got := f.radius(rootID, depth)
	if !reflect.DeepEqual(got, want) {
		f.t.Fatalf("root %s depth %d:\n index %v\n sql   %v", rootID, depth, slugs(got), slugs(want))
	}
	return got
}

func slugs(items []readmodel.Affected) []string {
	out := make([]string, len(items))
	for i, x := range items {
		out[i] = fmt.Sprintf("%s@%d", x.Slug, x.Depth)
	}
	return out
}

func (f *fixture) stats() topology.Stats { return f.idx.Stats() }

// TestFreshness: every write path is visible to the next walk — the graph service's create
// and end (applied from their events, without a rebuild), a seed ingest, and writes that
// bypass the service (a raw insert, a cascade delete), which force a rebuild.
func TestFreshness(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	host := f.entity("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	f.entity("lxc", "web", map[string]any{"vmid": 101, "host": "atlas"})
	f.entity("service", "app", nil)
	f.link("hosts", "proxmox-host:atlas", "lxc:web")
	if got := slugs(f.same(host, 6)); !reflect.DeepEqual(got, []string{"lxc:web@1"}) {
		t.Fatalf("initial radius %v", got)
	}
	if s := f.stats(); s.Builds != 1 || s.Edges != 1 {
		t.Fatalf("after the first walk: %+v", s)
	}

	runsOn := f.link("runs-on", "service:app", "lxc:web")
	if got := slugs(f.same(host, 6)); !reflect.DeepEqual(got, []string{"lxc:web@1", "service:app@2"}) {
		t.Fatalf("after create: %v", got)
	}
	f.link("manages", "service:app", "lxc:web") // not a dependency: counted, not kept
	f.unlink(runsOn)
	if got := slugs(f.same(host, 6)); !reflect.DeepEqual(got, []string{"lxc:web@1"}) {
		t.Fatalf("after end: %v", got)
	}
	if s := f.stats(); s.Builds != 1 || s.Applied != 3 {
		t.Fatalf("service writes should be applied from their events without a rebuild: %+v", s)
	}

	// A seed ingest: new entities and edges in one bulk transaction.
	inv := &seedfile.Inventory{
		Entities: []seedfile.EntitySeed{
			{Type: "proxmox-host", Name: "atlas", Attributes: map[string]any{"node": "atlas"}},
			{Type: "lxc", Name: "db", Attributes: map[string]any{"vmid": 102, "host": "atlas"}},
			{Type: "database", Name: "pg", Attributes: map[string]any{"engine": "postgres"}},
		},
		Relationships: []seedfile.EdgeSeed{
			{Type: "hosts", Source: "proxmox-host:atlas", Target: "lxc:db"},
			{Type: "runs-on", Source: "database:pg", Target: "lxc:db"},
		},
	}
	if _, err := seed.Ingest(f.ctx, f.svc, f.onto, inv, nil, seed.Options{Logger: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	if got := slugs(f.same(host, 6)); !reflect.DeepEqual(got, []string{"lxc:db@1", "lxc:web@1", "database:pg@2"}) {
		t.Fatalf("after seed ingest: %v", got)
	}
	if s := f.stats(); s.Builds != 1 || s.Applied != 5 {
		t.Fatalf("a seed ingest should be applied from its events: %+v", s)
	}

	// A write that bypasses the graph service (no event): the count moves, so the index
	// rebuilds rather than answer stale.
	if _, err := f.pool.Exec(f.ctx, `INSERT INTO relationships (id, type, source_id, target_id)
		VALUES (gen_random_uuid(), 'runs-on', $1, $2)`, f.id("service:app"), f.id("lxc:web")); err != nil {
		t.Fatal(err)
	}
	if got := slugs(f.same(host, 6)); !reflect.DeepEqual(got, []string{"lxc:db@1", "lxc:web@1", "database:pg@2", "service:app@2"}) {
		t.Fatalf("after a raw insert: %v", got)
	}
	if s := f.stats(); s.Builds != 2 {
		t.Fatalf("a write without an event should force a rebuild: %+v", s)
	}
	// A cascade: deleting an entity deletes its edges without any event.
	if _, err := f.pool.Exec(f.ctx, `DELETE FROM entities WHERE slug = 'lxc:db'`); err != nil {
		t.Fatal(err)
	}
	if got := slugs(f.same(host, 6)); !reflect.DeepEqual(got, []string{"lxc:web@1", "service:app@2"}) {
		t.Fatalf("after a cascade delete: %v", got)
	}
	if s := f.stats(); s.Builds != 3 {
		t.Fatalf("a cascade should force a rebuild: %+v", s)
	}
	// A row change with an event whose payload lacks the edge's ends: the counts match, but
	// the index must not trust the event.
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	relID, err := graph.NewID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(f.ctx, `INSERT INTO relationships (id, type, source_id, target_id) VALUES ($1, 'runs-on', $2, $3)`,
		relID, f.id("database:pg"), f.id("lxc:web")); err != nil {
		t.Fatal(err)
	}
	if _, err := eventbus.Append(f.ctx, tx, eventbus.Event{Type: topology.EventCreated}, map[string]string{"id": relID, "type": "runs-on"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := slugs(f.same(host, 6)); !reflect.DeepEqual(got, []string{"lxc:web@1", "database:pg@2", "service:app@2"}) {
		t.Fatalf("after an event without ends: %v", got)
	}
	if s := f.stats(); s.Builds != 4 {
		t.Fatalf("an event without ends should force a rebuild: %+v", s)
	}
	// An attribute-only update of an edge changes nothing in the topology.
	if _, err := f.pool.Exec(f.ctx, `UPDATE relationships SET attributes = '{"note": "x"}'`); err != nil {
		t.Fatal(err)
	}
	f.same(host, 6)
	if s := f.stats(); s.Builds != 4 {
		t.Fatalf("an attribute update should not rebuild: %+v", s)
	}
}

// TestWalkThenCheck: the api's fast path walks without reading the version and learns it
// from the rows query; a change committed meanwhile must show as a newer version.
func TestWalkThenCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	host := f.entity("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	f.entity("lxc", "web", map[string]any{"vmid": 101, "host": "atlas"})
	if _, ok := f.idx.Walk(host, 3); ok {
		t.Fatal("Walk before the first build answered")
	}
	f.same(host, 3)
	r, ok := f.idx.Walk(host, 3)
	if !ok {
		t.Fatal("Walk after a build did not answer")
	}
	if _, v, err := f.reader.AffectedEntities(f.ctx, r.IDs, r.Depths); err != nil || v != r.Changes {
		t.Fatalf("unchanged graph: version %d, walk at %d (%v)", v, r.Changes, err)
	}
	f.link("hosts", "proxmox-host:atlas", "lxc:web")
	r, ok = f.idx.Walk(host, 3)
	if !ok || len(r.IDs) != 0 {
		t.Fatalf("stale walk: ok %v, %d reached", ok, len(r.IDs))
	}
	if _, v, err := f.reader.AffectedEntities(f.ctx, r.IDs, r.Depths); err != nil || v <= r.Changes {
		t.Fatalf("after a new edge: version %d, walk at %d (%v); the change went unnoticed", v, r.Changes, err)
	}
	if got := slugs(f.same(host, 3)); !reflect.DeepEqual(got, []string{"lxc:web@1"}) {
		t.Fatalf("after catching up: %v", got)
	}
}

// TestCatchUpLimit: more events than MaxCatchUp since the last walk make a rebuild instead.
func TestCatchUpLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *topology.Options) { o.MaxCatchUp = 2 })
	host := f.entity("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	f.same(host, 3)
	for i := range 3 {
		f.entity("lxc", fmt.Sprint("g", i), map[string]any{"vmid": 100 + i, "host": "atlas"})
		f.link("hosts", "proxmox-host:atlas", fmt.Sprint("lxc:g", i))
	}
	if got := f.same(host, 3); len(got) != 3 {
		t.Fatalf("radius %v", slugs(got))
	}
	if s := f.stats(); s.Builds != 2 || s.Applied != 0 {
		t.Fatalf("three events over a limit of two should rebuild: %+v", s)
	}
	f.link("depends-on", "lxc:g0", "lxc:g1")
	f.same(host, 3)
	if s := f.stats(); s.Builds != 2 || s.Applied != 1 {
		t.Fatalf("one event under the limit should be applied: %+v", s)
	}
}

// TestTooLarge: over MaxEdges the index refuses, and callers walk in SQL; growing past the
// limit by events is caught too.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *topology.Options) { o.MaxEdges = 2 })
	host := f.entity("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	for i := range 3 {
		f.entity("lxc", fmt.Sprint("g", i), map[string]any{"vmid": 100 + i, "host": "atlas"})
	}
	f.link("hosts", "proxmox-host:atlas", "lxc:g0")
	f.link("hosts", "proxmox-host:atlas", "lxc:g1")
	if got := f.same(host, 3); len(got) != 2 {
		t.Fatalf("at the limit: %v", slugs(got))
	}
	f.link("hosts", "proxmox-host:atlas", "lxc:g2")
	if _, err := f.idx.Dependents(f.ctx, host, 3); !errors.Is(err, topology.ErrTooLarge) {
		t.Fatalf("Dependents over MaxEdges: %v, want ErrTooLarge", err)
	}
	if _, ok := f.idx.Walk(host, 3); ok {
		t.Fatal("Walk answered over MaxEdges")
	}
	// The refusal is remembered: no second build is attempted at once.
	if _, err := f.idx.Dependents(f.ctx, host, 3); !errors.Is(err, topology.ErrTooLarge) {
		t.Fatalf("second call: %v", err)
	}
	if s := f.stats(); s.Builds != 2 {
		t.Fatalf("builds %d, want 2 (the first, and the one that found too many edges)", s.Builds)
	}
}

// TestSeedFleet: over the seed inventory the index answers exactly what the recursive
// query answers, from every entity at several depths.
func TestSeedFleet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o, inv, kn, err := seed.Load(seed.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Ingest(f.ctx, f.svc, o, inv, kn, seed.Options{Logger: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(f.ctx, `SELECT id::text FROM entities ORDER BY slug`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	nonEmpty, deepest := 0, 0
	for _, id := range ids {
		for _, d := range []int{1, 10} {
			got := f.same(id, d)
			if d == 10 && len(got) > 0 {
				nonEmpty++
				deepest = max(deepest, got[len(got)-1].Depth)
			}
		}
	}
	// The comparison means something only if the seed has real radii.
	if nonEmpty < 10 || deepest < 3 {
		t.Fatalf("seed fleet too flat to compare: %d non-empty radii, deepest %d", nonEmpty, deepest)
	}
	t.Logf("%d entities, %d with a non-empty radius, deepest at %d hops", len(ids), nonEmpty, deepest)
}

// TestRandomGraph: a random graph with cycles, parallel edges, ended edges and edges that are
// not dependencies, loaded behind the service's back; then random creates and ends through
// the service, comparing with the recursive query from every entity after each round.
func TestRandomGraph(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := rand.New(rand.NewPCG(4, 2))
	const n = 80
	var ids []string
	for i := range n {
		ids = append(ids, f.entity("service", fmt.Sprintf("s%03d", i), nil))
	}
	types := []string{"depends-on", "provides", "hosts", "runs-on", "about", "manages", "backs-up-to"}
	since := time.Now().Add(-time.Hour)
	var rows [][]any
	for range 3 * n {
		a, b := ids[r.IntN(n)], ids[r.IntN(n)]
		if a == b {
			continue
		}
		var validTo any
		if r.IntN(5) == 0 {
			validTo = since.Add(time.Minute)
		}
		u, err := graph.NewID()
		if err != nil {
			t.Fatal(err)
		}
		// Duplicates of a current (source, type, target) would break the unique index:
		// make those ended.
		rows = append(rows, []any{u, types[r.IntN(len(types))], a, b, since, validTo})
	}
	seen := map[string]bool{}
	for _, row := range rows {
		k := fmt.Sprint(row[1], row[2], row[3])
		if row[5] == nil && seen[k] {
			row[5] = since.Add(time.Minute)
		}
		if row[5] == nil {
			seen[k] = true
		}
	}
	if _, err := f.pool.CopyFrom(f.ctx, pgx.Identifier{"relationships"}, []string{"id", "type", "source_id", "target_id", "valid_from", "valid_to"},
		pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	// compare checks every root (at the start and the end) or a random sample (between
	// rounds, to keep the test short).
	compare := func(sample int) {
		t.Helper()
		roots := ids
		if sample > 0 {
			roots = nil
			for range sample {
				roots = append(roots, ids[r.IntN(n)])
			}
		}
		for _, id := range roots {
			for _, d := range []int{1, 3, 10} {
				f.same(id, d)
			}
		}
	}
	compare(0)
	var current []string
	for round := range 4 {
		for range 10 {
			if len(current) > 0 && r.IntN(3) == 0 {
				i := r.IntN(len(current))
				f.unlink(current[i])
				current = append(current[:i], current[i+1:]...)
				continue
			}
			typ := []string{"depends-on", "provides", "manages"}[r.IntN(3)]
			a, b := ids[r.IntN(n)], ids[r.IntN(n)]
			if a != b {
				current = append(current, f.link(typ, a, b))
			}
		}
		compare(15)
		if s := f.stats(); s.Builds != 1 {
			t.Fatalf("round %d: service writes rebuilt the index: %+v", round, s)
		}
	}
	compare(0)
}

// TestConcurrentWalks: walkers run while a writer adds and then ends edges through the
// service. Every walk must reflect at least every change committed before it started and
// nothing committed after it returned.
func TestConcurrentWalks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	host := f.entity("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	const guests = 40
	for i := range guests {
		f.entity("lxc", fmt.Sprint("g", i), map[string]any{"vmid": 100 + i, "host": "atlas"})
	}
	// creating/ending count writes started, created/ended writes committed: the database
	// holds between created-ending and creating-ended current edges at any moment.
	var creating, created, ending, ended atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				low0, high0 := created.Load(), ended.Load()
				r, err := f.idx.Dependents(f.ctx, host, 1)
				if err != nil {
					errs <- err
					return
				}
				// At least every create committed before the walk, less any end that may
				// have committed by its return; at most every create started by then.
				low, high := low0-ending.Load(), creating.Load()-high0
				if got := int64(len(r.IDs)); got < low || got > high {
					errs <- fmt.Errorf("walk saw %d guests, want between %d and %d", got, low, high)
					return
				}
			}
		}()
	}
	var rels []string
	for i := range guests {
		creating.Add(1)
		rels = append(rels, f.link("hosts", "proxmox-host:atlas", fmt.Sprint("lxc:g", i)))
		created.Add(1)
	}
	for _, id := range rels {
		ending.Add(1)
		f.unlink(id)
		ended.Add(1)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := f.same(host, 1); len(got) != 0 {
		t.Fatalf("after ending every edge: %v", slugs(got))
	}
	if s := f.stats(); s.Builds != 1 {
		t.Errorf("service writes rebuilt the index: %+v", s)
	}
}
