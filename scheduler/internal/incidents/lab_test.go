package incidents

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/checkrun"
	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

// labInventory: two Proxmox hosts; atlas carries two containers with a service each,
// boreas the database that nginx (on atlas) depends on.
const labInventory = `
entities:
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web}}
  - {type: lxc, name: media, attributes: {vmid: 102, host: atlas, hostname: media}}
  - {type: lxc, name: db, attributes: {vmid: 201, host: boreas, hostname: db}}
  - {type: service, name: nginx, attributes: {unit: nginx.service}}
  - {type: service, name: jellyfin, attributes: {unit: jellyfin.service}}
  - {type: service, name: postgres, attributes: {unit: postgresql.service}}
relationships:
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:web"}
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:media"}
  - {type: hosts, source: "proxmox-host:boreas", target: "lxc:db"}
  - {type: runs-on, source: "service:nginx", target: "lxc:web"}
  - {type: runs-on, source: "service:jellyfin", target: "lxc:media"}
  - {type: runs-on, source: "service:postgres", target: "lxc:db"}
  - {type: depends-on, source: "service:nginx", target: "service:postgres"}
`

// rig is a lab with a check runner and an incident engine on it, as the scheduler wires
// them (the runner's writes kick the engine).
type rig struct {
	lab    *labtest.Lab
	runner *checkrun.Runner
	engine *Engine
}

func newRig(t *testing.T, mod func(target checks.Target, d *checks.Def) bool) *rig {
	t.Helper()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(labInventory)})
	lab.StartAllGuests(t)
	lab.DeriveChecks(t, func(target checks.Target, d *checks.Def) bool {
		d.Interval, d.Timeout = time.Second, time.Second
		if mod != nil {
			return mod(target, d)
		}
		return true
	})
	r := &rig{lab: lab}
	r.start(t)
	return r
}

// start starts a runner and an engine (again, after stop: a scheduler restart).
func (r *rig) start(t *testing.T) {
	t.Helper()
	e, err := New(Options{Pool: r.lab.DB, Logger: zerolog.Nop(), Metrics: metrics.NewRegistry(), Every: 300 * time.Millisecond,
		Settle: 20 * time.Millisecond, MinGap: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run, err := checkrun.NewRunner(checkrun.Options{Pool: r.lab.DB, SSH: r.lab.SSH, Fleet: r.lab.Fleet, Logger: zerolog.Nop(),
		Metrics: metrics.NewRegistry(), InitialSpread: 300 * time.Millisecond, FlushEvery: 50 * time.Millisecond,
		OnFlush: e.Flushed})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := run.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.runner, r.engine = run, e
	t.Cleanup(r.stop)
}

func (r *rig) stop() {
	r.runner.Stop()
	r.engine.Stop()
}

type incidentRow struct {
	id, root, status, severity, summary, note string
	affected                                  []string // current members besides the root
}

func incidentsOf(t *testing.T, db *pgxpool.Pool, onlyOpen bool) []incidentRow {
	t.Helper()
	ctx := context.Background()
	q := `SELECT sg.id::text, e.slug, sg.status, sg.severity, sg.summary, sg.ack_note FROM signals sg JOIN entities e ON e.id = sg.entity_id
WHERE sg.kind = 'incident'`
	if onlyOpen {
		q += ` AND sg.status <> 'resolved'`
	}
	rows, err := db.Query(ctx, q+` ORDER BY sg.first_seen`)
	if err != nil {
		t.Fatal(err)
	}
	var out []incidentRow
	for rows.Next() {
		var in incidentRow
		if err := rows.Scan(&in.id, &in.root, &in.status, &in.severity, &in.summary, &in.note); err != nil {
			t.Fatal(err)
		}
		out = append(out, in)
	}
	rows.Close()
	for i := range out {
		rows, err := db.Query(ctx, `SELECT e.slug FROM incident_members m JOIN entities e ON e.id = m.entity_id
WHERE m.incident_id = $1 AND m.role = 'affected' AND (m.left_at IS NULL OR $2) ORDER BY e.slug`, out[i].id, out[i].status == "resolved")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out[i].affected = append(out[i].affected, s)
		}
		rows.Close()
	}
	return out
}

func countEvents(t *testing.T, db *pgxpool.Pool, typ string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE type = $1`, typ).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	msg := ""
	for {
		ok, m := cond()
		if ok {
			return
		}
		msg = m
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func healthOf(t *testing.T, db *pgxpool.Pool, slug string) string {
	t.Helper()
	var h string
	err := db.QueryRow(context.Background(), `SELECT es.health FROM entity_status es JOIN entities e ON e.id = es.entity_id
WHERE e.slug = $1`, slug).Scan(&h)
	if err != nil {
		return "(none)"
	}
	return h
}

func waitAllUp(t *testing.T, db *pgxpool.Pool, slugs ...string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the fleet up", func() (bool, string) {
		for _, s := range slugs {
			if h := healthOf(t, db, s); h != "up" {
				return false, s + " is " + h
			}
		}
		return true, ""
	})
}

var labEntities = []string{"proxmox-host:atlas", "proxmox-host:boreas", "lxc:web", "lxc:media", "lxc:db",
	"service:nginx", "service:jellyfin", "service:postgres"}

func describe(in []incidentRow) string {
	var parts []string
	for _, i := range in {
		parts = append(parts, fmt.Sprintf("%s %s [%s] affected %v", i.root, i.status, i.summary, i.affected))
	}
	return strings.Join(parts, "; ")
}

// A healthy fleet opens nothing; a host down opens exactly one incident with every guest
// and service behind it affected; an acknowledgement (with its note) survives until the
// resolution; recovery resolves it once; a container that stays down after its host came
// back opens an incident of its own.
func TestHostDownIsOneIncident(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	db := r.lab.DB
	waitAllUp(t, db, labEntities...)
	time.Sleep(time.Second) // a few evaluations on a healthy fleet
	if got := incidentsOf(t, db, false); len(got) != 0 {
		t.Fatalf("a healthy fleet has incidents: %s", describe(got))
	}

	if err := r.lab.Sim.SetHostFault("atlas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	faulted := time.Now()
	want := []string{"lxc:media", "lxc:web", "service:jellyfin", "service:nginx"}
	waitFor(t, 20*time.Second, "one incident rooted at atlas with its guests and services", func() (bool, string) {
		got := incidentsOf(t, db, true)
		return len(got) == 1 && got[0].root == "proxmox-host:atlas" && fmt.Sprint(got[0].affected) == fmt.Sprint(want), describe(got)
	})
	t.Logf("grouped incident %s after the fault", time.Since(faulted).Round(10*time.Millisecond))
	in := incidentsOf(t, db, true)[0]
	if in.severity != signals.SeverityCritical || !strings.Contains(in.summary, "4 entities affected") {
		t.Errorf("incident says %s: %q", in.severity, in.summary)
	}
	if _, err := signals.Decide(context.Background(), db, in.id, signals.DecisionAck, nil,
		signals.By{Name: "operator", Note: "rebooting atlas"}); err != nil {
		t.Fatal(err)
	}
	// Stop jellyfin's container while atlas is down: it will not come back with its host.
	if err := r.lab.Sim.SetGuestStatus("atlas", 102, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // more runs, more evaluations: still one incident, still acknowledged
	got := incidentsOf(t, db, false)
	if len(got) != 1 || got[0].status != "acknowledged" || got[0].note != "rebooting atlas" {
		t.Fatalf("after more runs: %s (status %v)", describe(got), got)
	}
	if n := countEvents(t, db, EventOpened); n != 1 {
		t.Errorf("%d incident.opened events, want 1", n)
	}

	if err := r.lab.Sim.SetHostFault("atlas", labsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "atlas's incident resolved, and lxc:media's own opened", func() (bool, string) {
		all := incidentsOf(t, db, false)
		open := incidentsOf(t, db, true)
		return len(all) == 2 && all[0].status == "resolved" && len(open) == 1 && open[0].root == "lxc:media" &&
			fmt.Sprint(open[0].affected) == "[service:jellyfin]", describe(all)
	})
	if n := countEvents(t, db, EventResolved); n != 1 {
		t.Errorf("%d incident.resolved events, want 1", n)
	}
	var ackNote string
	if err := db.QueryRow(context.Background(), `SELECT ack_note FROM signals WHERE id = $1`, in.id).Scan(&ackNote); err != nil || ackNote != "rebooting atlas" {
		t.Errorf("the resolved incident lost its acknowledgement note: %q %v", ackNote, err)
	}

	if err := r.lab.Sim.SetGuestStatus("atlas", 102, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "no open incident", func() (bool, string) {
		open := incidentsOf(t, db, true)
		return len(open) == 0, describe(open)
	})
}

// A probe that flaps (labsim: every other pct status finds the container stopped) goes up
// and down run after run, and never reaches the failure threshold of 2.
func TestFlappingProbeOpensNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(target checks.Target, d *checks.Def) bool {
		// lxc:db keeps its Proxmox status check only, so its health is that one probe.
		return target.Slug != "lxc:db" || d.Kind == "proxmox-guest"
	})
	db := r.lab.DB
	waitAllUp(t, db, labEntities...)
	if err := r.lab.Sim.SetGuestFault("boreas", 201, labsim.Fault{Flap: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "lxc:db to flap down and up three times", func() (bool, string) {
		var downs int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM events ev JOIN entities e ON e.id = ev.entity_id
WHERE ev.type = 'health.changed' AND e.slug = 'lxc:db' AND ev.payload->>'to' = 'down'`).Scan(&downs)
		return err == nil && downs >= 3, fmt.Sprintf("%d transitions to down", downs)
	})
	if got := incidentsOf(t, db, false); len(got) != 0 {
		t.Fatalf("a flapping probe opened incidents: %s", describe(got))
	}
}

// A scheduler restart in the middle of an incident neither duplicates nor loses it: the
// new engine finds it open and resolves it when the cause clears. A muted incident keeps
// its state current (members, resolution); only its notifications are silenced.
func TestRestartMidIncidentKeepsIt(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	db := r.lab.DB
	waitAllUp(t, db, labEntities...)
	if err := r.lab.Sim.SetHostFault("boreas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	// boreas carries lxc:db and postgres; nginx (on atlas) depends on postgres and, unable
	// to reach its database, is not affected unless it fails: its process check still runs.
	waitFor(t, 20*time.Second, "boreas's incident", func() (bool, string) {
		got := incidentsOf(t, db, true)
		return len(got) == 1 && got[0].root == "proxmox-host:boreas" &&
			fmt.Sprint(got[0].affected) == "[lxc:db service:postgres]", describe(got)
	})
	first := incidentsOf(t, db, true)[0]
	until := time.Now().Add(time.Hour)
	if _, err := signals.Decide(context.Background(), db, first.id, signals.DecisionMute, &until, signals.By{Name: "operator"}); err != nil {
		t.Fatal(err)
	}
	r.stop()
	r.start(t)
	time.Sleep(2 * time.Second)
	got := incidentsOf(t, db, false)
	if len(got) != 1 || got[0].id != first.id || got[0].status != "muted" {
		t.Fatalf("after a restart: %s", describe(got))
	}
	if n := countEvents(t, db, EventOpened); n != 1 {
		t.Errorf("%d incident.opened events after a restart, want 1", n)
	}
	if err := r.lab.Sim.SetHostFault("boreas", labsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the muted incident resolved", func() (bool, string) {
		got := incidentsOf(t, db, false)
		return len(got) == 1 && got[0].status == "resolved", describe(got)
	})
	members := incidentsOf(t, db, false)[0].affected
	sort.Strings(members)
	if fmt.Sprint(members) != "[lxc:db service:postgres]" {
		t.Errorf("the resolved incident records %v", members)
	}
}
