package incidents

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/checkrun"
	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

// haInventory: a three-node cluster; atlas runs the HA container web (nginx on it), the HA
// VM hass and the ordinary container media.
const haInventory = `
entities:
  - {type: cluster, name: olympus}
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: proxmox-host, name: ceres, attributes: {lan_ipv4: 127.0.10.3, ssh_port: 2222, user: root, node: ceres, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web, ha: true}}
  - {type: vm, name: hass, attributes: {vmid: 150, host: atlas, hostname: hass, qemu_guest_agent: true, ha: true}}
  - {type: lxc, name: media, attributes: {vmid: 102, host: atlas, hostname: media}}
  - {type: lxc, name: db, attributes: {vmid: 201, host: boreas, hostname: db}}
  - {type: service, name: nginx, attributes: {unit: nginx.service}}
relationships:
  - {type: member-of, source: "proxmox-host:atlas", target: "cluster:olympus"}
  - {type: member-of, source: "proxmox-host:boreas", target: "cluster:olympus"}
  - {type: member-of, source: "proxmox-host:ceres", target: "cluster:olympus"}
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:web"}
  - {type: hosts, source: "proxmox-host:atlas", target: "vm:hass"}
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:media"}
  - {type: hosts, source: "proxmox-host:boreas", target: "lxc:db"}
  - {type: runs-on, source: "service:nginx", target: "lxc:web"}
`

type movedRow struct {
	entity, health string
	left           bool
	movedTo        *string
}

func membersOf(t *testing.T, r *rig, incident string) map[string]movedRow {
	t.Helper()
	rows, err := r.lab.DB.Query(context.Background(), `SELECT e.slug, m.health, m.left_at IS NOT NULL, m.moved_to
FROM incident_members m JOIN entities e ON e.id = m.entity_id WHERE m.incident_id = $1 AND m.role = 'affected'`, incident)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]movedRow{}
	for rows.Next() {
		var m movedRow
		if err := rows.Scan(&m.entity, &m.health, &m.left, &m.movedTo); err != nil {
			t.Fatal(err)
		}
		out[m.entity] = m
	}
	return out
}

// A node down with HA guests is one incident, the node's; when ha-manager recovers the
// guests on the surviving nodes they are up there (checked through their new nodes' hops),
// listed in the node's incident as moved, and open nothing of their own; the node's return
// resolves the incident as ever.
func TestNodeDownWithHAGuestsIsOneIncidentListingThemMoved(t *testing.T) {
	t.Parallel()
	// Recovery happens when the test says (ha-manager's fence-and-recover, Sim.RecoverHA),
	// once the incident is open: a fixed delay would race the incident's threshold.
	lab := labtest.New(t, labtest.Options{Inventory: []byte(haInventory), HARecoveryDelay: -1})
	lab.StartAllGuests(t)
	lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool {
		d.Interval, d.Timeout = time.Second, time.Second
		return d.Kind != "http"
	})
	r := &rig{lab: lab}
	reg := metrics.NewRegistry()
	startHARig(t, r, reg)
	db := lab.DB
	all := []string{"proxmox-host:atlas", "proxmox-host:boreas", "proxmox-host:ceres", "lxc:web", "vm:hass", "lxc:media", "lxc:db", "service:nginx"}
	waitAllUp(t, db, all...)

	if err := lab.Sim.SetHostFault("atlas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{"lxc:media", "lxc:web", "service:nginx", "vm:hass"}
	waitFor(t, 20*time.Second, "one incident rooted at atlas with its guests", func() (bool, string) {
		got := incidentsOf(t, db, true)
		return len(got) == 1 && got[0].root == "proxmox-host:atlas" && fmt.Sprint(got[0].affected) == fmt.Sprint(want), describe(got)
	})
	in := incidentsOf(t, db, true)[0]

	moved, err := lab.Sim.RecoverHA("atlas")
	if err != nil {
		t.Fatal(err)
	}
	dest := map[string]string{}
	for _, p := range moved {
		kind := "lxc"
		if p.Kind == "vm" {
			kind = "vm"
		}
		dest[kind+":"+p.Name] = "proxmox-host:" + p.Host
	}
	if len(dest) != 2 || dest["lxc:web"] == "" || dest["vm:hass"] == "" {
		t.Fatalf("ha-manager recovered %+v", moved)
	}
	waitFor(t, 20*time.Second, "web, hass and nginx up on the surviving nodes, listed as moved", func() (bool, string) {
		for _, s := range []string{"lxc:web", "vm:hass", "service:nginx"} {
			if h := healthOf(t, db, s); h != "up" {
				return false, s + " is " + h
			}
		}
		ms := membersOf(t, r, in.id)
		for guest, to := range dest {
			if m := ms[guest]; !m.left || m.movedTo == nil || *m.movedTo != to || m.health != "up" {
				return false, fmt.Sprintf("%s: %+v", guest, m)
			}
		}
		if m := ms["service:nginx"]; !m.left || m.movedTo != nil {
			return false, fmt.Sprintf("nginx (which did not move itself): %+v", m)
		}
		if m := ms["lxc:media"]; m.left {
			return false, "media (not HA) left"
		}
		return true, ""
	})
	got := incidentsOf(t, db, false)
	if len(got) != 1 || got[0].status == "resolved" || fmt.Sprint(got[0].affected) != "[lxc:media]" {
		t.Fatalf("incidents after the recovery: %s", describe(got))
	}
	// The incident.updated event names the moved guests and where they went.
	var ev []signals.IncidentMoved
	rows, err := db.Query(context.Background(), `SELECT payload->'moved' FROM events WHERE type = $1 AND payload ? 'moved'`, EventUpdated)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var ms []signals.IncidentMoved
		if err := json.Unmarshal(raw, &ms); err != nil {
			t.Fatal(err)
		}
		ev = append(ev, ms...)
	}
	rows.Close()
	sort.Slice(ev, func(i, j int) bool { return ev[i].Entity < ev[j].Entity })
	if len(ev) != 2 || ev[0].Entity != "lxc:web" || ev[0].To != dest["lxc:web"] || ev[0].From != "proxmox-host:atlas" ||
		ev[1].Entity != "vm:hass" || ev[1].To != dest["vm:hass"] {
		t.Errorf("moved in incident.updated: %+v", ev)
	}
	if n := reg.Value("oikos_scheduler_cluster_queries_total"); n < 1 {
		t.Errorf("the cluster was never asked (%v)", n)
	}

	if err := lab.Sim.SetHostFault("atlas", labsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "atlas's incident resolved", func() (bool, string) {
		got := incidentsOf(t, db, false)
		return len(got) == 1 && got[0].status == "resolved", describe(got)
	})
	waitAllUp(t, db, all...)
	if n := countEvents(t, db, EventOpened); n != 1 {
		t.Errorf("%d incidents opened, want only atlas's", n)
	}
	ms := membersOf(t, r, in.id)
	for guest, to := range dest {
		if m := ms[guest]; m.movedTo == nil || *m.movedTo != to {
			t.Errorf("after the resolution %s: %+v", guest, m)
		}
	}
}

// startHARig starts a runner and an engine on r.lab as the scheduler wires them.
func startHARig(t *testing.T, r *rig, reg *metrics.Registry) {
	t.Helper()
	e, err := New(Options{Pool: r.lab.DB, Logger: zerolog.Nop(), Metrics: metrics.NewRegistry(), Every: 300 * time.Millisecond,
		Settle: 20 * time.Millisecond, MinGap: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run, err := checkrun.NewRunner(checkrun.Options{Pool: r.lab.DB, SSH: r.lab.SSH, Fleet: r.lab.Fleet, Logger: zerolog.Nop(),
		Metrics: reg, InitialSpread: 300 * time.Millisecond, FlushEvery: 50 * time.Millisecond, OnFlush: e.Flushed})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := run.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.runner, r.engine = run, e
	t.Cleanup(r.stop)
}
