package labsim

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestPveshOverSSH(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	r := run(t, c, "pvesh get /nodes/atlas/lxc --output-format json")
	if strings.Count(r.stdout, "\n") != 1 || r.code != 0 {
		t.Fatalf("compact JSON must be one line: %q", r.stdout)
	}
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) != 3 {
		t.Fatalf("lxc list: %v %q", err, r.stdout)
	}
	for _, it := range items {
		for _, k := range []string{"vmid", "type", "status", "name", "cpus", "cpu", "mem", "maxmem", "swap", "maxswap", "disk", "maxdisk", "netin", "netout", "diskread", "diskwrite", "uptime"} {
			if _, ok := it[k]; !ok {
				t.Errorf("item %v lacks %s", it["vmid"], k)
			}
		}
		_, hasPID := it["pid"]
		if (it["status"] == "running") != hasPID {
			t.Errorf("pid only for running guests: %v", it)
		}
	}
	// /cluster/resources spans the cluster; the other node (boreas) is empty but listed.
	r = run(t, c, "pvesh get /cluster/resources --type vm --output-format json")
	var res []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res) != 6 {
		t.Fatalf("cluster resources: %v %q", err, r.stdout)
	}
	if res[3]["id"] != "qemu/200" || res[3]["node"] != "atlas" || res[3]["type"] != "qemu" {
		t.Fatalf("cluster resource: %v", res[3])
	}
	// /cluster/nextid: the lowest vmid from 100 that no guest of the cluster holds.
	used := map[int]bool{}
	for _, g := range res {
		if v, ok := g["vmid"].(float64); ok {
			used[int(v)] = true
		}
	}
	want := 100
	for used[want] {
		want++
	}
	r = run(t, c, "pvesh get /cluster/nextid --output-format json")
	var next string
	if err := json.Unmarshal([]byte(r.stdout), &next); err != nil || next != strconv.Itoa(want) || r.code != 0 {
		t.Fatalf("nextid = %q (%v), want %q", r.stdout, err, strconv.Itoa(want))
	}
	if err := sim.SetHostFault("atlas", Fault{}); err != nil {
		t.Fatal(err)
	}
	b := dialHost(t, sim, "boreas")
	r = run(t, b, "pvesh get /nodes/atlas/qemu --output-format json")
	if !strings.Contains(r.stdout, `"name":"homeassistant"`) {
		t.Fatalf("a node of the same cluster: %q", r.stdout)
	}
	if r := run(t, c, "pvesh get /nodes/nowhere/lxc"); r.code != 255 || !strings.Contains(r.stderr, "hostname lookup 'nowhere' failed") {
		t.Fatalf("unknown node: %+v", r)
	}
}
