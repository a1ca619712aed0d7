package execution

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
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
	svc   *Service
}

var (
	operator = Meta{Actor: "alice", Role: RoleOperator, Method: "POST", Path: "/api/v1/executions"}
	agent    = Meta{Actor: "nomos", Role: RoleAgent, Method: "POST", Path: "/api/v1/executions"}
	readonly = Meta{Actor: "viewer", Role: RoleReadonly}
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
	seed := graph.Meta{Actor: "seed", Role: RoleOperator}
	for _, in := range fleet {
		if _, _, err := g.CreateEntity(ctx, seed, in); err != nil {
			t.Fatalf("create %s:%s: %v", in.Type, in.Name, err)
		}
	}
	if _, _, err := g.CreateRelationship(ctx, seed, "hosts", "proxmox-host:atlas", "lxc:web", nil); err != nil {
		t.Fatalf("hosts edge: %v", err)
	}
	svc, err := New(Options{Pool: db.Pool, Policy: policy.Default(), Graph: g, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{url: db.URL, pool: db.Pool, graph: g, svc: svc}
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

// simulate plays the scheduler as docs/execution-contract.md describes it: claim (running,
// started_at, execution.running), append output chunks, then finish with a terminal status,
// exit code, output tail, result and its event, each step in one transaction.
func (f *fixture) simulate(t testing.TB, id string, chunks [][]byte, status string, exitCode int, result string) {
	t.Helper()
	ctx := context.Background()
	event := func(tx pgx.Tx, st string, code *int) error {
		var target, slug, action, risk string
		var session *string
		if err := tx.QueryRow(ctx, `SELECT target_id::text, target_slug, action, risk_class, session_id FROM executions WHERE id = $1`, id).
			Scan(&target, &slug, &action, &risk, &session); err != nil {
			return err
		}
		corr := ""
		if session != nil {
			corr = *session
		}
		_, err := eventbus.Append(ctx, tx, eventbus.Event{Type: "execution." + st, EntityID: target, CorrelationID: corr, Actor: "scheduler:test"},
			EventPayload{ExecutionID: id, Status: st, Target: slug, Action: action, RiskClass: risk, ExitCode: code})
		return err
	}
	err := pg.InTx(ctx, f.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE executions SET status = 'running', started_at = now(), claimed_by = 'test'
			WHERE id = $1 AND status = 'approved'`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("execution %s is not runnable", id)
		}
		return event(tx, StatusRunning, nil)
	})
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	out := []byte{}
	for i, c := range chunks {
		if _, err := f.pool.Exec(ctx, `INSERT INTO execution_logs (execution_id, seq, stream, data) VALUES ($1, $2, 'stdout', $3)`,
			id, i+1, c); err != nil {
			t.Fatalf("log chunk: %v", err)
		}
		out = append(out, c...)
	}
	var res any
	if result != "" {
		res = result
	}
	err = pg.InTx(ctx, f.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE executions SET status = $2, exit_code = $3, output = $4, result = $5::jsonb,
			finished_at = now(), updated_at = now() WHERE id = $1`, id, status, exitCode, out, res); err != nil {
			return err
		}
		return event(tx, status, &exitCode)
	})
	if err != nil {
		t.Fatalf("finish %s: %v", id, err)
	}
}
