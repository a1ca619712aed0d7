package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/seedfile"
)

// TestExportEndpoint: GET /export answers the fleet as an inventory file to any role, with a
// type filter that includes subtypes; an unknown type is a 422 naming the field type.
func TestExportEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222, "pve_version": "8.3"})
	e.create("lxc", "web", map[string]any{"vmid": 101, "host": "atlas", "tags": []any{"a", "b"}})
	e.create("vm", "db", map[string]any{"vmid": 102, "host": "atlas", "qemu_guest_agent": true}, "maintenance")
	e.create("service", "nginx", map[string]any{"unit": "nginx.service", "port": 80})
	e.link("hosts", "proxmox-host:atlas", "lxc:web")
	e.link("hosts", "proxmox-host:atlas", "vm:db")
	e.link("runs-on", "service:nginx", "lxc:web")

	parse := func(r resp) *seedfile.Inventory {
		t.Helper()
		if ct := r.Header.Get("Content-Type"); ct != "application/yaml" {
			t.Errorf("Content-Type %q", ct)
		}
		inv, err := seedfile.ParseInventory(r.Body)
		if err != nil {
			t.Fatalf("the export does not parse: %v\n%s", err, r.Body)
		}
		if err := inv.Validate(e.graph.Ontology()); err != nil {
			t.Fatalf("the export does not validate: %v\n%s", err, r.Body)
		}
		return inv
	}
	slugs := func(inv *seedfile.Inventory) string {
		var s []string
		for _, x := range inv.Entities {
			s = append(s, x.Slug()+"="+x.State)
		}
		return strings.Join(s, " ")
	}

	for _, c := range []*client{e.readonly, e.agent, e.operator} {
		c.do("GET", "/api/v1/export", nil).expect(t, http.StatusOK)
	}
	r := e.readonly.do("GET", "/api/v1/export", nil).expect(t, http.StatusOK)
	inv := parse(r)
	if got := slugs(inv); got != "lxc:web=active proxmox-host:atlas=active service:nginx=active vm:db=maintenance" {
		t.Errorf("entities: %s", got)
	}
	if len(inv.Relationships) != 3 || !strings.Contains(string(r.Body), `pve_version: "8.3"`) {
		t.Errorf("relationships %v\n%s", inv.Relationships, r.Body)
	}

	// guest is abstract: its subtypes lxc and vm; the edges to the host are left out.
	for _, q := range []string{"type=guest", "type=lxc,vm", "type=lxc&type=vm"} {
		inv := parse(e.readonly.do("GET", "/api/v1/export?"+q, nil).expect(t, http.StatusOK))
		if got := slugs(inv); got != "lxc:web=active vm:db=maintenance" || len(inv.Relationships) != 0 {
			t.Errorf("%s: %s, %v", q, got, inv.Relationships)
		}
	}
	inv = parse(e.readonly.do("GET", "/api/v1/export?type=guest,service", nil).expect(t, http.StatusOK))
	if len(inv.Relationships) != 1 || inv.Relationships[0].Type != "runs-on" {
		t.Errorf("guest,service: %v", inv.Relationships)
	}

	for _, q := range []string{"type=spaceship", "type=lxc,spaceship", "type=check", "type=runbook"} {
		p := e.readonly.do("GET", "/api/v1/export?"+q, nil).expect(t, http.StatusUnprocessableEntity).problem(t)
		if p.Field != "type" {
			t.Errorf("%s: problem %+v", q, p)
		}
	}
	e.anon.do("GET", "/api/v1/export", nil).expect(t, http.StatusUnauthorized)
}
