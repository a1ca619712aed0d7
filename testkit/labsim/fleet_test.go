package labsim

import (
	"testing"

	"github.com/oikos-hq/oikos/seeds"
)

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
	for _, h := range f.Hosts {
		for _, g := range h.Guests {
			if g.VMID == 0 || g.Kind == "" {
				t.Errorf("%s: guest %+v", h.Name, g)
			}
		}
	}
	sim, err := New(f, Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("the seeded fleet must be accepted: %v", err)
	}
	sim.Stop()
}
