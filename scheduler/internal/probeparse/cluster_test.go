package probeparse

import "testing"

// The cluster listing as pvesh prints it (docs/proxmox.md): nodes with their status, guests
// with their node (a vmid may come as a string on older releases), storage skipped.
func TestParseClusterResources(t *testing.T) {
	out := []byte(`[{"id":"node/atlas","node":"atlas","status":"offline","type":"node"},` +
		`{"id":"lxc/108","name":"pihole","node":"boreas","status":"running","type":"lxc","vmid":108,"hastate":"started"},` +
		`{"id":"qemu/150","name":"homeassistant","node":"atlas","status":"unknown","type":"qemu","vmid":"150","hastate":"fence"},` +
		`{"id":"storage/atlas/local","node":"atlas","status":"unknown","storage":"local","type":"storage"}]`)
	cr, err := ParseClusterResources(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cr.Guests) != 2 || cr.Nodes["atlas"] != "offline" {
		t.Fatalf("%+v", cr)
	}
	if g := cr.Guests[108]; g.Node != "boreas" || g.Kind != "lxc" || g.Status != "running" || g.HAState != "started" || g.Name != "pihole" {
		t.Errorf("pihole %+v", g)
	}
	if g := cr.Guests[150]; g.Node != "atlas" || g.Kind != "qemu" || g.Status != "unknown" || g.HAState != "fence" {
		t.Errorf("homeassistant %+v", g)
	}
	for _, bad := range []string{`{"not": "an array"}`, `[{"type":"lxc","node":"atlas","vmid":"x"}]`, `[{"type":"qemu","vmid":100}]`} {
		if _, err := ParseClusterResources([]byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}
