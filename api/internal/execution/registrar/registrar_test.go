package registrar

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/exectest"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

func TestRegistrar(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: f.Pool, Logger: zerolog.Nop(), Poll: 20 * time.Millisecond})
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer bus.Stop()
	reg, err := New(Options{Bus: bus, Pool: f.Pool, Graph: f.Graph, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	defer reg.Stop() // safe twice
	execEvents := func() int64 {
		return int64(f.Count(t, `SELECT count(*) FROM events WHERE type LIKE 'execution.%'`))
	}
	e := exectest.MustRequest(t, f, exectest.Agent, exectest.PctCreate(`{"vmid": 150, "hostname": "app", "privileged": 0, "nesting": 1, "memory": 1024}`, "sess-pct"))
	exectest.MustDecide(t, f, exectest.Operator, *e.ApprovalID, execution.DecisionApprove, execution.ViaButton)
	if err := reg.WaitProcessed(ctx, execEvents()); err != nil {
		t.Fatal(err)
	}
	state := func(slug string) string {
		var s string
		if err := f.Pool.QueryRow(ctx, `SELECT state FROM entities WHERE slug = $1`, slug).Scan(&s); err != nil {
			t.Fatalf("%s: %v", slug, err)
		}
		return s
	}
	if s := state("execution:" + e.ID); s != "runnable" {
		t.Fatalf("approved execution entity is %s", s)
	}
	simulate(t, f, e.ID, [][]byte{[]byte("created\n")}, execution.StatusCompleted, 0,
		`{"vmid": 150, "hostname": "app", "template": "debian-12-standard_12.7-1_amd64.tar.zst", "ip": "dhcp"}`)
	if err := reg.WaitProcessed(ctx, execEvents()); err != nil {
		t.Fatal(err)
	}
	lxc, err := f.Graph.GetEntity(ctx, "lxc:app")
	if err != nil {
		t.Fatalf("lxc:app not registered: %v", err)
	}
	if lxc.Attributes["vmid"] != float64(150) || lxc.Attributes["host"] != "atlas" || lxc.Attributes["unprivileged"] != true ||
		lxc.Attributes["nesting"] != true || lxc.Attributes["memory_mb"] != float64(1024) ||
		lxc.Attributes["template"] != "debian-12-standard_12.7-1_amd64.tar.zst" || lxc.Attributes["ostype"] != "debian" {
		t.Fatalf("lxc:app attributes: %v", lxc.Attributes)
	}
	if n := f.Count(t, `SELECT count(*) FROM relationships r JOIN entities s ON s.id = r.source_id JOIN entities d ON d.id = r.target_id
		WHERE r.type = 'hosts' AND s.slug = 'proxmox-host:atlas' AND d.slug = 'lxc:app' AND r.valid_to IS NULL`); n != 1 {
		t.Fatalf("hosts edge: %d", n)
	}
	if s := state("execution:" + e.ID); s != "succeeded" {
		t.Fatalf("completed execution entity is %s", s)
	}
	var code float64
	if err := f.Pool.QueryRow(ctx, `SELECT (attributes->>'exit_code')::float FROM entities WHERE slug = $1`, "execution:"+e.ID).Scan(&code); err != nil || code != 0 {
		t.Fatalf("exit_code attribute: %v %v", code, err)
	}
	// A second registration (catch-up after a restart) changes nothing.
	before := f.Count(t, `SELECT count(*) FROM audit_log`)
	if err := reg.register(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if after := f.Count(t, `SELECT count(*) FROM audit_log`); after != before {
		t.Fatalf("re-registration wrote %d audit rows", after-before)
	}
	// Denied and failed executions move their entities too.
	d := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdMutation, ""))
	exectest.MustDecide(t, f, exectest.Operator, *d.ApprovalID, execution.DecisionDeny, execution.ViaButton)
	x := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", "cat /nonexistent", ""))
	simulate(t, f, x.ID, nil, execution.StatusFailed, 1, "")
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
	f := exectest.NewFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := exectest.MustRequest(t, f, exectest.Agent, exectest.PctCreate(`{"vmid": 155, "hostname": "late"}`, ""))
	exectest.MustDecide(t, f, exectest.Operator, *e.ApprovalID, execution.DecisionApprove, execution.ViaButton)
	simulate(t, f, e.ID, nil, execution.StatusCompleted, 0, `{"vmid": 155, "hostname": "late", "template": "debian-12-standard_12.7-1_amd64.tar.zst", "ip": "dhcp"}`)
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: f.Pool, Logger: zerolog.Nop(), Poll: 20 * time.Millisecond})
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer bus.Stop()
	reg, err := New(Options{Bus: bus, Pool: f.Pool, Graph: f.Graph, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	// The catch-up runs before the first event; an event after Start proves it is done.
	x := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdRead, ""))
	_ = x
	if err := reg.WaitProcessed(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Graph.GetEntity(ctx, "lxc:late"); err != nil {
		t.Fatalf("lxc:late not registered by the catch-up: %v", err)
	}
}
