package seed

import (
	"fmt"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/seedfile"
)

// generate builds a synthetic fleet of exactly entities entities and edges relationships,
// shaped like a large homelab: Proxmox hosts running guests, services on guests, ingress
// routes to services, backups, VLAN memberships, and a web of service dependencies.
// Addresses are loopback, names under .lab.example, as everywhere in Oikos.
func generate(entities, edges int) *seedfile.Inventory {
	inv := &seedfile.Inventory{File: "generated.yaml"}
	add := func(typ, name string, attrs map[string]any) string {
		inv.Entities = append(inv.Entities, seedfile.EntitySeed{Type: typ, Name: name, Attributes: attrs, Line: len(inv.Entities) + 1})
		return typ + ":" + name
	}
	edge := func(typ, src, dst string) {
		inv.Relationships = append(inv.Relationships, seedfile.EdgeSeed{Type: typ, Source: src, Target: dst, Line: len(inv.Relationships) + 1})
	}
	n := func(frac float64) int { return int(float64(entities) * frac) }
	var pve, guests, services, routes, backups, vlans []string
	for i := range max(n(0.002), 1) {
		pve = append(pve, add("proxmox-host", fmt.Sprintf("pve%03d", i), map[string]any{
			"node": fmt.Sprintf("pve%03d", i), "lan_ipv4": fmt.Sprintf("127.0.10.%d", i%250+1), "ssh_port": 2222, "os": "linux"}))
	}
	for i := range n(0.01) {
		add("host", fmt.Sprintf("host%04d", i), map[string]any{"lan_ipv4": fmt.Sprintf("127.0.11.%d", i%250+1), "ssh_port": 2222})
	}
	for i := range n(0.30) {
		guests = append(guests, add("lxc", fmt.Sprintf("ct%05d", i), map[string]any{
			"vmid": 1000 + i, "host": pve[i%len(pve)][len("proxmox-host:"):], "cores": 2, "memory_mb": 2048, "ostype": "debian"}))
	}
	for i := range n(0.05) {
		guests = append(guests, add("vm", fmt.Sprintf("vm%05d", i), map[string]any{
			"vmid": 100000 + i, "host": pve[i%len(pve)], "qemu_guest_agent": i%2 == 0, "memory_mb": 4096}))
	}
	for i := range n(0.30) {
		services = append(services, add("service", fmt.Sprintf("svc%05d", i), map[string]any{
			"unit": fmt.Sprintf("svc%05d.service", i), "port": 8000 + i%1000}))
	}
	for i := range n(0.20) {
		h := fmt.Sprintf("app%05d.lab.example", i)
		routes = append(routes, add("ingress-route", h, map[string]any{"public_host": h, "tls": true}))
	}
	for i := range n(0.03) {
		backups = append(backups, add("backup-target", fmt.Sprintf("bk%04d", i), map[string]any{
			"path": fmt.Sprintf("/srv/backups/bk%04d", i), "max_age_minutes": 1560}))
	}
	for i := 0; len(inv.Entities) < entities; i++ {
		vlans = append(vlans, add("vlan", fmt.Sprintf("vlan%04d", i), map[string]any{"vlan_id": i % 4094}))
	}

	for i, g := range guests {
		edge("hosts", pve[i%len(pve)], g)
	}
	for i, s := range services {
		edge("runs-on", s, guests[i%len(guests)])
	}
	for i, r := range routes {
		edge("routes-to", r, services[i%len(services)])
	}
	for i, b := range backups {
		edge("backs-up-to", guests[i%len(guests)], b)
		edge("protects", b, services[i%len(services)])
	}
	for i, g := range guests {
		if len(vlans) > 0 {
			edge("member-of", g, vlans[i%len(vlans)])
		}
	}
	// Fill up with distinct service dependencies: service i depends on i+1, i+2, ...
	for off := 1; len(inv.Relationships) < edges; off++ {
		for i := 0; i < len(services) && len(inv.Relationships) < edges; i++ {
			edge("depends-on", services[i], services[(i+off)%len(services)])
		}
	}
	return inv
}

func TestGenerateShape(t *testing.T) {
	t.Parallel()
	o, _, _ := embedded(t)
	inv := generate(1000, 3000)
	if len(inv.Entities) != 1000 || len(inv.Relationships) != 3000 {
		t.Fatalf("generated %d entities and %d edges", len(inv.Entities), len(inv.Relationships))
	}
	if err := Validate(o, inv, nil); err != nil {
		t.Fatalf("generated inventory is invalid: %v", err)
	}
}

// TestGeneratedIngestIsIdempotent ingests a small generated fleet twice (the same code path
// as the benchmark, at a size that suits -race).
func TestGeneratedIngestIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	inv := generate(600, 1800)
	rep := mustIngest(t, f, inv, nil)
	if rep.Created != 600 || rep.EdgesCreated != 1800 || rep.ChecksChanged == 0 {
		t.Fatalf("first ingest: %s", rep)
	}
	before := counts(t, f.pool)
	if rep := mustIngest(t, f, inv, nil); rep.Created+rep.Updated+rep.EdgesCreated+rep.ChecksChanged != 0 {
		t.Fatalf("second ingest wrote: %s", rep)
	}
	after := counts(t, f.pool)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %d -> %d", k, v, after[k])
		}
	}
}

// BenchmarkIngest measures the first ingest of a generated fleet of 10,000 entities and
// 30,000 edges into an empty database, and the no-op re-ingest that follows (goals: 10 s
// and 3 s). Run with: go test -run XXX -bench Ingest -benchtime 1x ./internal/seed
func BenchmarkIngest(b *testing.B) {
	const entities, edges = 10000, 30000
	inv := generate(entities, edges)
	for _, phase := range []string{"first", "noop"} {
		b.Run(phase, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				f := newFixture(b)
				if phase == "noop" {
					mustIngest(b, f, inv, nil)
				}
				b.StartTimer()
				start := time.Now()
				rep := mustIngest(b, f, inv, nil)
				took := time.Since(start)
				b.StopTimer()
				if phase == "noop" && rep.Created+rep.Updated+rep.EdgesCreated+rep.ChecksChanged != 0 {
					b.Fatalf("re-ingest wrote: %s", rep)
				}
				c := counts(b, f.pool)
				b.ReportMetric(took.Seconds(), "s/ingest")
				b.ReportMetric(float64(c["check_defs"]), "checks")
				b.ReportMetric(float64(c["events"]), "events")
				b.Logf("%s ingest of %d entities + %d edges: %s; rows: %v", phase, entities, edges, rep, c)
				b.StartTimer()
			}
		})
	}
}
