// Package exectest is the execution packages' test fixture (test support: only their
// _test.go files import it): a migrated test database with a small fleet in the graph, the
// execution and decision services over it, the callers (operator, agent, readonly) and the
// request helpers their tests share. It holds no SQL; a test that plays the scheduler writes
// its own.
package exectest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/decision"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Fixture is one test's database with a small fleet, the graph service, the execution
// service and the decision service over it.
type Fixture struct {
	URL   string
	Pool  *storage.Pool
	Graph *graph.Service
	Svc   *execution.Service
	Dec   *decision.Service
}

// The callers of the tests.
var (
	Operator = execution.Meta{Actor: "alice", Role: execution.RoleOperator, Method: "POST", Path: "/api/v1/executions"}
	Agent    = execution.Meta{Actor: "nomos", Role: execution.RoleAgent, Method: "POST", Path: "/api/v1/executions"}
	Readonly = execution.Meta{Actor: "viewer", Role: execution.RoleReadonly}
)

// Fleet is the graph the tests run against: a Proxmox host with containers and VMs (with,
// without and with an unknown guest agent), a plain host, a destroyed container, a service
// (which cannot run anything) and a task driven by session "sess-task".
var Fleet = []graph.CreateEntityInput{
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

// NewFixture is a fresh test database (pgtest) with Fleet in the graph, the hosts edge from
// proxmox-host:atlas to lxc:web, and the services over it.
func NewFixture(t testing.TB) *Fixture {
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
	for _, in := range Fleet {
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
	dec, err := decision.New(decision.Options{Pool: db.Pool, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return &Fixture{URL: db.URL, Pool: db.Pool, Graph: g, Svc: svc, Dec: dec}
}

// Count returns a row count (sql is the caller's: this package holds none).
func (f *Fixture) Count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Commands of each class under the default policy.
const (
	CmdRead        = "uptime"
	CmdMutation    = "touch /srv/flag"
	CmdDestructive = "rm -rf /var/lib/app"
)

// Run is a run request of command on target, in session.
func Run(target, command, session string) execution.Request {
	return execution.Request{Target: target, Command: command, Purpose: "test", SessionID: session}
}

// MustRequest requests r as m, or fails the test.
func MustRequest(t testing.TB, f *Fixture, m execution.Meta, r execution.Request) execution.Execution {
	t.Helper()
	e, err := f.Svc.Request(context.Background(), m, r)
	if err != nil {
		t.Fatalf("request %s on %s: %v", r.Command, r.Target, err)
	}
	return e
}

// MustDecide decides approvalID as m, or fails the test.
func MustDecide(t testing.TB, f *Fixture, m execution.Meta, approvalID, decision, via string) execution.DecisionResult {
	t.Helper()
	res, err := f.Dec.Decide(context.Background(), m, approvalID, execution.Decision{Decision: decision, Via: via})
	if err != nil {
		t.Fatalf("%s %s via %s: %v", decision, approvalID, via, err)
	}
	return res
}

// RefusedCode is err as a refusal with code, or fails the test.
func RefusedCode(t testing.TB, err error, code string) *execution.RefusedError {
	t.Helper()
	var re *execution.RefusedError
	if !errors.As(err, &re) || re.Code != code {
		t.Fatalf("err = %v, want a refusal with code %s", err, code)
	}
	return re
}

// PctCreate is a pct_create request on proxmox-host:atlas, in session.
func PctCreate(params string, session string) execution.Request {
	return execution.Request{Target: "proxmox-host:atlas", Action: execution.ActionPctCreate, Params: json.RawMessage(params),
		Purpose: "new container", SessionID: session}
}
