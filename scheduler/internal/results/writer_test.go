package results

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
)

// routeChecks is a lab of ingress routes <name>.lab.example with their http checks, in the
// order of names.
func routeChecks(t *testing.T, names ...string) (*labtest.Lab, []labtest.Def) {
	t.Helper()
	var inv strings.Builder
	inv.WriteString("entities:\n")
	for _, n := range names {
		fmt.Fprintf(&inv, "  - {type: ingress-route, name: %s.lab.example, attributes: {url: \"http://%s.lab.example/\"}}\n", n, n)
	}
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inv.String()), NoSim: true})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool { return d.Kind == "http" })
	if len(defs) != len(names) {
		t.Fatalf("%d http checks derived for %d routes", len(defs), len(names))
	}
	slices.SortFunc(defs, func(x, y labtest.Def) int { return strings.Compare(x.TargetSlug, y.TargetSlug) })
	return lab, defs
}

// hostChecks is a lab of one host with two of its ssh-script checks.
func hostChecks(t *testing.T) (lab *labtest.Lab, first, second labtest.Def) {
	t.Helper()
	inv := []byte(`entities:
  - {type: host, name: a, attributes: {lan_ipv4: 127.0.0.1, ssh_port: 22, user: root, os: linux}}
`)
	lab = labtest.New(t, labtest.Options{Inventory: inv, NoSim: true})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool { return d.Kind == "ssh-script" })
	if len(defs) < 2 {
		t.Fatalf("%d ssh-script checks derived", len(defs))
	}
	return lab, defs[0], defs[1]
}

// One flush: the latest result of each check wins (an older one arriving later does not
// overwrite it), every result's samples land on the check's target, a result of a check
// deleted since it ran is dropped and counted, and the target's status and health.changed
// follow the combined health.
func TestWriterFlush(t *testing.T) {
	t.Parallel()
	lab, defs := routeChecks(t, "a", "b")
	a, b := defs[0], defs[1]
	reg := metrics.NewRegistry()
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), Metrics: reg, FlushBatch: 100})
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	rec := func(d labtest.Def, at time.Time, health string, latency float64) Record {
		res := Observed(health, "HTTP in %.0f ms", latency)
		res.Summary = map[string]any{"latency_ms": latency}
		res.Metrics = []Metric{{"http_latency_ms", latency}}
		return Record{CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug, At: at, Result: res}
	}
	gone := Record{CheckID: uuid.NewString(), CheckSlug: "check:gone", Kind: "http", TargetID: a.TargetID, TargetSlug: a.TargetSlug,
		At: t0, Result: Observed(HealthUp, "gone")}
	gone.Result.Metrics = []Metric{{"http_latency_ms", 99}}
	batch := []Record{
		rec(a, t0.Add(2*time.Second), HealthDown, 3),
		rec(a, t0, HealthUp, 1), // older, later in the batch
		rec(b, t0, HealthUp, 2),
		gone,
	}
	if err := w.flush(ctx, batch); err != nil {
		t.Fatal(err)
	}
	type row struct {
		health string
		at     time.Time
		runs   int
	}
	result := func(d labtest.Def) row {
		t.Helper()
		var r row
		if err := lab.DB.QueryRow(ctx, `SELECT health, at, runs FROM check_results WHERE check_id = $1 AND target_id = $2`, d.ID, d.TargetID).
			Scan(&r.health, &r.at, &r.runs); err != nil {
			t.Fatalf("%s: %v", d.Slug, err)
		}
		return r
	}
	if r := result(a); r.health != HealthDown || !r.at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("a: %+v, want the latest (down at t0+2s)", r)
	}
	var samples, goneSamples int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE check_id IS NOT NULL), count(*) FILTER (WHERE value = 99)
FROM metric_samples WHERE name = 'http_latency_ms'`).Scan(&samples, &goneSamples); err != nil {
		t.Fatal(err)
	}
	if samples != 3 || goneSamples != 0 {
		t.Errorf("%d samples (want 3: every result of a and b), %d of the deleted check (want 0)", samples, goneSamples)
	}
	if v := reg.Value("oikos_scheduler_results_dropped_total", "reason", "check_deleted"); v != 1 {
		t.Errorf("dropped %v, want 1", v)
	}
	status := func(d labtest.Def) string {
		t.Helper()
		var h string
		if err := lab.DB.QueryRow(ctx, `SELECT health FROM entity_status WHERE entity_id = $1`, d.TargetID).Scan(&h); err != nil {
			t.Fatalf("%s: %v", d.TargetSlug, err)
		}
		return h
	}
	if sa, sb := status(a), status(b); sa != HealthDown || sb != HealthUp {
		t.Errorf("status a %s (want down), b %s (want up)", sa, sb)
	}
	// A result older than the stored one changes nothing but adds its sample; a newer one
	// counts a run and brings the target back up, with one health.changed.
	if err := w.flush(ctx, []Record{rec(a, t0.Add(time.Second), HealthUp, 4)}); err != nil {
		t.Fatal(err)
	}
	if r := result(a); r.health != HealthDown || r.runs != 1 {
		t.Errorf("after an older result: %+v", r)
	}
	if err := w.flush(ctx, []Record{rec(a, t0.Add(3*time.Second), HealthUp, 5)}); err != nil {
		t.Fatal(err)
	}
	if r := result(a); r.health != HealthUp || r.runs != 2 {
		t.Errorf("after a newer result: %+v", r)
	}
	if s := status(a); s != HealthUp {
		t.Errorf("status a %s after recovering", s)
	}
	var changes int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = $1 AND entity_id = $2`, EventHealthChanged, a.TargetID).Scan(&changes); err != nil {
		t.Fatal(err)
	}
	if changes != 2 {
		t.Errorf("%d health.changed events for a (unknown→down, down→up), want 2", changes)
	}
}

// cpuRecord is a cpu result of d at at.
func cpuRecord(d labtest.Def, at time.Time, health string, pct float64) Record {
	res := Observed(health, "cpu %.1f%%", pct)
	if health == HealthUnknown {
		res = Unknown(ClassUnreachable, "Proxmox host unreachable")
	}
	res.Summary = map[string]any{"cpu_pct": pct}
	res.Metrics = []Metric{{"cpu_pct", pct}}
	return Record{CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug, At: at, Result: res}
}

type storedRow struct {
	health, reason  string
	at              time.Time
	observed        *time.Time
	runs            int
	summary         map[string]any
	status          string
	lastCheck       *time.Time
	events, samples int
}

func readStored(t *testing.T, lab *labtest.Lab, d labtest.Def) storedRow {
	t.Helper()
	var r storedRow
	err := lab.DB.QueryRow(context.Background(), `
SELECT cr.health, cr.reason, cr.at, cr.observed_at, cr.runs, cr.summary, es.health, es.last_check_at,
       (SELECT count(*) FROM events WHERE type = $2 AND entity_id = cr.target_id),
       (SELECT count(*) FROM metric_samples WHERE check_id = cr.check_id)
FROM check_results cr JOIN entity_status es ON es.entity_id = cr.target_id WHERE cr.check_id = $1`, d.ID, EventHealthChanged).
		Scan(&r.health, &r.reason, &r.at, &r.observed, &r.runs, &r.summary, &r.status, &r.lastCheck, &r.events, &r.samples)
	if err != nil {
		t.Fatalf("%s: %v", d.Slug, err)
	}
	return r
}

// A result that repeats its check's stored state is confirmed, not rewritten: the row's at,
// observed_at and runs advance, and the target's last_check_at, while its reason and
// summary stay those of the run that set the state and no status is recomputed; its sample
// is written. A changing result, a target the sweep marked stale, a row changed behind the
// writer's back and a target whose checks changed (ForgetTargets) are written in full.
func TestWriterConfirmsRepeats(t *testing.T) {
	t.Parallel()
	lab, cpu, other := hostChecks(t)
	reg := metrics.NewRegistry()
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), Metrics: reg})
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	flush := func(recs ...Record) {
		t.Helper()
		if err := w.flush(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	flush(cpuRecord(cpu, t0, HealthUp, 3), cpuRecord(other, t0, HealthUp, 10))
	first := readStored(t, lab, cpu)
	if first.status != HealthUp || first.runs != 1 || first.events != 1 {
		t.Fatalf("first write: %+v", first)
	}

	// Repeats: up again with other figures.
	flush(cpuRecord(cpu, t0.Add(time.Minute), HealthUp, 5), cpuRecord(other, t0.Add(time.Minute), HealthUp, 11))
	r := readStored(t, lab, cpu)
	if r.runs != 2 || !r.at.Equal(t0.Add(time.Minute)) || r.observed == nil || !r.observed.Equal(t0.Add(time.Minute)) ||
		r.lastCheck == nil || !r.lastCheck.Equal(t0.Add(time.Minute)) {
		t.Errorf("after a repeat: runs %d at %v observed %v last_check_at %v; want 2 and t0+1m", r.runs, r.at, r.observed, r.lastCheck)
	}
	if r.reason != "cpu 3.0%" || r.summary["cpu_pct"] != 3.0 || r.events != 1 || r.samples != 2 {
		t.Errorf("after a repeat: reason %q summary %v events %d samples %d; want the first run's reason and summary, 1 event, 2 samples",
			r.reason, r.summary, r.events, r.samples)
	}
	if v := reg.Value("oikos_scheduler_results_unchanged_total"); v != 2 {
		t.Errorf("unchanged results counted %v, want 2", v)
	}

	// A change: written in full, with the transition.
	flush(cpuRecord(cpu, t0.Add(2*time.Minute), HealthDegraded, 95))
	if r := readStored(t, lab, cpu); r.health != HealthDegraded || r.status != HealthDegraded || r.events != 2 || r.runs != 3 {
		t.Errorf("after a change: %+v", r)
	}
	// A degraded repeat with another reason is a change too (the target's reason shows it).
	flush(cpuRecord(cpu, t0.Add(3*time.Minute), HealthDegraded, 96))
	if r := readStored(t, lab, cpu); r.reason != "cpu 96.0%" || r.runs != 4 {
		t.Errorf("degraded with a new reason: %+v", r)
	}
	flush(cpuRecord(cpu, t0.Add(4*time.Minute), HealthUp, 4))
	if r := readStored(t, lab, cpu); r.status != HealthUp || r.events != 3 {
		t.Errorf("back up: %+v", r)
	}

	// The sweep marks the target stale: the next repeat must bring it back up.
	if _, err := lab.DB.Exec(ctx, `UPDATE entity_status SET health = 'stale', reason = 'stale (test)' WHERE entity_id = $1`, cpu.TargetID); err != nil {
		t.Fatal(err)
	}
	flush(cpuRecord(cpu, t0.Add(5*time.Minute), HealthUp, 4))
	if r := readStored(t, lab, cpu); r.status != HealthUp || r.events != 4 {
		t.Errorf("a repeat on a stale target: %+v; want it recomputed (up, one more event)", r)
	}
	// An unknown repeat keeps a stale target stale (written in full, as before).
	flush(cpuRecord(cpu, t0.Add(6*time.Minute), HealthUnknown, 0), cpuRecord(other, t0.Add(6*time.Minute), HealthUnknown, 0))
	if _, err := lab.DB.Exec(ctx, `UPDATE entity_status SET health = 'stale', reason = 'stale (test)' WHERE entity_id = $1`, cpu.TargetID); err != nil {
		t.Fatal(err)
	}
	flush(cpuRecord(cpu, t0.Add(7*time.Minute), HealthUnknown, 0))
	if r := readStored(t, lab, cpu); r.status != HealthStale || !r.at.Equal(t0.Add(7*time.Minute)) {
		t.Errorf("unknown repeat on a stale target: %+v; want stale kept and the run recorded", r)
	}

	// A row changed behind the writer's back: the repeat is written in full.
	flush(cpuRecord(cpu, t0.Add(8*time.Minute), HealthUp, 4), cpuRecord(other, t0.Add(8*time.Minute), HealthUp, 4))
	if _, err := lab.DB.Exec(ctx, `UPDATE check_results SET health = 'down', reason = 'elsewhere' WHERE check_id = $1`, cpu.ID); err != nil {
		t.Fatal(err)
	}
	flush(cpuRecord(cpu, t0.Add(9*time.Minute), HealthUp, 4))
	if r := readStored(t, lab, cpu); r.health != HealthUp || r.reason != "cpu 4.0%" {
		t.Errorf("after an outside change: %+v", r)
	}

	// The other check goes down, then is disabled: with ForgetTargets the next repeat of
	// the cpu check recomputes the target, which is up again.
	flush(cpuRecord(other, t0.Add(10*time.Minute), HealthDown, 0))
	if r := readStored(t, lab, cpu); r.status != HealthDown {
		t.Fatalf("other down: target %s", r.status)
	}
	if _, err := lab.DB.Exec(ctx, `UPDATE check_defs SET enabled = false WHERE id = $1`, other.ID); err != nil {
		t.Fatal(err)
	}
	w.ForgetTargets(map[string]bool{cpu.TargetID: true})
	flush(cpuRecord(cpu, t0.Add(11*time.Minute), HealthUp, 4))
	if r := readStored(t, lab, cpu); r.status != HealthUp {
		t.Errorf("after disabling the down check: target %s, want up", r.status)
	}
}

// Deadlines: a repeat waits up to UnchangedFlushEvery, a change up to FlushEvery; Stop
// writes what waits.
func TestWriterDeadlines(t *testing.T) {
	t.Parallel()
	inv := []byte(`entities:
  - {type: host, name: a, attributes: {lan_ipv4: 127.0.0.1, ssh_port: 22, user: root, os: linux}}
`)
	lab := labtest.New(t, labtest.Options{Inventory: inv, NoSim: true})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool { return d.Kind == "ssh-script" })
	cpu := defs[0]
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), FlushEvery: time.Hour, UnchangedFlushEvery: 2 * time.Hour})
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	if err := w.flush(ctx, []Record{cpuRecord(cpu, t0, HealthUp, 3)}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	w.Submit(ctx, cpuRecord(cpu, t0.Add(time.Minute), HealthUp, 4))
	at, full := w.due()
	if full || at.Before(before.Add(2*time.Hour)) || at.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("a repeat is due at %v (full %v), want in 2 h", at, full)
	}
	w.Submit(ctx, cpuRecord(cpu, t0.Add(2*time.Minute), HealthDown, 0))
	if at, _ := w.due(); at.After(time.Now().Add(time.Hour)) || at.Before(before.Add(time.Hour)) {
		t.Errorf("a change is due at %v, want in 1 h", at)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	w.Stop()
	if r := readStored(t, lab, cpu); r.health != HealthDown || r.samples != 3 || w.Pending() != 0 {
		t.Errorf("after Stop: %+v, %d pending", r, w.Pending())
	}
}

// streak counts the consecutive runs at a check's current health, through both write
// paths (a change, a confirmed repetition) and within one batch (three runs in one flush
// window are three runs): the incident thresholds count it.
func TestWriterStreak(t *testing.T) {
	t.Parallel()
	lab, defs := routeChecks(t, "a")
	d := defs[0]
	var flushes []Flush
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), Flushed: func(f Flush) { flushes = append(flushes, f) }})
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	rec := func(i int, health string) Record {
		return Record{CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug,
			At: t0.Add(time.Duration(i) * time.Second), Result: Observed(health, "HTTP 502")}
	}
	streak := func() (string, int) {
		t.Helper()
		var h string
		var n int
		if err := lab.DB.QueryRow(ctx, `SELECT health, streak FROM check_results WHERE check_id = $1`, d.ID).Scan(&h, &n); err != nil {
			t.Fatal(err)
		}
		return h, n
	}
	for _, step := range []struct {
		batch  []Record
		health string
		streak int
	}{
		{[]Record{rec(0, HealthUp)}, HealthUp, 1},
		{[]Record{rec(1, HealthUp)}, HealthUp, 2},                                             // confirmed repetition
		{[]Record{rec(2, HealthDown)}, HealthDown, 1},                                         // a change restarts it
		{[]Record{rec(3, HealthDown), rec(5, HealthDown), rec(4, HealthDown)}, HealthDown, 4}, // three runs in one batch
		{[]Record{rec(6, HealthDown), rec(7, HealthUp), rec(8, HealthUp)}, HealthUp, 2},       // the tail of the batch counts
	} {
		if err := w.flush(ctx, step.batch); err != nil {
			t.Fatal(err)
		}
		if h, n := streak(); h != step.health || n != step.streak {
			t.Fatalf("after %d results: %s ×%d, want %s ×%d", len(step.batch), h, n, step.health, step.streak)
		}
	}
	if len(flushes) != 5 || flushes[2].Problems != 1 || flushes[2].Changes != 1 || flushes[1].Problems != 0 {
		t.Errorf("Flushed saw %+v", flushes)
	}

	// An unreachable machine's unconfirmed first failure (unknown until the next attempt
	// fails too) is a failed run of the streak its confirmation (down) continues, across
	// flushes and within one; any other unknown restarts it.
	unreachable := func(i int, health string) Record {
		r := rec(i, health)
		if health == HealthDown {
			r.Result = Observed(HealthDown, "unreachable over SSH")
		} else {
			r.Result = Unknown(ClassUnreachable, "unreachable over SSH (once so far: down if the next attempt fails too)")
		}
		r.Result.Class = ClassUnreachable
		return r
	}
	for _, step := range []struct {
		batch  []Record
		health string
		streak int
	}{
		{[]Record{unreachable(10, HealthUnknown)}, HealthUnknown, 1},
		{[]Record{unreachable(11, HealthDown)}, HealthDown, 2},
		{[]Record{rec(12, HealthUp)}, HealthUp, 1},
		{[]Record{unreachable(13, HealthUnknown), unreachable(14, HealthDown)}, HealthDown, 2},
		{[]Record{{CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug,
			At: t0.Add(15 * time.Second), Result: Unknown(ClassTimeout, "no answer")}}, HealthUnknown, 1},
		{[]Record{unreachable(16, HealthDown)}, HealthDown, 1},
	} {
		if err := w.flush(ctx, step.batch); err != nil {
			t.Fatal(err)
		}
		if h, n := streak(); h != step.health || n != step.streak {
			t.Fatalf("unreachable, after %v: %s ×%d, want %s ×%d", step.batch[len(step.batch)-1].At.Sub(t0), h, n, step.health, step.streak)
		}
	}
}

// With a Holder, a result is written only while its lease is held at its generation: a
// lease taken by another scheduler, or re-acquired since the run, drops it; one that merely
// expired does not.
func TestWriterFence(t *testing.T) {
	t.Parallel()
	lab, defs := routeChecks(t, "a")
	d := defs[0]
	ctx := context.Background()
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), Holder: "s1"})
	t0 := time.Now().Truncate(time.Microsecond)
	rec := func(i int, gen int64) Record {
		return Record{CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug,
			At: t0.Add(time.Duration(i) * time.Second), Result: Observed(HealthDown, "HTTP 50%d", i), Unit: "net", Generation: gen}
	}
	lease := func(holder string, gen int64, ttl string) {
		if _, err := lab.DB.Exec(ctx, `INSERT INTO scheduler_leases (resource, holder, generation, expires_at)
VALUES ('net', $1, $2, now() + $3::interval)
ON CONFLICT (resource) DO UPDATE SET holder = EXCLUDED.holder, generation = EXCLUDED.generation, expires_at = EXCLUDED.expires_at`,
			holder, gen, ttl); err != nil {
			t.Fatal(err)
		}
	}
	reason := func() string {
		var r string
		if err := lab.DB.QueryRow(ctx, `SELECT coalesce((SELECT reason FROM check_results WHERE check_id = $1), '')`, d.ID).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, step := range []struct {
		what   string
		setup  func()
		rec    Record
		stored string
	}{
		{"held", func() { lease("s1", 1, "1 hour") }, rec(1, 1), "HTTP 501"},
		{"taken by s2", func() { lease("s2", 2, "1 hour") }, rec(2, 1), "HTTP 501"},
		{"s1 again, later generation", func() { lease("s1", 3, "1 hour") }, rec(3, 1), "HTTP 501"},
		// Expired but taken by nobody (Postgres was down, no renewal could happen): still
		// this scheduler's, at that generation (issue 32: results kept through an outage).
		{"expired, not taken over", func() { lease("s1", 3, "-1 second") }, rec(4, 3), "HTTP 504"},
		{"held at that generation", func() { lease("s1", 3, "1 hour") }, rec(5, 3), "HTTP 505"},
	} {
		step.setup()
		if err := w.flush(ctx, []Record{step.rec}); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if got := reason(); got != step.stored {
			t.Fatalf("%s: stored %q, want %q", step.what, got, step.stored)
		}
	}
}

// waitUntil polls cond every 10 ms until it holds, failing the test after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PendingFor counts a unit's results submitted and not yet written, and no other unit's;
// once it reaches 0 the unit's results are in check_results.
func TestWriterPendingFor(t *testing.T) {
	t.Parallel()
	lab, defs := routeChecks(t, "a", "b")
	a, b := defs[0], defs[1]
	ctx := context.Background()
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), FlushEvery: 100 * time.Millisecond, UnchangedFlushEvery: 100 * time.Millisecond})
	t0 := time.Now().Truncate(time.Microsecond)
	rec := func(d labtest.Def, unit string, at time.Time) Record {
		return Record{CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug,
			At: at, Result: Observed(HealthUp, "HTTP 200"), Unit: unit}
	}
	// Submitted before Start: nothing can be written yet.
	w.Submit(ctx, rec(a, "unit-a", t0))
	w.Submit(ctx, rec(a, "unit-a", t0.Add(time.Second)))
	w.Submit(ctx, rec(b, "unit-b", t0))
	if pa, pb, pc, all := w.PendingFor("unit-a"), w.PendingFor("unit-b"), w.PendingFor("unit-c"), w.Pending(); pa != 2 || pb != 1 || pc != 0 || all != 3 {
		t.Fatalf("pending before Start: unit-a %d (want 2), unit-b %d (want 1), unit-c %d (want 0), all %d (want 3)", pa, pb, pc, all)
	}
	rowAt := func(d labtest.Def) (time.Time, bool) {
		t.Helper()
		var at time.Time
		err := lab.DB.QueryRow(ctx, `SELECT at FROM check_results WHERE check_id = $1`, d.ID).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			return time.Time{}, false
		}
		if err != nil {
			t.Fatalf("%s: %v", d.Slug, err)
		}
		return at, true
	}
	if _, ok := rowAt(a); ok {
		t.Fatal("a result was written before Start")
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	waitUntil(t, 5*time.Second, "unit-a's and unit-b's results settled", func() bool {
		return w.PendingFor("unit-a") == 0 && w.PendingFor("unit-b") == 0
	})
	// Settled means written: the rows are there as soon as PendingFor says 0.
	if at, ok := rowAt(a); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Errorf("a: row %v at %v once unit-a pends 0, want its latest result (t0+1s)", ok, at)
	}
	if at, ok := rowAt(b); !ok || !at.Equal(t0) {
		t.Errorf("b: row %v at %v once unit-b pends 0, want t0", ok, at)
	}
	if n := w.Pending(); n != 0 {
		t.Errorf("%d pending after the flush", n)
	}

	// A unit's count moves on its own: one more result of unit-b leaves unit-a at 0.
	w.Submit(ctx, rec(b, "unit-b", t0.Add(2*time.Second)))
	if pa := w.PendingFor("unit-a"); pa != 0 {
		t.Errorf("unit-a pends %d after a unit-b result, want 0", pa)
	}
	waitUntil(t, 5*time.Second, "the second unit-b result settled", func() bool { return w.PendingFor("unit-b") == 0 })
	if at, ok := rowAt(b); !ok || !at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("b: row %v at %v once the second unit-b result settled, want t0+2s", ok, at)
	}
}

// A result fenced out (its lease not held) is settled too: PendingFor does not keep
// counting what will never be written.
func TestWriterPendingForFenced(t *testing.T) {
	t.Parallel()
	lab, defs := routeChecks(t, "a")
	d := defs[0]
	ctx := context.Background()
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), Holder: "s1", FlushEvery: 100 * time.Millisecond})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	// No lease on "net" at all: the result is dropped.
	w.Submit(ctx, Record{CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug,
		At: time.Now(), Result: Observed(HealthDown, "HTTP 502"), Unit: "net", Generation: 1})
	if p := w.PendingFor("net"); p != 1 {
		t.Fatalf("net pends %d right after Submit, want 1", p)
	}
	waitUntil(t, 5*time.Second, "the fenced-out result settled", func() bool { return w.PendingFor("net") == 0 })
	var n int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM check_results WHERE check_id = $1`, d.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d check_results rows for a fenced-out result, want 0", n)
	}
}

// Expedite makes what waits due now: with hour-long deadlines a repeat and a change stay
// pending, and Expedite has both written within seconds. An Expedite with nothing waiting
// changes nothing for what is submitted later.
func TestWriterExpedite(t *testing.T) {
	t.Parallel()
	lab, cpu, other := hostChecks(t)
	ctx := context.Background()
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), FlushEvery: time.Hour, UnchangedFlushEvery: 2 * time.Hour})
	t0 := time.Now().Truncate(time.Microsecond)
	// cpu's stored state, so its next up result is a repeat (due in 2 h).
	if err := w.flush(ctx, []Record{cpuRecord(cpu, t0, HealthUp, 3)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	w.Expedite() // nothing waits: a no-op
	repeat, change := cpuRecord(cpu, t0.Add(time.Minute), HealthUp, 4), cpuRecord(other, t0.Add(time.Minute), HealthUp, 10)
	repeat.Unit, change.Unit = "u", "u"
	w.Submit(ctx, repeat)
	w.Submit(ctx, change) // other's first result: a change (due in 1 h)
	otherRows := func() int {
		t.Helper()
		var n int
		if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM check_results WHERE check_id = $1`, other.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	time.Sleep(300 * time.Millisecond)
	if p := w.PendingFor("u"); p != 2 {
		t.Fatalf("u pends %d after 300 ms with hour-long deadlines, want 2", p)
	}
	if r := readStored(t, lab, cpu); r.runs != 1 || !r.at.Equal(t0) || otherRows() != 0 {
		t.Fatalf("written before Expedite: cpu runs %d at %v, other rows %d", r.runs, r.at, otherRows())
	}

	w.Expedite()
	waitUntil(t, 5*time.Second, "both results in check_results after Expedite", func() bool {
		r := readStored(t, lab, cpu)
		return r.runs == 2 && r.at.Equal(t0.Add(time.Minute)) && otherRows() == 1
	})
	waitUntil(t, 5*time.Second, "u settled after Expedite", func() bool { return w.PendingFor("u") == 0 })
	if n := w.Pending(); n != 0 {
		t.Errorf("%d pending after Expedite's flush", n)
	}
}
