package execution

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
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
