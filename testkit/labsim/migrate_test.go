package labsim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// clusterFleet is testFleet with a Proxmox node outside the cluster (ceres).
func clusterFleet() Fleet {
	fl := testFleet()
	fl.Hosts = append(fl.Hosts, Host{Name: "ceres", Kind: KindProxmox, Addr: "127.0.10.3:2222", Node: "ceres", User: "root",
		Guests: []Guest{{VMID: 300, Kind: GuestLXC, Name: "lonely", Hostname: "lonely", Status: StatusRunning}}})
	return fl
}

func postMigrate(t *testing.T, ctl, host, vmid, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Post(ctl+"/guests/"+host+"/"+vmid+"/migrate", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("decode answer: %v", err)
	}
	return resp, m
}

func TestControlMigrate(t *testing.T) {
	sim := startSim(t, clusterFleet(), func(o *Options) { o.ControlAddr = "127.0.0.1:0" })
	ctl := "http://" + sim.ControlAddr()

	resp, m := postMigrate(t, ctl, "atlas", "101", `{"target": "boreas"}`)
	if resp.StatusCode != 200 || m["host"] != "boreas" || m["node"] != "boreas" || m["vmid"] != float64(101) ||
		m["name"] != "web" || m["kind"] != "lxc" || m["status"] != "running" {
		t.Fatalf("migrate: %d %v", resp.StatusCode, m)
	}
	if p, err := sim.GuestPlacement("atlas", 101); err != nil || p.Host != "boreas" {
		t.Fatalf("placement after migrate: %+v %v", p, err)
	}
	// The guest answers on its new node and is gone from the old one.
	b := dialHost(t, sim, "boreas")
	if r := run(t, b, "pct exec 101 -- hostname"); r.code != 0 || r.stdout != "web\n" {
		t.Fatalf("pct exec on the new node: %+v", r)
	}
	a := dialHost(t, sim, "atlas")
	if r := run(t, a, "pct status 101"); r.code != 2 || r.stderr != "Configuration file 'nodes/atlas/lxc/101.conf' does not exist\n" {
		t.Fatalf("pct status on the old node: %+v", r)
	}
	// The HTTP route follows its guest.
	req, _ := http.NewRequest("GET", "http://"+sim.HTTPAddr()+"/", nil)
	req.Host = "web.lab.example"
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("route after migrate: %v %v", r, err)
	} else {
		r.Body.Close()
	}

	for _, c := range []struct{ host, vmid, body, field string }{
		{"atlas", "101", `{"target": "boreas"}`, "vmid"},     // no longer there
		{"boreas", "101", `{"target": "nowhere"}`, "target"}, // unknown node
		{"boreas", "101", `{"target": "ceres"}`, "target"},   // outside the cluster
		{"boreas", "101", `{"target": "boreas"}`, "target"},  // its own node
		{"boreas", "999", `{"target": "atlas"}`, "vmid"},     // no such guest
		{"nohost", "101", `{"target": "atlas"}`, "host"},
		{"boreas", "abc", `{"target": "atlas"}`, "vmid"},
		{"boreas", "101", `{}`, "target"},
	} {
		resp, m := postMigrate(t, ctl, c.host, c.vmid, c.body)
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" ||
			m["field"] != c.field || m["title"] == "" || m["detail"] == "" || m["status"] != float64(400) {
			t.Errorf("%s/%s %s: %d %s %v", c.host, c.vmid, c.body, resp.StatusCode, resp.Header.Get("Content-Type"), m)
		}
	}
}

func TestQmPctMigrateOverSSH(t *testing.T) {
	sim := startSim(t, clusterFleet(), nil)
	a := dialHost(t, sim, "atlas")
	b := dialHost(t, sim, "boreas")
	for _, c := range []struct {
		cmd, stdout, stderr string
		code                int
	}{
		{"qm migrate", "", "400 not enough arguments\nqm migrate <vmid> <target> [OPTIONS]\n", 255},
		{"qm migrate 200", "", "400 not enough arguments\nqm migrate <vmid> <target> [OPTIONS]\n", 255},
		{"qm migrate 200 atlas", "", "400 Parameter verification failed.\ntarget: target is local node.\nqm migrate <vmid> <target> [OPTIONS]\n", 255},
		{"qm migrate 200 ceres", "", "no such cluster node 'ceres'\n", 255},
		{"qm migrate 999 boreas", "", "Configuration file 'nodes/atlas/qemu-server/999.conf' does not exist\n", 2},
		{"qm migrate 200 boreas", "", "can't migrate running VM without --online\n", 255},
		{"pct migrate 101 boreas", "", "can't migrate running container without --online or --restart\n", 255},
		{"qm migrate 200 boreas --bogus", "", "Unknown option: bogus\n400 unable to parse option\nqm migrate <vmid> <target> [OPTIONS]\n", 255},
	} {
		r := run(t, a, c.cmd)
		if r.code != c.code || r.stderr != c.stderr || r.stdout != c.stdout {
			t.Errorf("%s: %+v", c.cmd, r)
		}
	}
	// A live VM migration and a restart migration of a container.
	r := run(t, a, "qm migrate 200 boreas --online")
	if r.code != 0 || !strings.Contains(r.stdout, "starting migration of VM 200 to node 'boreas' (127.0.10.2)\n") ||
		!strings.HasSuffix(r.stdout, "migration finished successfully (duration 00:00:01)\n") {
		t.Fatalf("qm migrate --online: %+v", r)
	}
	r = run(t, a, "pct migrate 101 boreas --restart")
	if r.code != 0 || !strings.Contains(r.stdout, "shutdown CT 101\n") || !strings.Contains(r.stdout, "start container on target node\n") {
		t.Fatalf("pct migrate --restart: %+v", r)
	}
	// Offline: a stopped container, and --online on a stopped VM warns.
	if r := run(t, a, "pct migrate 102 boreas"); r.code != 0 || !strings.Contains(r.stdout, "starting migration of CT 102 to node 'boreas'") {
		t.Fatalf("pct migrate offline: %+v", r)
	}
	if r := run(t, a, "qm migrate 201 boreas --online"); r.code != 0 || r.stderr != "VM isn't running. Doing offline migration instead.\n" {
		t.Fatalf("qm migrate --online of a stopped VM: %+v", r)
	}
	if r := run(t, b, "qm guest exec 200 -- hostname"); r.code != 0 || !strings.Contains(r.stdout, `"out-data" : "homeassistant\n"`) {
		t.Fatalf("guest exec on the new node: %+v", r)
	}
	if r := run(t, b, "pct list"); !strings.Contains(r.stdout, "101        running                 web") ||
		!strings.Contains(r.stdout, "102        stopped                 db") {
		t.Fatalf("pct list on the new node: %q", r.stdout)
	}
	if r := run(t, a, "qm guest exec 200 -- hostname"); r.code != 2 || r.stderr != "Configuration file 'nodes/atlas/qemu-server/200.conf' does not exist\n" {
		t.Fatalf("guest exec on the old node: %+v", r)
	}
	// /cluster/resources sees the new node.
	r = run(t, a, "pvesh get /cluster/resources --type vm --output-format json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it["vmid"] == float64(200) && it["node"] != "boreas" {
			t.Fatalf("cluster resources after migrate: %v", it)
		}
	}
	// With one of two nodes down the cluster has no quorum.
	if err := sim.SetHostFault("atlas", Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	if r := run(t, b, "pct migrate 102 atlas"); r.code != 255 || r.stderr != "cluster not ready - no quorum?\n" {
		t.Fatalf("migrate without quorum: %+v", r)
	}
}
