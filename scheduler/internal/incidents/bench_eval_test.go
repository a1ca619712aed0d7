package incidents

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
)

// BenchmarkEvaluate: one evaluation on the 20 × 100 fleet (4,020 checks) while one host is
// down with its 100 guests unknown and their 100 services down, its incident open.
func BenchmarkEvaluate(b *testing.B) {
	var inv, rels strings.Builder
	inv.WriteString("entities:\n")
	rels.WriteString("relationships:\n")
	for h := 1; h <= 20; h++ {
		fmt.Fprintf(&inv, "  - {type: proxmox-host, name: h%02d, attributes: {lan_ipv4: 127.0.30.%d, ssh_port: 2222, user: root, node: h%02d, os: linux}}\n", h, h, h)
		for g := range 100 {
			fmt.Fprintf(&inv, "  - {type: lxc, name: g%02d-%03d, attributes: {vmid: %d, host: h%02d}}\n", h, g, 100+g, h)
			fmt.Fprintf(&inv, "  - {type: service, name: s%02d-%03d, attributes: {unit: app%d.service}}\n", h, g, g)
			fmt.Fprintf(&rels, "  - {type: runs-on, source: \"service:s%02d-%03d\", target: \"lxc:g%02d-%03d\"}\n", h, g, h, g)
			fmt.Fprintf(&rels, "  - {type: hosts, source: \"proxmox-host:h%02d\", target: \"lxc:g%02d-%03d\"}\n", h, h, g)
		}
	}
	lab := labtest.New(b, labtest.Options{Inventory: []byte(inv.String() + rels.String()), NoSim: true})
	lab.DeriveChecks(b, func(target checks.Target, d *checks.Def) bool {
		switch target.Type {
		case "lxc":
			return d.Kind == "proxmox-guest"
		case "service":
			return true
		default:
			return d.Kind == "ssh-script" && d.Config[checks.KeyScript] == "cpu"
		}
	})
	ctx := context.Background()
	// Every check up, then h07 down (streak 3), its guests unknown, their services down.
	for _, q := range []string{
		`INSERT INTO check_results (check_id, target_id, health, at, since, first_at, streak)
		 SELECT id, target_id, 'up', now(), now(), now(), 5 FROM check_defs`,
		`INSERT INTO entity_status (entity_id, health) SELECT DISTINCT target_id, 'up' FROM check_defs`,
		`UPDATE check_results cr SET health = CASE WHEN e.type = 'lxc' THEN 'unknown' ELSE 'down' END, streak = 3,
		   reason = 'host h07 unreachable'
		 FROM entities e WHERE e.id = cr.target_id AND (e.slug = 'proxmox-host:h07' OR e.name LIKE 'g07-%' OR e.name LIKE 's07-%')`,
		`UPDATE entity_status es SET health = cr.health, reason = cr.reason, changed_at = now() - interval '1 hour'
		 FROM check_results cr WHERE cr.target_id = es.entity_id AND cr.health <> 'up'`,
		`ANALYZE`, // as autovacuum would have by now: plans for the fleet's real size
	} {
		if _, err := lab.DB.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	e, err := New(Options{Pool: lab.DB, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	out, err := e.Evaluate(ctx)
	if err != nil || out.Opened != 1 || out.Problems != 201 {
		b.Fatalf("first evaluation: %+v %v", out, err)
	}
	b.ResetTimer()
	for b.Loop() {
		out, err := e.Evaluate(ctx)
		if err != nil || out.Open != 1 || out.Opened != 0 {
			b.Fatalf("%+v %v", out, err)
		}
	}
}
