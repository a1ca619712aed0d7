package labsim

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/seeds"
)

// TestSeededFleetTellsTheTruth: what the seeded checks look at is there on a healthy demo
// fleet: a fresh file in every backup directory (on a host, a workstation and inside a
// guest), and a listener on the NFS export's port.
func TestSeededFleetTellsTheTruth(t *testing.T) {
	t.Parallel()
	f, err := FleetFromInventory(seeds.Inventory())
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string][]string{}
	for _, h := range f.Hosts {
		dirs[h.Name] = h.BackupDirs
		for _, g := range h.Guests {
			dirs[g.Name] = g.BackupDirs
		}
	}
	for holder, dir := range map[string]string{"edge": "/var/backups/netbird", "studio": "/Users/dana/Backups/immich", "pbs": "/mnt/datastore/main"} {
		if !strings.Contains(strings.Join(dirs[holder], " "), dir) {
			t.Errorf("%s holds %v, want %s", holder, dirs[holder], dir)
		}
	}
	if !strings.Contains(strings.Join(f.TCPListeners, " "), "127.0.11.2:2049") {
		t.Errorf("TCP listeners %v lack the NFS export 127.0.11.2:2049", f.TCPListeners)
	}

	sim := startSim(t, f, func(o *Options) { o.FreshBackups = true })
	edge := dialHost(t, sim, "edge")
	if r := run(t, edge, "find /var/backups/netbird -type f -mmin -5"); !strings.Contains(r.stdout, backupFile) {
		t.Errorf("no fresh backup on edge: %+v", r)
	}
	ceres := dialHost(t, sim, "ceres")
	var pbs int
	for _, h := range f.Hosts {
		for _, g := range h.Guests {
			if g.Name == "pbs" {
				pbs = g.VMID
			}
		}
	}
	if r := run(t, ceres, "pct exec "+strconv.Itoa(pbs)+" -- find /mnt/datastore/main -type f -mmin -5"); !strings.Contains(r.stdout, backupFile) {
		t.Errorf("no fresh backup in lxc:pbs: %+v", r)
	}
	c, err := sim.DialContext(context.Background(), "tcp", "127.0.11.2:2049")
	if err != nil {
		t.Fatalf("the NFS port does not answer: %v", err)
	}
	c.Close()
}

// TestSeededInventory checks the repository's seeded inventory builds a fleet the simulator
// accepts, with guests found both through `host` (name or slug) and through a hosts edge.
func TestSeededInventory(t *testing.T) {
	t.Parallel()
	f, err := FleetFromInventory(seeds.Inventory())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Host{}
	for _, h := range f.Hosts {
		byName[h.Name] = h
	}
	atlas, ok := byName["atlas"]
	if !ok || atlas.Kind != KindProxmox || len(atlas.Guests) == 0 {
		t.Fatalf("atlas: %+v", atlas)
	}
	var ha []int
	for _, h := range f.Hosts {
		for _, g := range h.Guests {
			if g.VMID == 0 || g.Kind == "" {
				t.Errorf("%s: guest %+v", h.Name, g)
			}
			if g.HA {
				ha = append(ha, g.VMID)
			}
		}
	}
	// The demo cluster has HA-managed guests (ha: true) for ha-manager and recovery.
	if len(ha) < 2 || atlas.Cluster != "olympus" {
		t.Errorf("HA guests of the demo cluster: %v (atlas in %q)", ha, atlas.Cluster)
	}
	sim, err := New(f, Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("the seeded fleet must be accepted: %v", err)
	}
	sim.Stop()
}
