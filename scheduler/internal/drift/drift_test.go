package drift

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

const inventory = `
entities:
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: proxmox-host, name: ceres, attributes: {lan_ipv4: 127.0.10.3, ssh_port: 2222, user: root, node: ceres, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web}}
  - {type: lxc, name: db, attributes: {vmid: 102, host: atlas, hostname: db}}
  - {type: vm, name: ha, attributes: {vmid: 200, qemu_guest_agent: true}}
  - {type: lxc, name: cache, attributes: {vmid: 110, host: "proxmox-host:boreas", hostname: cache}}
  - {type: lxc, name: far, attributes: {vmid: 120, host: ceres, hostname: far}}
relationships:
  - {type: hosts, source: "proxmox-host:atlas", target: "vm:ha"}
`

func newService(t *testing.T, lab *labtest.Lab, mod func(*Options)) *Service {
	t.Helper()
	o := Options{Pool: lab.DB, SSH: lab.SSH, Fleet: lab.Fleet, Logger: zerolog.Nop(), HostTimeout: 5 * time.Second}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Drift finds a guest created behind the graph's back (missing) and one destroyed behind it
// (ghost); an unreachable host's guests are neither, but unchecked; matching guests are not
// reported; the report is stored.
func TestDriftFindsMissingAndGhost(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inventory)})
	// Behind the graph's back: a new container on atlas, and db destroyed.
	lab.Exec(t, "proxmox-host:atlas", "pct create 150 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname stray")
	lab.Exec(t, "proxmox-host:atlas", "pct stop 102 && pct destroy 102")
	if err := lab.Sim.SetHostFault("ceres", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	s := newService(t, lab, nil)
	rep, err := s.RunNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Missing) != 1 || rep.Missing[0].Host != "proxmox-host:atlas" || rep.Missing[0].VMID != 150 ||
		rep.Missing[0].Kind != "lxc" || rep.Missing[0].Name != "stray" {
		t.Errorf("missing %+v", rep.Missing)
	}
	if len(rep.Ghost) != 1 || rep.Ghost[0].Entity != "lxc:db" || rep.Ghost[0].VMID != 102 || rep.Ghost[0].Host != "proxmox-host:atlas" {
		t.Errorf("ghost %+v", rep.Ghost)
	}
	if len(rep.Unchecked) != 1 || rep.Unchecked[0].Entity != "lxc:far" || !strings.Contains(rep.Unchecked[0].Reason, "ceres") {
		t.Errorf("unchecked %+v", rep.Unchecked)
	}
	var reachable []string
	for _, h := range rep.Hosts {
		if h.Reachable {
			reachable = append(reachable, h.Host)
		} else if h.Host != "proxmox-host:ceres" || h.Error == "" {
			t.Errorf("host %+v", h)
		}
	}
	sort.Strings(reachable)
	if strings.Join(reachable, ",") != "proxmox-host:atlas,proxmox-host:boreas" {
		t.Errorf("reachable %v", reachable)
	}
	// vm:ha is found through its hosts edge; cache through its slug-valued host attribute.
	if rep.Summary.GraphGuests != 5 || rep.Summary.HostsUnreachable != 1 {
		t.Errorf("summary %+v", rep.Summary)
	}
	var status string
	var missing, ghost int
	if err := lab.DB.QueryRow(context.Background(), `SELECT status, missing_count, ghost_count FROM drift_reports WHERE id = $1`, rep.ID).
		Scan(&status, &missing, &ghost); err != nil || status != "completed" || missing != 1 || ghost != 1 {
		t.Errorf("stored: %s %d %d (%v)", status, missing, ghost, err)
	}
	var events int
	if err := lab.DB.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE type = $1`, EventReported).Scan(&events); err != nil || events != 1 {
		t.Errorf("%d drift.reported events (%v)", events, err)
	}
}

// A request through NOTIFY oikos_drift is answered by a stored report listing its id; a
// repeated request id is not run twice.
func TestDriftOnDemandThroughNotify(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inventory)})
	cfg, err := pgx.ParseConfig(lab.DB.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	n := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
	s := newService(t, lab, func(o *Options) { o.Notifier = n; o.Poll = time.Hour })
	startWithNotifier(t, s, n)
	ctx := context.Background()
	req := uuid.NewString()
	if err := eventbus.Notify(ctx, lab.DB, eventbus.ChannelDrift, `{"request_id":"`+req+`"}`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var status string
	for {
		err := lab.DB.QueryRow(ctx, `SELECT status FROM drift_reports WHERE $1 = ANY(request_ids)`, req).Scan(&status)
		if err == nil && status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completed report for request %s (status %q, %v)", req, status, err)
		}
		<-tick.C
	}
	// The same request again: already answered, no second run.
	if _, err := s.runRequested(ctx, []string{req}); err != nil {
		t.Fatal(err)
	}
	var runs int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM drift_reports`).Scan(&runs); err != nil || runs != 1 {
		t.Errorf("%d reports (%v), want 1", runs, err)
	}
}
