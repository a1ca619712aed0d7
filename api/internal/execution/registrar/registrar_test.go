package registrar

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Commands of each class under the default policy.
const (
	cmdRead        = "uptime"
	cmdMutation    = "touch /srv/flag"
	cmdDestructive = "rm -rf /var/lib/app"
)

func run(target, command, session string) execution.Request {
	return execution.Request{Target: target, Command: command, Purpose: "test", SessionID: session}
}

func mustRequest(t testing.TB, f *fixture, m execution.Meta, r execution.Request) execution.Execution {
	t.Helper()
	e, err := f.svc.Request(context.Background(), m, r)
	if err != nil {
		t.Fatalf("request %s on %s: %v", r.Command, r.Target, err)
	}
	return e
}

func mustDecide(t testing.TB, f *fixture, m execution.Meta, approvalID, decision, via string) execution.DecisionResult {
	t.Helper()
	res, err := f.dec.Decide(context.Background(), m, approvalID, execution.Decision{Decision: decision, Via: via})
	if err != nil {
		t.Fatalf("%s %s via %s: %v", decision, approvalID, via, err)
	}
	return res
}

func pctCreate(params string, session string) execution.Request {
	return execution.Request{Target: "proxmox-host:atlas", Action: execution.ActionPctCreate, Params: json.RawMessage(params),
		Purpose: "new container", SessionID: session}
}

func TestRegistrar(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: f.pool, Logger: zerolog.Nop(), Poll: 20 * time.Millisecond})
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer bus.Stop()
	reg, err := New(Options{Bus: bus, Pool: f.pool, Graph: f.graph, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	defer reg.Stop() // safe twice
	execEvents := func() int64 {
		return int64(f.count(t, `SELECT count(*) FROM events WHERE type LIKE 'execution.%'`))
	}
	e := mustRequest(t, f, agent, pctCreate(`{"vmid": 150, "hostname": "app", "privileged": 0, "nesting": 1, "memory": 1024}`, "sess-pct"))
	mustDecide(t, f, operator, *e.ApprovalID, execution.DecisionApprove, execution.ViaButton)
	if err := reg.WaitProcessed(ctx, execEvents()); err != nil {
		t.Fatal(err)
	}
	state := func(slug string) string {
		var s string
		if err := f.pool.QueryRow(ctx, `SELECT state FROM entities WHERE slug = $1`, slug).Scan(&s); err != nil {
			t.Fatalf("%s: %v", slug, err)
		}
		return s
	}
	if s := state("execution:" + e.ID); s != "runnable" {
		t.Fatalf("approved execution entity is %s", s)
	}
	f.simulate(t, e.ID, [][]byte{[]byte("created\n")}, execution.StatusCompleted, 0,
		`{"vmid": 150, "hostname": "app", "template": "debian-12-standard_12.7-1_amd64.tar.zst", "ip": "dhcp"}`)
	if err := reg.WaitProcessed(ctx, execEvents()); err != nil {
		t.Fatal(err)
	}
	lxc, err := f.graph.GetEntity(ctx, "lxc:app")
	if err != nil {
		t.Fatalf("lxc:app not registered: %v", err)
	}
	if lxc.Attributes["vmid"] != float64(150) || lxc.Attributes["host"] != "atlas" || lxc.Attributes["unprivileged"] != true ||
		lxc.Attributes["nesting"] != true || lxc.Attributes["memory_mb"] != float64(1024) ||
		lxc.Attributes["template"] != "debian-12-standard_12.7-1_amd64.tar.zst" || lxc.Attributes["ostype"] != "debian" {
		t.Fatalf("lxc:app attributes: %v", lxc.Attributes)
	}
	if n := f.count(t, `SELECT count(*) FROM relationships r JOIN entities s ON s.id = r.source_id JOIN entities d ON d.id = r.target_id
		WHERE r.type = 'hosts' AND s.slug = 'proxmox-host:atlas' AND d.slug = 'lxc:app' AND r.valid_to IS NULL`); n != 1 {
		t.Fatalf("hosts edge: %d", n)
	}
	if s := state("execution:" + e.ID); s != "succeeded" {
		t.Fatalf("completed execution entity is %s", s)
	}
	var code float64
	if err := f.pool.QueryRow(ctx, `SELECT (attributes->>'exit_code')::float FROM entities WHERE slug = $1`, "execution:"+e.ID).Scan(&code); err != nil || code != 0 {
		t.Fatalf("exit_code attribute: %v %v", code, err)
	}
	// A second registration (catch-up after a restart) changes nothing.
	before := f.count(t, `SELECT count(*) FROM audit_log`)
	if err := reg.register(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if after := f.count(t, `SELECT count(*) FROM audit_log`); after != before {
		t.Fatalf("re-registration wrote %d audit rows", after-before)
	}
	// Denied and failed executions move their entities too.
	d := mustRequest(t, f, agent, run("lxc:web", cmdMutation, ""))
	mustDecide(t, f, operator, *d.ApprovalID, execution.DecisionDeny, execution.ViaButton)
	x := mustRequest(t, f, agent, run("lxc:web", "cat /nonexistent", ""))
	f.simulate(t, x.ID, nil, execution.StatusFailed, 1, "")
	if err := reg.WaitProcessed(ctx, execEvents()); err != nil {
		t.Fatal(err)
	}
	if s := state("execution:" + d.ID); s != "denied" {
		t.Fatalf("denied execution entity is %s", s)
	}
	if s := state("execution:" + x.ID); s != "failed" {
		t.Fatalf("failed execution entity is %s", s)
	}
}

// TestRegistrarCatchUp: a pct_create that completed while no Registrar ran is registered at
// the next start.
func TestRegistrarCatchUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := mustRequest(t, f, agent, pctCreate(`{"vmid": 155, "hostname": "late"}`, ""))
	mustDecide(t, f, operator, *e.ApprovalID, execution.DecisionApprove, execution.ViaButton)
	f.simulate(t, e.ID, nil, execution.StatusCompleted, 0, `{"vmid": 155, "hostname": "late", "template": "debian-12-standard_12.7-1_amd64.tar.zst", "ip": "dhcp"}`)
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: f.pool, Logger: zerolog.Nop(), Poll: 20 * time.Millisecond})
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer bus.Stop()
	reg, err := New(Options{Bus: bus, Pool: f.pool, Graph: f.graph, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	// The catch-up runs before the first event; an event after Start proves it is done.
	x := mustRequest(t, f, agent, run("lxc:web", cmdRead, ""))
	_ = x
	if err := reg.WaitProcessed(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.graph.GetEntity(ctx, "lxc:late"); err != nil {
		t.Fatalf("lxc:late not registered by the catch-up: %v", err)
	}
}
