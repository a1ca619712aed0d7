// Package discover_test runs `oikos discover services` end to end: the api (its composition
// root), the lab simulator serving the demo inventory over SSH, and the scheduler's executor
// running the discovery's two read-only executions through the host-hop (pct exec on the
// Proxmox host). The graph starts with only the host and the guest, so the simulator's
// jellyfin unit and its port 8096 are new to it.
package discover_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { e2estack.Main(m) }

type proposal struct {
	Name, Unit, Entity string
	Ports              []int
	Port               *int
	Exists             bool
}

type discovery struct {
	Target     string
	Proposals  []proposal
	Plumbing   []string
	Executions []struct{ ID, Command, Status string }
}

type accepted struct {
	Created []struct {
		Slug   string
		RunsOn string `json:"runs_on"`
	}
	Skipped []struct{ Name, Reason, Entity string }
}

// demoEntities are the demo inventory's entities of these slugs, as the seeds declare them
// (so the graph's addresses are the simulator's).
func demoEntities(t *testing.T, slugs ...string) []map[string]any {
	t.Helper()
	var inv struct {
		Entities []struct {
			Type       string         `yaml:"type"`
			Name       string         `yaml:"name"`
			Attributes map[string]any `yaml:"attributes"`
		} `yaml:"entities"`
	}
	if err := yaml.Unmarshal(seeds.Inventory(), &inv); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, s := range slugs {
		for _, e := range inv.Entities {
			if e.Type+":"+e.Name == s {
				out = append(out, map[string]any{"type": e.Type, "name": e.Name, "attributes": e.Attributes})
			}
		}
	}
	if len(out) != len(slugs) {
		t.Fatalf("the demo inventory has %d of %v", len(out), slugs)
	}
	return out
}

func find(ps []proposal, unit string) *proposal {
	for i := range ps {
		if ps[i].Unit == unit {
			return &ps[i]
		}
	}
	return nil
}

func TestDiscoverServicesOnAGuest(t *testing.T) {
	ctx := context.Background()
	log := zerolog.Nop()
	db := pgtest.New(t)
	api, apiURL, err := e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: db.URL}, log)
	if err != nil {
		t.Fatal(err)
	}
	var operator string
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "operator", Role: "operator", Into: &operator}); err != nil {
		t.Fatal(err)
	}
	client := &e2estack.Client{URL: apiURL, HTTP: &http.Client{Timeout: 2 * time.Minute}}
	op := client.API(t, operator)
	for _, e := range demoEntities(t, "proxmox-host:atlas", "lxc:jellyfin") {
		e2estack.OK(t, nil)(op.CreateEntityWithBody(ctx, nil, apiclient.ContentJSON, apiclient.JSONBody(e)))
	}
	e2estack.OK(t, nil)(op.CreateRelationship(ctx, apiclient.CreateRelationship{Type: "hosts", Source: "proxmox-host:atlas", Target: "lxc:jellyfin"}))
	sim, err := e2estack.StartLab(ctx, t, db, e2estack.LabOptions{StateDir: t.TempDir(), SchedulerID: "e2e-discover", Log: log})
	if err != nil {
		t.Fatal(err)
	}

	// Discovery: the guest's running jellyfin unit with its port, the base system left out.
	var d discovery
	e2estack.OK(t, &d)(op.DiscoverServices(ctx, "lxc:jellyfin", &apiclient.DiscoverServicesParams{Timeout: apiclient.Ptr("60s")}))
	jf := find(d.Proposals, "jellyfin.service")
	if jf == nil || jf.Name != "jellyfin" || jf.Exists || !slices.Equal(jf.Ports, []int{8096}) || jf.Port == nil || *jf.Port != 8096 {
		t.Fatalf("proposals %+v", d.Proposals)
	}
	for _, p := range []string{"cron.service", "systemd-journald.service", "postfix.service"} {
		if !slices.Contains(d.Plumbing, p) {
			t.Errorf("plumbing %v lacks %s", d.Plumbing, p)
		}
		if find(d.Proposals, p) != nil {
			t.Errorf("%s is proposed", p)
		}
	}
	// The two executions ran through the gate as read-only, unattended, and completed.
	if len(d.Executions) != 2 {
		t.Fatalf("executions %+v", d.Executions)
	}
	for _, x := range d.Executions {
		var ex struct {
			Status       string `json:"status"`
			RiskClass    string `json:"risk_class"`
			AuthorisedBy string `json:"authorised_by"`
			Target       string `json:"target"`
			RequestedBy  string `json:"requested_by"`
		}
		e2estack.OK(t, &ex)(op.GetExecution(ctx, x.ID))
		if ex.Status != "completed" || ex.RiskClass != "read_only" || ex.AuthorisedBy != "auto" || ex.Target != "lxc:jellyfin" ||
			ex.RequestedBy != "operator" {
			t.Errorf("execution %s (%s): %+v", x.ID, x.Command, ex)
		}
	}

	// Accept: the service with its runs-on edge, audited.
	body := map[string]any{"services": []map[string]any{{"name": jf.Name, "unit": jf.Unit, "port": *jf.Port}}}
	var a accepted
	accept := func() (*http.Response, error) {
		return op.AcceptServicesWithBody(ctx, "lxc:jellyfin", apiclient.ContentJSON, apiclient.JSONBody(body))
	}
	if st, raw := e2estack.Answer(t, &a)(accept()); st != http.StatusCreated {
		t.Fatalf("accept: %d %s", st, raw)
	}
	if len(a.Created) != 1 || a.Created[0].Slug != "service:jellyfin" || a.Created[0].RunsOn != "lxc:jellyfin" {
		t.Fatalf("accepted %+v", a)
	}
	var svc struct {
		Type       string         `json:"type"`
		Attributes map[string]any `json:"attributes"`
	}
	e2estack.OK(t, &svc)(op.GetEntity(ctx, "service:jellyfin"))
	if svc.Type != "service" || svc.Attributes["unit"] != "jellyfin.service" || svc.Attributes["port"] != float64(8096) {
		t.Errorf("service:jellyfin %+v", svc)
	}
	var rels struct {
		Items []struct {
			Type       string `json:"type"`
			TargetSlug string `json:"target_slug"`
		} `json:"items"`
	}
	e2estack.OK(t, &rels)(op.ListRelations(ctx, "service:jellyfin", nil))
	if len(rels.Items) != 1 || rels.Items[0].Type != "runs-on" || rels.Items[0].TargetSlug != "lxc:jellyfin" {
		t.Errorf("relations %+v", rels.Items)
	}
	var audit struct {
		Items []struct{ Action, Actor string } `json:"items"`
	}
	e2estack.OK(t, &audit)(op.ListAudit(ctx, &apiclient.ListAuditParams{Entity: apiclient.Ptr("service:jellyfin")}))
	var actions []string
	for _, r := range audit.Items {
		if r.Actor == "operator" {
			actions = append(actions, r.Action)
		}
	}
	if !slices.Contains(actions, "entity.create") || !slices.Contains(actions, "relationship.create") {
		t.Errorf("audit %+v", audit.Items)
	}

	// Again: it exists, so a second accept creates nothing.
	d = discovery{}
	e2estack.OK(t, &d)(op.DiscoverServices(ctx, "lxc:jellyfin", nil))
	if jf = find(d.Proposals, "jellyfin.service"); jf == nil || !jf.Exists || jf.Entity != "service:jellyfin" {
		t.Fatalf("after the accept: %+v", d.Proposals)
	}
	a = accepted{}
	if st, raw := e2estack.Answer(t, &a)(accept()); st != http.StatusOK ||
		len(a.Created) != 0 || len(a.Skipped) != 1 {
		t.Fatalf("second accept: %d %s", st, raw)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM entities WHERE type = 'service'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d services (%v)", n, err)
	}

	// A stopped guest is a clear 502, not an empty list.
	if err := sim.SetGuestStatus("atlas", 101, false); err != nil {
		t.Fatal(err)
	}
	st, raw := e2estack.Answer(t, nil)(op.DiscoverServices(ctx, "lxc:jellyfin", &apiclient.DiscoverServicesParams{Timeout: apiclient.Ptr("30s")}))
	if st != http.StatusBadGateway || !strings.Contains(string(raw), "guest-not-running") || !strings.Contains(string(raw), "lxc:jellyfin is not running") {
		t.Errorf("stopped guest: %d %s", st, raw)
	}
}
