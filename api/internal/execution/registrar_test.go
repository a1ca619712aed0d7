package execution

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/eventbus"
)

func pctCreate(params string, session string) Request {
	return Request{Target: "proxmox-host:atlas", Action: ActionPctCreate, Params: json.RawMessage(params),
		Purpose: "new container", SessionID: session}
}

func TestPctCreateGate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	e := mustRequest(t, f, agent, pctCreate(`{"vmid": 150, "hostname": "app", "privileged": 0, "nesting": "true"}`, ""))
	if e.Status != StatusPendingApproval || e.RiskClass != "config_mutation" || e.Action != ActionPctCreate {
		t.Fatalf("pct_create: %+v", e)
	}
	var params map[string]any
	if err := json.Unmarshal(e.Params, &params); err != nil || params["privileged"] != false || params["nesting"] != true || params["bridge"] != "vmbr0" {
		t.Fatalf("stored params: %s", e.Params)
	}
	if !strings.HasPrefix(e.Command, "pct create 150 ") {
		t.Fatalf("command: %s", e.Command)
	}
	_, err := f.svc.Request(ctx, agent, pctCreate(`{"vmid": 151, "hostname": "app2", "privileged": "maybe"}`, ""))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "params.privileged" {
		t.Fatalf("privileged maybe: %v", err)
	}
	// Declared read_only never lowers a typed action below its floor.
	r := pctCreate(`{"vmid": 152, "hostname": "app3"}`, "")
	r.DeclaredRisk = "read_only"
	if e := mustRequest(t, f, agent, r); e.RiskClass != "config_mutation" || e.Status != StatusPendingApproval {
		t.Fatalf("declared read_only pct_create: %+v", e)
	}
	// Not on a container, and not onto a vmid or hostname in use.
	bad := pctCreate(`{"vmid": 160, "hostname": "x"}`, "")
	bad.Target = "lxc:web"
	_, err = f.svc.Request(ctx, agent, bad)
	refusedCode(t, err, "target_kind")
	_, err = f.svc.Request(ctx, agent, pctCreate(`{"vmid": 101, "hostname": "fresh"}`, ""))
	refusedCode(t, err, "guest_exists")
	_, err = f.svc.Request(ctx, agent, pctCreate(`{"vmid": 170, "hostname": "web"}`, ""))
	refusedCode(t, err, "guest_exists")
}

// TestTypedActionsAreGated: a restart (of the fleet's reverse proxy, say) is classified and
// queued like any other mutation; a read-only systemctl verb runs at once.
func TestTypedActionsAreGated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		action, target, params, class, status string
	}{
		{ActionRestart, "lxc:web", `{"unit": "caddy.service"}`, "config_mutation", StatusPendingApproval},
		{ActionSystemctl, "lxc:db", `{"verb": "status", "unit": "caddy"}`, "read_only", StatusApproved},
		{ActionAptUpgrade, "host:box", `{}`, "config_mutation", StatusPendingApproval},
		{ActionPctExec, "lxc:db", `{"vmid": 102, "command": "df -h"}`, "read_only", StatusApproved},
		{ActionDockerExec, "vm:ha", `{"container": "web", "command": "rm -rf /data"}`, "destructive", StatusPendingApproval},
	}
	for _, c := range cases {
		e := mustRequest(t, f, agent, Request{Target: c.target, Action: c.action, Params: json.RawMessage(c.params), Purpose: "typed"})
		if e.RiskClass != c.class || e.Status != c.status {
			t.Errorf("%s on %s: %s %s, want %s %s (%v)", c.action, c.target, e.RiskClass, e.Status, c.class, c.status, e.Reasons)
		}
	}
	_, err := f.svc.Request(context.Background(), agent, Request{Target: "lxc:web", Action: ActionPctExec,
		Params: json.RawMessage(`{"vmid": 102, "command": "df -h"}`), Purpose: "typed"})
	refusedCode(t, err, "target_kind")
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
	reg, err := NewRegistrar(RegistrarOptions{Bus: bus, Pool: f.pool, Graph: f.graph, Logger: zerolog.Nop()})
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
	mustDecide(t, f, operator, *e.ApprovalID, DecisionApprove, ViaButton)
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
	f.simulate(t, e.ID, [][]byte{[]byte("created\n")}, StatusCompleted, 0,
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
	mustDecide(t, f, operator, *d.ApprovalID, DecisionDeny, ViaButton)
	x := mustRequest(t, f, agent, run("lxc:web", "cat /nonexistent", ""))
	f.simulate(t, x.ID, nil, StatusFailed, 1, "")
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
	mustDecide(t, f, operator, *e.ApprovalID, DecisionApprove, ViaButton)
	f.simulate(t, e.ID, nil, StatusCompleted, 0, `{"vmid": 155, "hostname": "late", "template": "debian-12-standard_12.7-1_amd64.tar.zst", "ip": "dhcp"}`)
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: f.pool, Logger: zerolog.Nop(), Poll: 20 * time.Millisecond})
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer bus.Stop()
	reg, err := NewRegistrar(RegistrarOptions{Bus: bus, Pool: f.pool, Graph: f.graph, Logger: zerolog.Nop()})
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
