package drift

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

// clusterInventory: a 3-node cluster (atlas, boreas, ceres) and a standalone Proxmox host
// (delta), each with guests.
const clusterInventory = `
entities:
  - {type: cluster, name: olympus}
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: proxmox-host, name: ceres, attributes: {lan_ipv4: 127.0.10.3, ssh_port: 2222, user: root, node: ceres, os: linux}}
  - {type: proxmox-host, name: delta, attributes: {lan_ipv4: 127.0.10.4, ssh_port: 2222, user: root, node: delta, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web}}
  - {type: lxc, name: db, attributes: {vmid: 102, host: atlas, hostname: db}}
  - {type: vm, name: ha, attributes: {vmid: 200, qemu_guest_agent: true}}
  - {type: lxc, name: cache, attributes: {vmid: 110, host: "proxmox-host:boreas", hostname: cache}}
  - {type: lxc, name: far, attributes: {vmid: 120, host: ceres, hostname: far}}
  - {type: lxc, name: solo, attributes: {vmid: 130, host: delta, hostname: solo}}
relationships:
  - {type: member-of, source: "proxmox-host:atlas", target: "cluster:olympus"}
  - {type: member-of, source: "proxmox-host:boreas", target: "cluster:olympus"}
  - {type: member-of, source: "proxmox-host:ceres", target: "cluster:olympus"}
  - {type: hosts, source: "proxmox-host:atlas", target: "vm:ha"}
`

// cmdLog records every command one scheduler sent, by host: what the lab received.
type cmdLog struct {
	inner Executor
	mu    sync.Mutex
	cmds  map[string][]string
}

func newCmdLog(inner Executor) *cmdLog { return &cmdLog{inner: inner, cmds: map[string][]string{}} }

func (c *cmdLog) Exec(ctx context.Context, t remote.Target, cmd string, out io.Writer) (remote.Result, error) {
	c.mu.Lock()
	c.cmds[t.Slug] = append(c.cmds[t.Slug], cmd)
	c.mu.Unlock()
	return c.inner.Exec(ctx, t, cmd, out)
}

// take returns the commands sent since the last take, and forgets them.
func (c *cmdLog) take() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.cmds
	c.cmds = map[string][]string{}
	return out
}

func total(cmds map[string][]string) int {
	n := 0
	for _, c := range cmds {
		n += len(c)
	}
	return n
}

// A cluster is listed with one pvesh get /cluster/resources, whatever its size, and a
// standalone host with pct list and qm list as before; a guest the cluster runs on another
// node is moved (not a ghost and missing), a new guest on a node is missing with its node
// and cluster and its configuration read through the cluster; the report names the
// cluster's nodes.
func TestDriftAsksTheClusterOnce(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(clusterInventory)})
	log := newCmdLog(lab.SSH)
	s := newService(t, lab, func(o *Options) { o.SSH = log })
	ctx := context.Background()

	rep, err := s.RunNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmds := log.take()
	clusterCalls := 0
	for h, cs := range cmds {
		for _, c := range cs {
			if c == ClusterResourcesCommand {
				clusterCalls++
				if h != "proxmox-host:atlas" {
					t.Errorf("cluster listed through %s, want its first member atlas", h)
				}
			}
		}
	}
	if clusterCalls != 1 || strings.Join(cmds["proxmox-host:delta"], ",") != "pct list,qm list" || total(cmds) != 3 {
		t.Errorf("commands sent %v: want one cluster listing and delta's two listings", cmds)
	}
	if len(rep.Missing) != 0 || len(rep.Ghost) != 0 || len(rep.Moved) != 0 || len(rep.Unchecked) != 0 {
		t.Errorf("a fleet in step reports missing %+v ghost %+v moved %+v unchecked %+v", rep.Missing, rep.Ghost, rep.Moved, rep.Unchecked)
	}
	if len(rep.Clusters) != 1 || rep.Clusters[0].Name != "cluster:olympus" || len(rep.Clusters[0].Nodes) != 3 {
		t.Fatalf("clusters %+v", rep.Clusters)
	}
	for _, n := range rep.Clusters[0].Nodes {
		if !n.Online || n.Host != "proxmox-host:"+n.Node || !strings.HasPrefix(n.Address, "127.0.10.") {
			t.Errorf("node %+v", n)
		}
	}
	if rep.Summary.Hosts != 4 || rep.Summary.GraphGuests != 6 || rep.Summary.LiveGuests != 6 {
		t.Errorf("summary %+v", rep.Summary)
	}

	// cache moves to ceres; a container appears on ceres behind the graph's back.
	if _, err := lab.Sim.MigrateGuest("boreas", 110, "ceres"); err != nil {
		t.Fatal(err)
	}
	lab.Exec(t, "proxmox-host:ceres", "pct create 150 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname stray --cores 3")
	log.take()
	rep, err = s.RunNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmds = log.take()
	if len(cmds["proxmox-host:atlas"]) != 2 || cmds["proxmox-host:atlas"][0] != ClusterResourcesCommand ||
		cmds["proxmox-host:atlas"][1] != "pvesh get /nodes/ceres/lxc/150/config --output-format json" || len(cmds["proxmox-host:ceres"]) != 0 {
		t.Errorf("commands sent %v: want the cluster listing and the stray's configuration, both through atlas", cmds)
	}
	want := Moved{Slug: "lxc:cache", VMID: 110, Kind: "lxc", From: "proxmox-host:boreas", To: "proxmox-host:ceres", Node: "ceres"}
	if len(rep.Moved) != 1 || rep.Moved[0] != want {
		t.Errorf("moved %+v, want %+v", rep.Moved, want)
	}
	if len(rep.Ghost) != 0 {
		t.Errorf("a moved guest is no ghost: %+v", rep.Ghost)
	}
	if len(rep.Missing) != 1 || rep.Missing[0].VMID != 150 || rep.Missing[0].Host != "proxmox-host:ceres" || rep.Missing[0].Node != "ceres" ||
		rep.Missing[0].Cluster != "cluster:olympus" || rep.Missing[0].Config == nil || rep.Missing[0].Config.Cores != 3 {
		t.Errorf("missing %+v", rep.Missing)
	}
	// The report's JSON carries exactly the names the api and the CLI read.
	raw, _ := json.Marshal(rep)
	for _, k := range []string{`"moved":[{"slug":"lxc:cache","vmid":110,"kind":"lxc","from":"proxmox-host:boreas","to":"proxmox-host:ceres","node":"ceres"}]`,
		`"clusters":[{"name":"cluster:olympus","nodes":[{"node":"atlas","address":"127.0.10.1","online":true,"host":"proxmox-host:atlas"}`,
		`"node":"ceres","cluster":"cluster:olympus"`} {
		if !strings.Contains(string(raw), k) {
			t.Errorf("report JSON lacks %s:\n%s", k, raw)
		}
	}
}

// A node that is down hides nothing: the cluster, listed through another member when the
// first does not answer, still places the down node's guests there, so they are unchecked
// (last known placement), never ghosts; the node is reported offline.
func TestDriftClusterNodeDownKeepsPlacement(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(clusterInventory)})
	log := newCmdLog(lab.SSH)
	s := newService(t, lab, func(o *Options) { o.SSH = log })
	if err := lab.Sim.SetHostFault("atlas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.RunNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cmds := log.take()
	if len(cmds["proxmox-host:atlas"]) != 1 || len(cmds["proxmox-host:boreas"]) != 1 || cmds["proxmox-host:boreas"][0] != ClusterResourcesCommand {
		t.Errorf("commands sent %v: want atlas tried once, then boreas", cmds)
	}
	if len(rep.Ghost) != 0 || len(rep.Missing) != 0 || len(rep.Moved) != 0 {
		t.Errorf("a down node's guests are neither ghosts, missing nor moved: ghost %+v missing %+v moved %+v", rep.Ghost, rep.Missing, rep.Moved)
	}
	unchecked := map[string]string{}
	for _, u := range rep.Unchecked {
		unchecked[u.Entity] = u.Reason
	}
	for _, e := range []string{"lxc:web", "lxc:db", "vm:ha"} {
		if !strings.Contains(unchecked[e], "offline in cluster cluster:olympus (last known placement)") {
			t.Errorf("%s: unchecked %q", e, unchecked[e])
		}
	}
	if len(rep.Unchecked) != 3 || rep.Clusters[0].Via != "proxmox-host:boreas" {
		t.Errorf("unchecked %+v, via %q", rep.Unchecked, rep.Clusters[0].Via)
	}
	for _, n := range rep.Clusters[0].Nodes {
		if n.Online != (n.Node != "atlas") {
			t.Errorf("node %+v", n)
		}
	}
	for _, h := range rep.Hosts {
		if h.Host == "proxmox-host:atlas" && (h.Reachable || h.Error != "offline in cluster cluster:olympus" || h.LXC != 2 || h.VM != 1) {
			t.Errorf("atlas %+v", h)
		}
	}
}

// A placement sweep lists only the clusters (one command, no configuration read), and is
// announced (drift.placement) only when a guest moved; a cluster node missing from the graph
// is named with host "", and the guests there are missing with their node and cluster.
func TestPlacementSweep(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(clusterInventory)})
	log := newCmdLog(lab.SSH)
	s := newService(t, lab, func(o *Options) { o.SSH = log })
	ctx := context.Background()
	rep, err := s.RunPlacementNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cmds := log.take(); total(cmds) != 1 || len(rep.Moved) != 0 || len(rep.Hosts) != 3 {
		t.Errorf("placement sweep sent %v, reported hosts %+v moved %+v", cmds, rep.Hosts, rep.Moved)
	}
	// ceres leaves the graph; web moves to boreas.
	if _, err := lab.DB.Exec(ctx, `UPDATE entities SET state = 'destroyed' WHERE slug = 'proxmox-host:ceres'`); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Sim.MigrateGuest("atlas", 101, "boreas"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err = s.RunPlacementNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("placement sweep: %s", time.Since(start))
	if cmds := log.take(); total(cmds) != 1 {
		t.Errorf("placement sweep sent %v: no configuration is read", cmds)
	}
	if len(rep.Moved) != 1 || rep.Moved[0].Slug != "lxc:web" || rep.Moved[0].To != "proxmox-host:boreas" {
		t.Errorf("moved %+v", rep.Moved)
	}
	if len(rep.Missing) != 1 || rep.Missing[0].VMID != 120 || rep.Missing[0].Host != "" || rep.Missing[0].Node != "ceres" ||
		rep.Missing[0].Cluster != "cluster:olympus" {
		t.Errorf("missing %+v", rep.Missing)
	}
	for _, n := range rep.Clusters[0].Nodes {
		if (n.Node == "ceres") != (n.Host == "") {
			t.Errorf("node %+v", n)
		}
	}
	var events, reports int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = $1`, EventPlacement).Scan(&events); err != nil || events != 1 {
		t.Errorf("%d drift.placement events (%v), want 1: a sweep without moves is silent", events, err)
	}
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM drift_reports WHERE trigger = 'placement' AND status = 'completed'`).Scan(&reports); err != nil || reports != 2 {
		t.Errorf("%d placement reports (%v)", reports, err)
	}
	// The daily discovery is not stood in for by a placement sweep.
	if last, err := s.db().LastDriftReport(ctx); err != nil || last != nil {
		t.Errorf("last full report %v (%v)", last, err)
	}
}

// IsMigration tells a migration from other commands.
func TestIsMigration(t *testing.T) {
	for c, want := range map[string]bool{"qm migrate 200 boreas --online": true, "pct migrate 101 ceres --restart": true,
		"/usr/sbin/pct migrate 101 ceres": true, "pct list": false, "qm start 200": false, "echo migrate": false} {
		if IsMigration(c) != want {
			t.Errorf("IsMigration(%q) = %v", c, !want)
		}
	}
}
