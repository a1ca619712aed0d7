package decision

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// fixture is one test's database with a small fleet, the graph service and the execution
// service over it.
type fixture struct {
	url   string
	pool  *pgxpool.Pool
	graph *graph.Service
	svc   *execution.Service
	dec   *Service
}

var (
	operator = execution.Meta{Actor: "alice", Role: execution.RoleOperator, Method: "POST", Path: "/api/v1/executions"}
	agent    = execution.Meta{Actor: "nomos", Role: execution.RoleAgent, Method: "POST", Path: "/api/v1/executions"}
	readonly = execution.Meta{Actor: "viewer", Role: execution.RoleReadonly}
)

// fleet is the graph the tests run against: a Proxmox host with containers and VMs (with,
// without and with an unknown guest agent), a plain host, a destroyed container, a service
// (which cannot run anything) and a task driven by session "sess-task".
var fleet = []graph.CreateEntityInput{
	{Type: "proxmox-host", Name: "atlas", Attributes: map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222, "user": "root"}},
	{Type: "lxc", Name: "web", Attributes: map[string]any{"vmid": 101, "host": "atlas", "hostname": "web"}},
	{Type: "lxc", Name: "db", Attributes: map[string]any{"vmid": 102, "host": "atlas", "hostname": "db"}},
	{Type: "lxc", Name: "gone", State: "destroyed", Attributes: map[string]any{"vmid": 109, "host": "atlas"}},
	{Type: "vm", Name: "ha", Attributes: map[string]any{"vmid": 200, "host": "atlas", "qemu_guest_agent": true}},
	{Type: "vm", Name: "noagent", Attributes: map[string]any{"vmid": 201, "host": "atlas", "qemu_guest_agent": false}},
	{Type: "vm", Name: "unknownagent", Attributes: map[string]any{"vmid": 202, "host": "atlas"}},
	{Type: "host", Name: "box", Attributes: map[string]any{"lan_ipv4": "127.0.11.1", "ssh_port": 2222, "user": "root"}},
	{Type: "service", Name: "caddy", Attributes: map[string]any{"unit": "caddy.service"}},
	{Type: "task", Name: "t1", Attributes: map[string]any{"goal": "tidy up", "session_id": "sess-task"}},
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatalf("parse ontology: %v", err)
	}
	g, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.SyncOntology(ctx, o); err != nil {
		t.Fatalf("sync ontology: %v", err)
	}
	seed := graph.Meta{Actor: "seed", Role: execution.RoleOperator}
	for _, in := range fleet {
		if _, _, err := g.CreateEntity(ctx, seed, in); err != nil {
			t.Fatalf("create %s:%s: %v", in.Type, in.Name, err)
		}
	}
	if _, _, err := g.CreateRelationship(ctx, seed, "hosts", "proxmox-host:atlas", "lxc:web", nil); err != nil {
		t.Fatalf("hosts edge: %v", err)
	}
	svc, err := execution.New(execution.Options{Pool: db.Pool, Policy: policy.Default(), Graph: g, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := New(Options{Pool: db.Pool, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{url: db.URL, pool: db.Pool, graph: g, svc: svc, dec: dec}
}

// count returns a row count.
func (f *fixture) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}
