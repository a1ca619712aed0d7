package placement

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/placementstore"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type fixture struct {
	pool *storage.Pool
	g    *graph.Service
}

// newFixture: a cluster of atlas and boreas; web (host attribute by name, and a hosts
// edge), cache (host attribute by slug, no edge) and ha (a hosts edge only) on atlas.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.SyncOntology(ctx, o); err != nil {
		t.Fatal(err)
	}
	seed := graph.Meta{Actor: "seed", Role: "operator"}
	for _, in := range []graph.CreateEntityInput{
		{Type: "cluster", Name: "olympus"},
		{Type: "proxmox-host", Name: "atlas", Attributes: map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222}},
		{Type: "proxmox-host", Name: "boreas", Attributes: map[string]any{"node": "boreas", "lan_ipv4": "127.0.10.2", "ssh_port": 2222}},
		{Type: "lxc", Name: "web", Attributes: map[string]any{"vmid": 101, "host": "atlas", "hostname": "web"}},
		{Type: "lxc", Name: "cache", Attributes: map[string]any{"vmid": 110, "host": "proxmox-host:atlas", "hostname": "cache"}},
		{Type: "vm", Name: "ha", Attributes: map[string]any{"vmid": 200, "qemu_guest_agent": true}},
	} {
		if _, _, err := g.CreateEntity(ctx, seed, in); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range [][3]string{{"hosts", "proxmox-host:atlas", "lxc:web"}, {"hosts", "proxmox-host:atlas", "vm:ha"},
		{"member-of", "proxmox-host:atlas", "cluster:olympus"}, {"member-of", "proxmox-host:boreas", "cluster:olympus"}} {
		if _, _, err := g.CreateRelationship(ctx, seed, e[0], e[1], e[2], nil); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{pool: db.Pool, g: g}
}

// report stores a completed placement report listing moves, as the scheduler would.
func (f *fixture) report(t *testing.T, moves ...placementstore.Move) string {
	t.Helper()
	id := uuid.NewString()
	raw, _ := json.Marshal(map[string]any{"moved": moves})
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO drift_reports (id, trigger, status, started_at, finished_at, report)
VALUES ($1, 'placement', 'completed', now(), now(), $2)`, id, raw); err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// hostsOf is the source slug of the guest's current hosts edges.
func (f *fixture) hostsOf(t *testing.T, guest string) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT s.slug FROM relationships r JOIN entities s ON s.id = r.source_id
JOIN entities g ON g.id = r.target_id WHERE r.type = 'hosts' AND r.valid_to IS NULL AND g.slug = $1 ORDER BY s.slug`, guest)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func (f *fixture) hostAttr(t *testing.T, guest string) string {
	t.Helper()
	var h *string
	if err := f.pool.QueryRow(context.Background(), `SELECT attributes->>'host' FROM entities WHERE slug = $1`, guest).Scan(&h); err != nil {
		t.Fatal(err)
	}
	if h == nil {
		return ""
	}
	return *h
}

func (f *fixture) follower(t *testing.T, bus *eventbus.Bus) *Follower {
	t.Helper()
	if bus == nil {
		bus = eventbus.NewBus(eventbus.BusOptions{Pool: f.pool, Logger: zerolog.Nop()})
	}
	fl, err := New(Options{Bus: bus, Pool: f.pool, Graph: f.g, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return fl
}

func move(slug string, vmid int, kind string) placementstore.Move {
	return placementstore.Move{Slug: slug, VMID: vmid, Kind: kind, From: "proxmox-host:atlas", To: "proxmox-host:boreas", Node: "boreas"}
}

// A report's moves move the graph: the old hosts edge ends and a new one opens from the new
// node, the host attribute follows in its own form, each move is audited by "drift" with
// exactly one guest.moved event; re-applying the report changes nothing; a move to a node
// not in the graph, and one from where the graph no longer has the guest, are skipped.
func TestApplyMovesTheGraph(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fl := f.follower(t, nil)
	ctx := context.Background()
	stray := placementstore.Move{Slug: "lxc:web", VMID: 101, Kind: "lxc", From: "proxmox-host:atlas", To: "", Node: "ceres"}
	id := f.report(t, move("lxc:web", 101, "lxc"), move("lxc:cache", 110, "lxc"), move("vm:ha", 200, "vm"))
	n, err := fl.ApplyReport(ctx, id)
	if err != nil || n != 3 {
		t.Fatalf("applied %d (%v), want 3", n, err)
	}
	for guest, attr := range map[string]string{"lxc:web": "boreas", "lxc:cache": "proxmox-host:boreas", "vm:ha": ""} {
		if h := f.hostsOf(t, guest); len(h) != 1 || h[0] != "proxmox-host:boreas" {
			t.Errorf("%s hosted by %v, want boreas only", guest, h)
		}
		if got := f.hostAttr(t, guest); got != attr {
			t.Errorf("%s host attribute %q, want %q", guest, got, attr)
		}
	}
	if ended := f.count(t, `SELECT count(*) FROM relationships r JOIN entities g ON g.id = r.target_id
WHERE r.type = 'hosts' AND r.valid_to IS NOT NULL AND g.slug IN ('lxc:web', 'vm:ha')`); ended != 2 {
		t.Errorf("%d hosts edges ended, want 2 (web's and ha's)", ended)
	}
	if a := f.count(t, `SELECT count(*) FROM audit_log WHERE actor = 'drift' AND action = 'guest.move'`); a != 3 {
		t.Errorf("%d guest.move audit rows by drift, want 3", a)
	}
	if a := f.count(t, `SELECT count(*) FROM audit_log WHERE actor = 'drift' AND action IN ('relationship.end', 'relationship.create', 'entity.update')`); a != 2+3+2 {
		t.Errorf("%d graph audit rows by drift, want 7", a)
	}
	var payload []byte
	if err := f.pool.QueryRow(ctx, `SELECT payload FROM events WHERE type = 'guest.moved' AND payload->>'slug' = 'lxc:web'`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	_ = json.Unmarshal(payload, &p)
	if p["from"] != "proxmox-host:atlas" || p["to"] != "proxmox-host:boreas" {
		t.Errorf("guest.moved payload %s", payload)
	}
	// Again, and a stale report (web back from atlas, though the graph has it on boreas), and a
	// move to a node the graph does not know.
	if n, err := fl.ApplyReport(ctx, id); err != nil || n != 0 {
		t.Errorf("re-applied: %d (%v), want 0", n, err)
	}
	if n, err := fl.ApplyReport(ctx, f.report(t, move("lxc:web", 101, "lxc"), stray)); err != nil || n != 0 {
		t.Errorf("stale and unknown target: %d (%v), want 0", n, err)
	}
	if ev := f.count(t, `SELECT count(*) FROM events WHERE type = 'guest.moved'`); ev != 3 {
		t.Errorf("%d guest.moved events, want 3", ev)
	}
	if h := f.hostsOf(t, "lxc:web"); len(h) != 1 || h[0] != "proxmox-host:boreas" {
		t.Errorf("web hosted by %v after the stale report", h)
	}
}

// The follower applies a report when its event arrives, and at start the reports stored
// while it was not running.
func TestFollowerFollowsEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// A report stored before the follower runs is caught up at Start.
	f.report(t, move("vm:ha", 200, "vm"))
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: f.pool, Logger: zerolog.Nop(), Poll: 20 * time.Millisecond})
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Stop)
	moved := bus.Subscribe(16, EventMoved)
	defer moved.Close()
	fl := f.follower(t, bus)
	if err := fl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.Stop)
	wait := func(slug string) {
		t.Helper()
		select {
		case ev := <-moved.C:
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			if p["slug"] != slug || ev.Actor != Actor {
				t.Errorf("guest.moved %s by %s, want %s by drift", ev.Payload, ev.Actor, slug)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no guest.moved for %s", slug)
		}
	}
	wait("vm:ha")
	id := f.report(t, move("lxc:web", 101, "lxc"))
	if _, err := eventbus.Append(ctx, f.pool, eventbus.Event{Type: EventPlacement, Actor: "scheduler"}, map[string]any{"report_id": id, "moved": 1}); err != nil {
		t.Fatal(err)
	}
	wait("lxc:web")
	fl.Stop()
	fl.Stop()
}
