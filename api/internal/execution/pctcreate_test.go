package execution_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/exectest"
)

func TestPctCreateGate(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	e := exectest.MustRequest(t, f, exectest.Agent, exectest.PctCreate(`{"vmid": 150, "hostname": "app", "privileged": 0, "nesting": "true"}`, ""))
	if e.Status != execution.StatusPendingApproval || e.RiskClass != "config_mutation" || e.Action != execution.ActionPctCreate {
		t.Fatalf("pct_create: %+v", e)
	}
	var params map[string]any
	if err := json.Unmarshal(e.Params, &params); err != nil || params["privileged"] != false || params["nesting"] != true || params["bridge"] != "vmbr0" {
		t.Fatalf("stored params: %s", e.Params)
	}
	if !strings.HasPrefix(e.Command, "pct create 150 ") {
		t.Fatalf("command: %s", e.Command)
	}
	_, err := f.Svc.Request(ctx, exectest.Agent, exectest.PctCreate(`{"vmid": 151, "hostname": "app2", "privileged": "maybe"}`, ""))
	var fe *execution.FieldError
	if !errors.As(err, &fe) || fe.Field != "params.privileged" {
		t.Fatalf("privileged maybe: %v", err)
	}
	// Declared read_only never lowers a typed action below its floor.
	r := exectest.PctCreate(`{"vmid": 152, "hostname": "app3"}`, "")
	r.DeclaredRisk = "read_only"
	if e := exectest.MustRequest(t, f, exectest.Agent, r); e.RiskClass != "config_mutation" || e.Status != execution.StatusPendingApproval {
		t.Fatalf("declared read_only pct_create: %+v", e)
	}
	// Not on a container, and not onto a vmid or hostname in use.
	bad := exectest.PctCreate(`{"vmid": 160, "hostname": "x"}`, "")
	bad.Target = "lxc:web"
	_, err = f.Svc.Request(ctx, exectest.Agent, bad)
	exectest.RefusedCode(t, err, "target_kind")
	_, err = f.Svc.Request(ctx, exectest.Agent, exectest.PctCreate(`{"vmid": 101, "hostname": "fresh"}`, ""))
	exectest.RefusedCode(t, err, "guest_exists")
	_, err = f.Svc.Request(ctx, exectest.Agent, exectest.PctCreate(`{"vmid": 170, "hostname": "web"}`, ""))
	exectest.RefusedCode(t, err, "guest_exists")
}

// TestTypedActionsAreGated: a restart (of the fleet's reverse proxy, say) is classified and
// queued like any other mutation; a read-only systemctl verb runs at once.
func TestTypedActionsAreGated(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	cases := []struct {
		action, target, params, class, status string
	}{
		{execution.ActionRestart, "lxc:web", `{"unit": "caddy.service"}`, "config_mutation", execution.StatusPendingApproval},
		{execution.ActionSystemctl, "lxc:db", `{"verb": "status", "unit": "caddy"}`, "read_only", execution.StatusApproved},
		{execution.ActionAptUpgrade, "host:box", `{}`, "config_mutation", execution.StatusPendingApproval},
		{execution.ActionPctExec, "lxc:db", `{"vmid": 102, "command": "df -h"}`, "read_only", execution.StatusApproved},
		{execution.ActionDockerExec, "vm:ha", `{"container": "web", "command": "rm -rf /data"}`, "destructive", execution.StatusPendingApproval},
	}
	for _, c := range cases {
		e := exectest.MustRequest(t, f, exectest.Agent, execution.Request{Target: c.target, Action: c.action, Params: json.RawMessage(c.params), Purpose: "typed"})
		if e.RiskClass != c.class || e.Status != c.status {
			t.Errorf("%s on %s: %s %s, want %s %s (%v)", c.action, c.target, e.RiskClass, e.Status, c.class, c.status, e.Reasons)
		}
	}
	_, err := f.Svc.Request(context.Background(), exectest.Agent, execution.Request{Target: "lxc:web", Action: execution.ActionPctExec,
		Params: json.RawMessage(`{"vmid": 102, "command": "df -h"}`), Purpose: "typed"})
	exectest.RefusedCode(t, err, "target_kind")
}
