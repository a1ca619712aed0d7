package checks

import (
	"os"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/ontology"
)

func TestCoverageGap(t *testing.T) {
	t.Parallel()
	o := mustOntology(t)
	cases := []struct {
		name      string
		target    Target
		lookup    Lookup
		gap       bool
		reasonHas []string
	}{
		{name: "monitored host", target: nas, lookup: fleet},
		{name: "monitored lxc", target: ent("lxc", "jellyfin", map[string]any{"vmid": 101}), lookup: fleet},
		{
			name:   "guest with no owning host is a gap naming why",
			target: ent("lxc", "orphan", map[string]any{"vmid": 150}), lookup: fleet, gap: true,
			reasonHas: []string{"lxc:orphan", "proxmox-guest (no owning Proxmox host", "ssh-script cpu (no owning Proxmox host"},
		},
		{
			name:   "vm without agent and without host: the status check it warrants is missing",
			target: ent("vm", "ghost", map[string]any{"vmid": 300}), lookup: fleet, gap: true,
			reasonHas: []string{"proxmox-guest"},
		},
		{
			name:   "service with no unit and no url (process declared unconditionally)",
			target: ent("service", "grafana", nil), lookup: fleet, gap: true,
			reasonHas: []string{"ssh-script process (process check needs the unit"},
		},
		{
			name:   "backup target nobody holds",
			target: ent("backup-target", "lonely", map[string]any{"path": "/srv/lonely"}), lookup: fleet, gap: true,
			reasonHas: []string{"backup-freshness", "no backs-up-to edge"},
		},
		{name: "type declaring none", target: ent("site", "home", nil), lookup: fleet},
		{name: "entity declaring none", target: ent("lxc", "orphan", map[string]any{"vmid": 150, "monitoring": "none"}), lookup: fleet},
		{
			name: "every spec disabled by the entity",
			target: ent("workstation", "laptop", map[string]any{
				"monitoring": []any{map[string]any{"kind": "ssh-script", "script": "cpu", "disabled": true}},
			}),
			lookup: fleet,
		},
		{name: "spec not applicable (requires_all unmet)", target: ent("nfs-export", "unknown-port", map[string]any{"host": "127.0.11.5"}), lookup: fleet},
		{name: "destroyed entity", target: withState(ent("lxc", "orphan", map[string]any{"vmid": 150}), "destroyed"), lookup: fleet},
		{name: "deprecated entity", target: withState(ent("ingress-route", "old.lab.example", nil), "deprecated"), lookup: fleet},
		{name: "type that declares no monitoring", target: ent("note", "todo", nil), lookup: fleet},
		{name: "unknown type", target: ent("toaster", "kitchen", nil), lookup: fleet},
		{
			name:   "none type with an entity-added check that cannot be derived",
			target: ent("site", "colo", map[string]any{"monitoring": []any{map[string]any{"kind": "tcp"}}}), lookup: fleet, gap: true,
			reasonHas: []string{"tcp (tcp check needs an address"},
		},
		{
			name:   "partly derived is not a gap",
			target: ent("vm", "homeassistant", map[string]any{"vmid": 200, "monitoring": []any{map[string]any{"kind": "tcp"}}}), lookup: fleet,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Derive(tc.target, o, tc.lookup)
			gap, reason := CoverageGap(tc.target, o, r)
			if gap != tc.gap {
				t.Fatalf("gap = %v (%q), want %v; result %+v", gap, reason, tc.gap, r)
			}
			if !gap && reason != "" {
				t.Errorf("no gap but reason %q", reason)
			}
			for _, w := range tc.reasonHas {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q does not contain %q", reason, w)
				}
			}
		})
	}
}

// TestCoverageSeedOntology runs every concrete type of the real seeds/ontology.yaml through
// Derive and CoverageGap with bare attributes: a type declaring `monitoring: none` must
// never be a gap (the original sweep's false positives), and a type declaring monitoring
// must be a gap exactly when nothing was derived although a spec applied.
func TestCoverageSeedOntology(t *testing.T) {
	t.Parallel()
	// The test runs in shared/checks; the seed ontology is part of the repository, so a
	// missing file is a failure, never a reason to skip.
	data, err := os.ReadFile("../../seeds/ontology.yaml")
	if err != nil {
		t.Fatalf("read seed ontology (seeds/ontology.yaml, two levels above shared/checks): %v", err)
	}
	o, err := ontology.Parse(data)
	if err != nil {
		t.Fatalf("parse seed ontology: %v", err)
	}
	noneTypes := 0
	for _, typ := range o.Types() {
		if typ.Abstract {
			continue
		}
		tg := ent(typ.Name, "probe", map[string]any{})
		r := Derive(tg, o, graph{})
		gap, reason := CoverageGap(tg, o, r)
		if typ.MonitoringNone {
			noneTypes++
			if gap || len(r.Defs) > 0 || !r.MonitoringNone {
				t.Errorf("%s declares monitoring none but gap=%v (%s), %d defs", typ.Name, gap, reason, len(r.Defs))
			}
			continue
		}
		applies := false
		for _, s := range typ.Monitoring {
			applies = applies || s.AppliesTo(tg.Attributes)
		}
		if want := applies && len(r.Defs) == 0; gap != want {
			t.Errorf("%s: gap=%v (%s), want %v (defs %d, skipped %+v)", typ.Name, gap, reason, want, len(r.Defs), r.Skipped)
		}
	}
	if noneTypes == 0 {
		t.Errorf("seed ontology has no monitoring: none types; the test checks nothing")
	}
}
