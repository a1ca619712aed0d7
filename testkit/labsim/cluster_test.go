package labsim

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// threeNodes is a 3-node cluster (atlas, boreas, ceres) with two HA guests on atlas and a
// standalone Proxmox node (solo).
func threeNodes() Fleet {
	return Fleet{Hosts: []Host{
		{Name: "atlas", Kind: KindProxmox, Addr: "127.0.10.1:2222", Cluster: "olympus", Cores: 16, MemoryMB: 65536, Guests: []Guest{
			{VMID: 101, Kind: GuestLXC, Name: "web", Hostname: "web", Status: StatusRunning, HA: true},
			{VMID: 102, Kind: GuestLXC, Name: "db", Hostname: "db", Status: StatusRunning},
			{VMID: 150, Kind: GuestVM, Name: "homeassistant", Status: StatusRunning, HA: true, GuestAgent: true},
		}},
		{Name: "boreas", Kind: KindProxmox, Addr: "127.0.10.2:2222", Cluster: "olympus", Guests: []Guest{
			{VMID: 201, Kind: GuestLXC, Name: "git", Hostname: "git", Status: StatusRunning},
		}},
		{Name: "ceres", Kind: KindProxmox, Addr: "127.0.10.3:22", Cluster: "olympus"},
		{Name: "solo", Kind: KindProxmox, Addr: "127.0.10.9:2222"},
	}}
}

func TestClusterStatusAndPvecm(t *testing.T) {
	sim := startSim(t, threeNodes(), nil)
	a := dialHost(t, sim, "atlas")
	r := run(t, a, "pvesh get /cluster/status --output-format json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) != 4 {
		t.Fatalf("cluster status: %v %q", err, r.stdout)
	}
	want := []map[string]any{
		{"type": "cluster", "id": "cluster", "name": "olympus", "nodes": 3.0, "quorate": 1.0, "version": 3.0},
		{"type": "node", "id": "node/atlas", "name": "atlas", "ip": "127.0.10.1", "nodeid": 1.0, "online": 1.0, "local": 1.0, "level": ""},
		{"type": "node", "id": "node/boreas", "name": "boreas", "ip": "127.0.10.2", "nodeid": 2.0, "online": 1.0, "local": 0.0, "level": ""},
		{"type": "node", "id": "node/ceres", "name": "ceres", "ip": "127.0.10.3", "nodeid": 3.0, "online": 1.0, "local": 0.0, "level": ""},
	}
	for i, w := range want {
		for k, v := range w {
			if items[i][k] != v {
				t.Errorf("item %d %s = %v, want %v", i, k, items[i][k], v)
			}
		}
		if len(items[i]) != len(w) {
			t.Errorf("item %d has keys %v", i, items[i])
		}
	}
	r = run(t, a, "pvecm nodes")
	if r.code != 0 || r.stdout != "\nMembership information\n----------------------\n"[1:]+
		"    Nodeid      Votes Name\n         1          1 atlas (local)\n         2          1 boreas\n         3          1 ceres\n" {
		t.Fatalf("pvecm nodes: %+v", r)
	}
	r = run(t, a, "pvecm status")
	for _, line := range []string{"Cluster information\n-------------------\nName:             olympus\nConfig Version:   3\nTransport:        knet\nSecure auth:      on\n\n",
		"Quorum provider:  corosync_votequorum\nNodes:            3\nNode ID:          0x00000001\n", "Quorate:          Yes\n",
		"Expected votes:   3\nHighest expected: 3\nTotal votes:      3\nQuorum:           2  \nFlags:            Quorate \n",
		"0x00000001          1 127.0.10.1 (local)\n0x00000002          1 127.0.10.2\n"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("pvecm status lacks %q:\n%s", line, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^Date:             \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}$`).MatchString(r.stdout) {
		t.Errorf("pvecm status date:\n%s", r.stdout)
	}
	// A node in no cluster.
	s := dialHost(t, sim, "solo")
	for _, cmd := range []string{"pvecm status", "pvecm nodes"} {
		if r := run(t, s, cmd); r.code != 2 || r.stderr != "Error: Corosync config '/etc/pve/corosync.conf' does not exist - is this node part of a cluster?\n" {
			t.Errorf("%s on a standalone node: %+v", cmd, r)
		}
	}
	r = run(t, s, "pvesh get /cluster/status --output-format json")
	if r.stdout != `[{"id":"node/solo","ip":"127.0.10.9","level":"","local":1,"name":"solo","nodeid":0,"online":1,"type":"node"}]`+"\n" {
		t.Errorf("standalone cluster status: %q", r.stdout)
	}
	// One node down: still quorate, the node offline, pvecm lists the others.
	if err := sim.SetHostFault("ceres", Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	r = run(t, a, "pvesh get /cluster/status --output-format json")
	if !strings.Contains(r.stdout, `"name":"ceres","nodeid":3,"online":0`) || !strings.Contains(r.stdout, `"quorate":1`) {
		t.Errorf("status with ceres down: %s", r.stdout)
	}
	if r := run(t, a, "pvesh get /nodes/ceres/lxc --output-format json"); r.code != 255 ||
		!strings.HasPrefix(r.stderr, "ssh: connect to host 127.0.10.3 port 22: No route to host\nproxy handler failed: command '/usr/bin/ssh") {
		t.Errorf("a down node's path: %+v", r)
	}
	if r := run(t, a, "pvecm status"); !strings.Contains(r.stdout, "Nodes:            2\n") || strings.Contains(r.stdout, "127.0.10.3") {
		t.Errorf("pvecm status with ceres down:\n%s", r.stdout)
	}
	if err := sim.SetHostFault("boreas", Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	r = run(t, a, "pvecm status")
	if !strings.Contains(r.stdout, "Quorate:          No\n") || !strings.Contains(r.stdout, "Quorum:           2 Activity blocked\n") {
		t.Errorf("pvecm status without quorum:\n%s", r.stdout)
	}
}

func TestClusterKnownHosts(t *testing.T) {
	sim := startSim(t, threeNodes(), nil)
	key := func(h string) string {
		return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sim.HostKey(h))))
	}
	want := "atlas " + key("atlas") + "\n[127.0.10.1]:2222 " + key("atlas") + "\n" +
		"boreas " + key("boreas") + "\n[127.0.10.2]:2222 " + key("boreas") + "\n" +
		"ceres " + key("ceres") + "\n127.0.10.3 " + key("ceres") + "\n"
	// A node whose host key changed is still listed with its original key.
	if err := sim.SetHostFault("boreas", Fault{ChangedHostKey: true}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"atlas", "ceres"} {
		c := dialHost(t, sim, node)
		if r := run(t, c, "cat /etc/pve/priv/known_hosts"); r.code != 0 || r.stdout != want {
			t.Errorf("known_hosts on %s:\n%s\nwant\n%s", node, r.stdout, want)
		}
		for _, other := range []string{"atlas", "boreas", "ceres"} {
			if r := run(t, c, "cat /etc/pve/nodes/"+other+"/ssh_known_hosts"); r.stdout != other+" "+key(other) {
				t.Errorf("%s: ssh_known_hosts of %s = %q", node, other, r.stdout)
			}
		}
		// Each line parses as OpenSSH known_hosts and names the key the node serves.
		r := run(t, c, "cat /etc/pve/priv/known_hosts")
		rest := []byte(r.stdout)
		n := 0
		for len(rest) > 0 {
			_, hosts, pub, _, next, err := ssh.ParseKnownHosts(rest)
			if err != nil {
				break
			}
			h := map[string]string{"atlas": "atlas", "[127.0.10.1]:2222": "atlas", "boreas": "boreas", "[127.0.10.2]:2222": "boreas",
				"ceres": "ceres", "127.0.10.3": "ceres"}[hosts[0]]
			if string(pub.Marshal()) != string(sim.HostKey(h).Marshal()) {
				t.Errorf("known_hosts line for %v has another key", hosts)
			}
			rest, n = next, n+1
		}
		if n != 6 {
			t.Errorf("known_hosts parsed %d lines", n)
		}
	}
	if _, err := tryDial(sim, "boreas", clientConfig(sim, "boreas")); err == nil {
		t.Fatal("a changed host key must not match the pinned one")
	}
	c := dialHost(t, sim, "atlas")
	if r := run(t, c, "cat /etc/pve/corosync.conf"); !strings.Contains(r.stdout, "  node {\n    name: boreas\n    nodeid: 2\n    quorum_votes: 1\n    ring0_addr: 127.0.10.2\n  }\n") ||
		!strings.Contains(r.stdout, "  cluster_name: olympus\n  config_version: 3\n") {
		t.Errorf("corosync.conf:\n%s", r.stdout)
	}
}

func TestHARecoveryAfterNodeDown(t *testing.T) {
	recovered := make(chan []Placement, 1)
	sim := startSim(t, threeNodes(), func(o *Options) {
		o.HARecoveryDelay = 20 * time.Millisecond
		o.OnHARecovery = func(host string, moved []Placement) {
			if host == "atlas" {
				recovered <- moved
			}
		}
	})
	b := dialHost(t, sim, "boreas")
	r := run(t, b, "ha-manager status")
	if !regexp.MustCompile(`^quorum OK\nmaster atlas \(active, \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\)\n` +
		`lrm atlas \(active, [^)]+\)\nlrm boreas \(idle, [^)]+\)\nlrm ceres \(idle, [^)]+\)\n` +
		`service ct:101 \(atlas, started\)\nservice vm:150 \(atlas, started\)\n$`).MatchString(r.stdout) {
		t.Fatalf("ha-manager status:\n%s", r.stdout)
	}
	if r := run(t, b, "ha-manager config"); r.stdout != "ct:101\n\tstate started\n\nvm:150\n\tstate started\n\n" {
		t.Fatalf("ha-manager config: %q", r.stdout)
	}
	r = run(t, b, "pvesh get /cluster/resources --type vm --output-format json")
	if !strings.Contains(r.stdout, `"hastate":"started"`) || strings.Count(r.stdout, "hastate") != 2 {
		t.Fatalf("hastate in cluster resources: %s", r.stdout)
	}

	if err := sim.SetHostFault("atlas", Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	var moved []Placement
	select {
	case moved = <-recovered:
	case <-time.After(5 * time.Second):
		t.Fatal("no HA recovery")
	}
	if len(moved) != 2 || moved[0].VMID != 101 || moved[1].VMID != 150 || moved[0].Status != "running" ||
		moved[0].Host == "atlas" || moved[1].Host == "atlas" || moved[0].Host == moved[1].Host {
		t.Fatalf("recovered: %+v", moved)
	}
	// ceres (no guests) takes the first, then boreas and ceres hold one each.
	if moved[0].Host != "ceres" || moved[1].Host != "boreas" {
		t.Fatalf("recovery placement: %+v", moved)
	}
	r = run(t, b, "ha-manager status")
	for _, want := range []string{"lrm atlas (old timestamp - dead?, ", "service ct:101 (ceres, started)\n", "service vm:150 (boreas, started)\n", "master boreas (active, "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ha-manager status after recovery lacks %q:\n%s", want, r.stdout)
		}
	}
	// The non-HA guest stays with its down node, shown unknown; the recovered ones run.
	r = run(t, b, "pvesh get /cluster/resources --type vm --output-format json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
		t.Fatal(err)
	}
	got := map[float64]string{}
	for _, it := range items {
		got[it["vmid"].(float64)] = it["node"].(string) + "/" + it["status"].(string)
	}
	if got[102] != "atlas/unknown" || got[101] != "ceres/running" || got[150] != "boreas/running" {
		t.Fatalf("cluster resources after recovery: %v", got)
	}
	c := dialHost(t, sim, "ceres")
	if r := run(t, c, "pct exec 101 -- hostname"); r.stdout != "web\n" {
		t.Fatalf("pct exec on the recovery node: %+v", r)
	}
}

func TestHAFenceThenBackUp(t *testing.T) {
	sim := startSim(t, threeNodes(), func(o *Options) { o.HARecoveryDelay = -1 })
	if err := sim.SetHostFault("atlas", Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	b := dialHost(t, sim, "boreas")
	if r := run(t, b, "ha-manager status"); !strings.Contains(r.stdout, "service ct:101 (atlas, fence)\n") {
		t.Fatalf("fence state:\n%s", r.stdout)
	}
	if err := sim.SetHostFault("atlas", Fault{}); err != nil {
		t.Fatal(err)
	}
	if r := run(t, b, "ha-manager status"); !strings.Contains(r.stdout, "service ct:101 (atlas, started)\n") {
		t.Fatalf("back up:\n%s", r.stdout)
	}
	if moved, err := sim.RecoverHA("atlas"); err != nil || len(moved) != 0 {
		t.Fatalf("recover an up node: %v %v", moved, err)
	}
}

func TestMigrateInAThreeNodeCluster(t *testing.T) {
	sim := startSim(t, threeNodes(), func(o *Options) {
		o.ControlAddr = "127.0.0.1:0"
		o.HARecoveryDelay = -1
	})
	if err := sim.SetHostFault("ceres", Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	a := dialHost(t, sim, "atlas")
	// Still quorate with one of three down; the task fails on the unreachable target.
	r := run(t, a, "pct migrate 102 ceres --restart")
	if r.code != 255 || !strings.Contains(r.stdout, "starting migration of CT 102 to node 'ceres' (127.0.10.3)\n") ||
		!strings.HasSuffix(r.stdout, "ERROR: migration aborted (duration 00:00:00): Can't connect to destination address using public key\nTASK ERROR: migration aborted\n") {
		t.Fatalf("migrate to a down node: %+v", r)
	}
	ctl := "http://" + sim.ControlAddr()
	if resp, m := postMigrate(t, ctl, "atlas", "102", `{"target": "ceres"}`); resp.StatusCode != 409 || m["field"] != "target" {
		t.Fatalf("control migrate to a down node: %d %v", resp.StatusCode, m)
	}
	// An HA guest asks the CRM.
	r = run(t, a, "qm migrate 150 boreas --online")
	if r.code != 0 || r.stdout != "Requesting HA migration for VM 150 to node boreas\n" {
		t.Fatalf("HA migrate: %+v", r)
	}
	if p, _ := sim.GuestPlacement("atlas", 150); p.Host != "boreas" || p.Status != "running" {
		t.Fatalf("HA guest after migrate: %+v", p)
	}
	// The control API recovers a down node's HA guests at once.
	if err := sim.SetHostFault("ceres", Fault{}); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetHostFault("atlas", Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(ctl+"/ha/recover/atlas", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var moved []Placement
	if err := json.NewDecoder(resp.Body).Decode(&moved); err != nil || resp.StatusCode != 200 || len(moved) != 1 ||
		moved[0].VMID != 101 || moved[0].Host != "ceres" || moved[0].Status != "running" {
		t.Fatalf("POST /ha/recover: %d %+v %v", resp.StatusCode, moved, err)
	}
}
