package incidents

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/checkrun"
	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

// TestIncidentBenchmark (OIKOS_BENCH=1; figures in docs/benchmarks.md): the 20 × 100 fleet
// (20 Proxmox hosts with 100 LXCs each, every LXC running a service), the runner and the
// engine in one process on labsim, checks every 10 s. One host goes down: how long until one
// grouped incident holds its 100 guests and 100 services, how many incidents opened (each is
// one notification per matching channel) against the entities that changed to a problem (a
// monitor without dependencies alerts on each), and what the engine cost per check result.
func TestIncidentBenchmark(t *testing.T) {
	if os.Getenv("OIKOS_BENCH") == "" {
		t.Skip("OIKOS_BENCH=1 runs the incident benchmark")
	}
	const hosts, guests, interval = 20, 100, 10 * time.Second
	var inv strings.Builder
	inv.WriteString("entities:\n")
	var rels strings.Builder
	rels.WriteString("relationships:\n")
	for h := 1; h <= hosts; h++ {
		fmt.Fprintf(&inv, "  - {type: proxmox-host, name: h%02d, attributes: {lan_ipv4: 127.0.30.%d, ssh_port: 2222, user: root, node: h%02d, os: linux}}\n", h, h, h)
		for g := range guests {
			fmt.Fprintf(&inv, "  - {type: lxc, name: g%02d-%03d, attributes: {vmid: %d, host: h%02d, hostname: g%02d-%03d}}\n", h, g, 100+g, h, h, g)
			fmt.Fprintf(&inv, "  - {type: service, name: s%02d-%03d, attributes: {unit: app%d.service}}\n", h, g, g)
			fmt.Fprintf(&rels, "  - {type: runs-on, source: \"service:s%02d-%03d\", target: \"lxc:g%02d-%03d\"}\n", h, g, h, g)
			fmt.Fprintf(&rels, "  - {type: hosts, source: \"proxmox-host:h%02d\", target: \"lxc:g%02d-%03d\"}\n", h, h, g)
		}
	}
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inv.String() + rels.String())})
	lab.StartAllGuests(t)
	// Per guest its Proxmox status, per service its process check (through pct exec), per
	// host its cpu: 4,020 checks, 402 results a second.
	defs := lab.DeriveChecks(t, func(target checks.Target, d *checks.Def) bool {
		d.Interval, d.Timeout = interval, 5*time.Second
		switch target.Type {
		case "lxc":
			return d.Kind == "proxmox-guest"
		case "service":
			return true
		default:
			return d.Kind == "ssh-script" && d.Config[checks.KeyScript] == "cpu"
		}
	})
	reg := metrics.NewRegistry()
	e, err := New(Options{Pool: lab.DB, Logger: zerolog.Nop(), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	run, err := checkrun.NewRunner(checkrun.Options{Pool: lab.DB, SSH: lab.SSH, Fleet: lab.Fleet, Logger: zerolog.Nop(),
		Metrics: reg, InitialSpread: interval, Concurrency: 64, OnFlush: e.Flushed})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if err := run.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer run.Stop()
	results := func() int64 {
		var n int64
		if err := lab.DB.QueryRow(ctx, `SELECT coalesce(sum(runs), 0) FROM check_results`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, 3*interval, "every check up", func() (bool, string) {
		var up, all int
		err := lab.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE health = 'up'), count(*) FROM check_results`).Scan(&up, &all)
		return err == nil && up == len(defs), fmt.Sprintf("%d of %d up (%d results)", up, len(defs), all)
	})
	// Healthy: what evaluating costs when nothing fails.
	evalBefore, countBefore := histogram(t, reg, "oikos_incident_evaluation_seconds")
	resultsBefore, quietStart := results(), time.Now()
	time.Sleep(3 * interval)
	evalQuiet, countQuiet := histogram(t, reg, "oikos_incident_evaluation_seconds")
	quietResults := results() - resultsBefore
	t.Logf("healthy: %d checks, %d results in %s, %d evaluations, %.0f µs of evaluation per check result",
		len(defs), quietResults, time.Since(quietStart).Round(time.Second), countQuiet-countBefore,
		(evalQuiet-evalBefore)*1e6/float64(quietResults))

	var changedBefore int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = 'health.changed'`).Scan(&changedBefore); err != nil {
		t.Fatal(err)
	}
	if err := lab.Sim.SetHostFault("h07", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	faulted := time.Now()
	resultsBefore = results()
	evalBefore, countBefore = histogram(t, reg, "oikos_incident_evaluation_seconds")
	waitFor(t, 6*interval, "one incident with 200 affected", func() (bool, string) {
		got := incidentsOf(t, lab.DB, true)
		return len(got) == 1 && len(got[0].affected) == 2*guests, describe(got)
	})
	grouped := time.Since(faulted)
	time.Sleep(2 * interval) // the incident stays one while the host stays down
	evalAfter, countAfter := histogram(t, reg, "oikos_incident_evaluation_seconds")
	downResults := results() - resultsBefore
	var opened, changed int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE type = 'incident.opened'),
	count(*) FILTER (WHERE type = 'health.changed' AND payload->>'to' <> 'up') - 0 FROM events WHERE type IN ('incident.opened', 'health.changed')`).Scan(&opened, &changed); err != nil {
		t.Fatal(err)
	}
	_ = changedBefore
	t.Logf("host h07 down: one incident (root %s, %d affected) %.1f s after the fault = %.1f intervals",
		incidentsOf(t, lab.DB, true)[0].root, len(incidentsOf(t, lab.DB, true)[0].affected), grouped.Seconds(), grouped.Seconds()/interval.Seconds())
	t.Logf("notifications: %d incident opened, against %d entities changing to a problem (one alert each without dependencies)",
		opened, changed)
	t.Logf("while down: %d results, %d evaluations, %.1f ms per evaluation, %.1f µs of evaluation per check result",
		downResults, countAfter-countBefore, (evalAfter-evalBefore)*1e3/float64(countAfter-countBefore),
		(evalAfter-evalBefore)*1e6/float64(downResults))
	if opened != 1 {
		t.Errorf("%d incidents opened, want 1", opened)
	}
}

// histogram reads a registered histogram's sum and count.
func histogram(t *testing.T, reg prometheus.Gatherer, name string) (float64, uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var h *dto.Histogram = mf.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), h.GetSampleCount()
		}
	}
	return 0, 0
}
