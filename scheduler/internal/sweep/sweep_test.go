package sweep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/checkrun"
	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, msg)
		}
		<-tick.C
	}
}

func health(t *testing.T, db *pgxpool.Pool, slug string) (string, string, *time.Time) {
	t.Helper()
	var h, r string
	var last *time.Time
	if err := db.QueryRow(context.Background(), `SELECT es.health, es.reason, es.last_check_at FROM entity_status es
JOIN entities e ON e.id = es.entity_id WHERE e.slug = $1`, slug).Scan(&h, &r, &last); err != nil {
		return "(none)", err.Error(), nil
	}
	return h, r, last
}

func newSweeper(t *testing.T, db *pgxpool.Pool, clock func() time.Time, mod func(*Options)) *Sweeper {
	t.Helper()
	o := Options{Pool: db, Ontology: labtest.Ontology(t), Logger: zerolog.Nop(), Clock: clock}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const smallInventory = `
entities:
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web}}
  - {type: lxc, name: db, attributes: {vmid: 102, host: boreas, hostname: db}}
  - {type: workstation, name: studio, attributes: {lan_ipv4: 127.0.12.1, ssh_port: 2222, user: dana, os: darwin}}
`

// An unreachable Proxmox host makes its guests unknown with the host named, then stale
// once their last observation is older than 3× their fastest interval (floor 5 min), with a
// health.stale event; an entity observed recently, or whose bound is longer, is not stale.
func TestUnreachableHostGuestsGoStale(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory)})
	lab.DeriveChecks(t, func(target checks.Target, d *checks.Def) bool {
		if target.Type != "workstation" { // the workstation keeps its 5 min intervals
			d.Interval, d.Timeout = 2*time.Second, 2*time.Second
		}
		return true
	})
	clock := &fakeClock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	r, err := checkrun.NewRunner(checkrun.Options{Pool: lab.DB, SSH: lab.SSH, Fleet: lab.Fleet, Logger: zerolog.Nop(),
		Clock: clock, InitialSpread: 300 * time.Millisecond, FlushEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	for _, slug := range []string{"lxc:db", "lxc:web", "workstation:studio"} {
		waitFor(t, 30*time.Second, slug+" up", func() (bool, string) {
			h, why, _ := health(t, lab.DB, slug)
			return h == "up", h + ": " + why
		})
	}
	if err := lab.Sim.SetHostFault("boreas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "lxc:db unknown", func() (bool, string) {
		h, why, _ := health(t, lab.DB, "lxc:db")
		return h == "unknown" && strings.Contains(why, "proxmox-host:boreas"), h + ": " + why
	})

	sw := newSweeper(t, lab.DB, clock.Now, nil)
	if marked, err := sw.Staleness(context.Background()); err != nil || len(marked) != 0 {
		t.Fatalf("stale too early: %v %v", marked, err)
	}
	clock.Add(6 * time.Minute) // past 3 × 2 s, and past the 5 min floor
	// The others keep being observed at the new time (boreas too: a machine found
	// unreachable is observed down); lxc:db, behind boreas, cannot be.
	observedNow := func() {
		for _, slug := range []string{"lxc:web", "proxmox-host:atlas", "proxmox-host:boreas"} {
			waitFor(t, 10*time.Second, slug+" observed after the clock moved", func() (bool, string) {
				_, _, last := health(t, lab.DB, slug)
				return last != nil && !last.Before(clock.Now()), fmt.Sprintf("last_check_at %v", last)
			})
		}
	}
	observedNow()
	marked, err := sw.Staleness(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(marked)
	// The workstation's fastest interval is 5 min: stale only after 15 min.
	if strings.Join(marked, ",") != "lxc:db" {
		t.Fatalf("marked %v, want lxc:db only", marked)
	}
	if h, _, _ := health(t, lab.DB, "proxmox-host:boreas"); h != "down" {
		t.Errorf("proxmox-host:boreas %s, want down", h)
	}
	var payload map[string]any
	if err := lab.DB.QueryRow(context.Background(), `SELECT payload FROM events WHERE type = $1 AND entity_id = $2`,
		EventStale, lab.IDs["lxc:db"]).Scan(&payload); err != nil {
		t.Fatalf("no health.stale event for lxc:db: %v", err)
	}
	if payload["from"] != "unknown" || payload["to"] != "stale" || payload["stale_after_seconds"] != float64(300) {
		t.Errorf("health.stale payload %v", payload)
	}
	// Further unknown results keep it stale.
	clock.Add(time.Second)
	waitFor(t, 10*time.Second, "another flush", func() (bool, string) {
		var at time.Time
		_ = lab.DB.QueryRow(context.Background(), `SELECT max(at) FROM check_results WHERE target_id = $1`, lab.IDs["lxc:db"]).Scan(&at)
		return !at.Before(clock.Now()), at.String()
	})
	if h, _, _ := health(t, lab.DB, "lxc:db"); h != "stale" {
		t.Errorf("lxc:db %s after an unknown result, want stale", h)
	}
	clock.Add(10 * time.Minute)
	observedNow()
	marked, err = sw.Staleness(context.Background())
	if err != nil || len(marked) != 1 || marked[0] != "workstation:studio" {
		t.Fatalf("after 16 min: %v %v", marked, err)
	}
	// The host returns: observations make the guest current again.
	if err := lab.Sim.SetHostFault("boreas", labsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "lxc:db up again", func() (bool, string) {
		h, why, _ := health(t, lab.DB, "lxc:db")
		return h == "up", h + ": " + why
	})
}

type signalRow struct {
	key, status, summary string
	occurrences          int64
}

func openSignals(t *testing.T, db *pgxpool.Pool, kind string) map[string]signalRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT dedup_key, status, summary, occurrences FROM signals WHERE kind = $1 AND status <> 'resolved'`, kind)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]signalRow{}
	for rows.Next() {
		var s signalRow
		if err := rows.Scan(&s.key, &s.status, &s.summary, &s.occurrences); err != nil {
			t.Fatal(err)
		}
		out[s.key] = s
	}
	return out
}

// Over the seeded fleet with every derived check stored, coverage reports only entities
// whose type declares monitoring that does not apply to them through a real gap — never a
// type that declares none, never an entity with checks — and it reports an entity whose
// checks were lost, resolving the signal when they are back.
func TestCoverageNoFalsePositives(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{NoSim: true})
	defs := lab.DeriveChecks(t, nil)
	checked := map[string]bool{}
	for _, d := range defs {
		checked[d.TargetSlug] = true
	}
	sw := newSweeper(t, lab.DB, nil, nil)
	gaps, err := sw.Coverage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gaps {
		e := lab.Entities[g.Slug]
		if checked[g.Slug] {
			t.Errorf("%s reported although it has checks", g.Slug)
		}
		if specs, none := lab.Ontology.Monitoring(e.Type); none || len(specs) == 0 {
			t.Errorf("%s reported although type %s declares no monitoring", g.Slug, e.Type)
		}
		if e.Type == "check" || e.State == "destroyed" {
			t.Errorf("%s reported (type %s, state %s)", g.Slug, e.Type, e.State)
		}
		t.Logf("gap: %s", g.Reason)
	}
	monitoredTypes := 0
	for _, e := range lab.Entities {
		if specs, none := lab.Ontology.Monitoring(e.Type); !none && len(specs) > 0 && e.State != "destroyed" {
			monitoredTypes++
		}
	}
	t.Logf("%d entities with checks, %d gaps, %d entities whose type declares monitoring", len(checked), len(gaps), monitoredTypes)
	if len(checked) < 60 {
		t.Errorf("only %d entities got checks", len(checked))
	}
	open := openSignals(t, lab.DB, KindUnmonitored)
	if len(open) != len(gaps) {
		t.Fatalf("%d unmonitored signals for %d gaps", len(open), len(gaps))
	}

	ctx := context.Background()
	// A container nobody hosts: its type declares monitoring, derivation can give it none.
	if _, err := lab.DB.Exec(ctx, `INSERT INTO entities (id, slug, type, name, state, attributes)
VALUES ('0190a000-0000-7000-8000-0000000000aa', 'lxc:stray', 'lxc', 'stray', 'active', '{"vmid": 177}')`); err != nil {
		t.Fatal(err)
	}
	gaps, err = sw.Coverage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range gaps {
		if g.Slug == "lxc:stray" {
			found = strings.Contains(g.Reason, "no owning Proxmox host")
		}
	}
	if !found {
		t.Fatalf("lxc:stray not reported with its reason: %+v", gaps)
	}
	if _, err := lab.DB.Exec(ctx, `DELETE FROM entities WHERE slug = 'lxc:stray'`); err != nil {
		t.Fatal(err)
	}

	// Lose lxc:jellyfin's checks (the original's re-derivation failed silently).
	if _, err := lab.DB.Exec(ctx, `UPDATE check_defs SET enabled = false WHERE target_id = $1`, lab.IDs["lxc:jellyfin"]); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Coverage(ctx); err != nil {
		t.Fatal(err)
	}
	open = openSignals(t, lab.DB, KindUnmonitored)
	key := KindUnmonitored + ":" + lab.IDs["lxc:jellyfin"]
	if s, ok := open[key]; !ok || !strings.Contains(s.summary, "none is stored") {
		t.Fatalf("lost checks not reported: %+v", open[key])
	}
	if len(open) != len(gaps) {
		t.Errorf("open %d, want %d (lxc:stray's signal went with the entity)", len(open), len(gaps))
	}
	for k, s := range open {
		if k != key && s.occurrences != 3 {
			t.Errorf("%s: occurrences %d after three passes", k, s.occurrences)
		}
	}
	if _, err := lab.DB.Exec(ctx, `UPDATE check_defs SET enabled = true WHERE target_id = $1`, lab.IDs["lxc:jellyfin"]); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Coverage(ctx); err != nil {
		t.Fatal(err)
	}
	if _, still := openSignals(t, lab.DB, KindUnmonitored)[key]; still {
		t.Error("signal not resolved once the checks are back")
	}
	var resolved int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = $1 AND entity_id = $2`,
		signals.EventResolved, lab.IDs["lxc:jellyfin"]).Scan(&resolved); err != nil || resolved != 1 {
		t.Errorf("signal.resolved events for jellyfin: %d (%v)", resolved, err)
	}
}

// putResult writes a check's latest result as the runner would.
func putResult(t *testing.T, db *pgxpool.Pool, checkID, targetID, health, class, reason string, since time.Time) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `INSERT INTO check_results (check_id, target_id, health, reason, error_class, at, since, first_at)
VALUES ($1, $2, $3, $4, $5, $6, $6, $6)
ON CONFLICT (check_id) DO UPDATE SET health = EXCLUDED.health, reason = EXCLUDED.reason, error_class = EXCLUDED.error_class,
    since = EXCLUDED.since, at = EXCLUDED.at`, checkID, targetID, health, reason, class, since); err != nil {
		t.Fatal(err)
	}
}

// A probe down for longer than StuckAfter raises probe_stuck (once, then occurrences); a
// resolution failure raises check_misconfigured at once; both resolve with their cause, and
// the reconcile pass resolves what is about a destroyed entity.
func TestStuckMisconfiguredAndReconcile(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory), NoSim: true})
	defs := lab.DeriveChecks(t, nil)
	byslug := map[string]labtest.Def{}
	for _, d := range defs {
		byslug[d.Slug] = d
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sw := newSweeper(t, lab.DB, func() time.Time { return now }, func(o *Options) { o.StuckAfter = time.Hour })
	ctx := context.Background()

	guest := byslug["check:lxc.web.proxmox-guest"]
	cpu := byslug["check:lxc.db.ssh-script.cpu"]
	recent := byslug["check:lxc.db.ssh-script.memory"]
	putResult(t, lab.DB, guest.ID, guest.TargetID, "down", "", "lxc 101 stopped", now.Add(-2*time.Hour))
	putResult(t, lab.DB, cpu.ID, cpu.TargetID, "unknown", "resolution", "configuration: no owning host", now.Add(-time.Minute))
	putResult(t, lab.DB, recent.ID, recent.TargetID, "down", "", "recent", now.Add(-10*time.Minute))

	rep, err := sw.Stuck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stuck) != 1 || rep.Stuck[0] != guest.Slug || len(rep.Misconfigured) != 1 || rep.Misconfigured[0] != cpu.Slug {
		t.Fatalf("report %+v", rep)
	}
	stuck := openSignals(t, lab.DB, KindProbeStuck)
	if s, ok := stuck[KindProbeStuck+":"+guest.ID]; !ok || !strings.Contains(s.summary, "lxc 101 stopped") {
		t.Fatalf("probe_stuck signals %+v", stuck)
	}
	if _, ok := openSignals(t, lab.DB, KindCheckMisconfigured)[KindCheckMisconfigured+":"+cpu.ID]; !ok {
		t.Fatal("no check_misconfigured signal")
	}
	if _, err := sw.Stuck(ctx); err != nil {
		t.Fatal(err)
	}
	if s := openSignals(t, lab.DB, KindProbeStuck)[KindProbeStuck+":"+guest.ID]; s.occurrences != 2 {
		t.Errorf("occurrences %d after two passes", s.occurrences)
	}
	// Causes clear: the guest is up, the cpu check resolves its target.
	putResult(t, lab.DB, guest.ID, guest.TargetID, "up", "", "", now)
	putResult(t, lab.DB, cpu.ID, cpu.TargetID, "up", "", "", now)
	if _, err := sw.Stuck(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(openSignals(t, lab.DB, KindProbeStuck)) + len(openSignals(t, lab.DB, KindCheckMisconfigured)); n != 0 {
		t.Fatalf("%d signals still open after their causes cleared", n)
	}

	// Reconcile: a signal about an entity that was destroyed since.
	st := signals.New(nil)
	if _, err := st.Raise(ctx, lab.DB, signals.Signal{Kind: "custom", DedupKey: "custom:db", EntityID: lab.IDs["lxc:db"]}); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.DB.Exec(ctx, `UPDATE entities SET state = 'destroyed' WHERE id = $1`, lab.IDs["lxc:db"]); err != nil {
		t.Fatal(err)
	}
	n, err := sw.Reconcile(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reconcile resolved %d (%v)", n, err)
	}
	var why string
	if err := lab.DB.QueryRow(ctx, `SELECT payload->>'reason' FROM events WHERE type = 'signal.resolved' ORDER BY id DESC LIMIT 1`).Scan(&why); err != nil ||
		!strings.Contains(why, "destroyed") {
		t.Errorf("reason %q (%v)", why, err)
	}
}

// Retention deletes samples older than the retention, in batches, and keeps the rest.
func TestRetention(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory), NoSim: true})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	target := lab.IDs["lxc:web"]
	for i := 0; i < 25; i++ {
		at := now.Add(-time.Duration(i) * 48 * time.Hour) // one every two days, back 48 days
		if _, err := lab.DB.Exec(ctx, `INSERT INTO metric_samples (target_id, name, value, at) VALUES ($1, 'cpu_pct', $2, $3)`, target, i, at); err != nil {
			t.Fatal(err)
		}
	}
	sw := newSweeper(t, lab.DB, func() time.Time { return now }, func(o *Options) { o.RetentionBatch = 3 })
	deleted, err := sw.Retention(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kept int
	var oldest time.Time
	if err := lab.DB.QueryRow(ctx, `SELECT count(*), min(at) FROM metric_samples`).Scan(&kept, &oldest); err != nil {
		t.Fatal(err)
	}
	// Days 0..30 are kept (0, 2, …, 30 → 16 samples); 32..48 go (9 samples).
	if deleted != 9 || kept != 16 || now.Sub(oldest) > 30*24*time.Hour {
		t.Fatalf("deleted %d, kept %d, oldest %s", deleted, kept, oldest)
	}
}

// Two sweepers never run the same pass at once: the second gets ErrBusy.
func TestPassesAreExclusive(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory), NoSim: true})
	sw := newSweeper(t, lab.DB, nil, nil)
	ctx := context.Background()
	// Another scheduler holds the pass's lock until its transaction ends.
	errRelease := errors.New("release the lock")
	err := pg.InTx(ctx, lab.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockStale)); err != nil {
			return err
		}
		if _, err := sw.Staleness(ctx); err != ErrBusy {
			t.Errorf("err %v, want ErrBusy", err)
		}
		return errRelease
	})
	if !errors.Is(err, errRelease) {
		t.Fatal(err)
	}
	if _, err := sw.Staleness(ctx); err != nil {
		t.Fatalf("after the lock: %v", err)
	}
	sw.Stop()
	sw.Stop()
}
