package checks

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/checks/checkstest"
	shchecks "github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
)

// One flush: the latest result of each check wins (an older one arriving later does not
// overwrite it), every result's samples land on the check's target, a result of a check
// deleted since it ran is dropped and counted, and the target's status and health.changed
// follow the combined health.
func TestWriterFlush(t *testing.T) {
	t.Parallel()
	inv := []byte(`entities:
  - {type: ingress-route, name: a.lab.example, attributes: {url: "http://a.lab.example/"}}
  - {type: ingress-route, name: b.lab.example, attributes: {url: "http://b.lab.example/"}}
`)
	lab := checkstest.New(t, checkstest.Options{Inventory: inv, NoSim: true})
	defs := lab.DeriveChecks(t, func(_ shchecks.Target, d *shchecks.Def) bool { return d.Kind == "http" })
	if len(defs) != 2 {
		t.Fatalf("%d http checks derived", len(defs))
	}
	a, b := defs[0], defs[1]
	reg := metrics.NewRegistry()
	w := newWriter(lab.DB, zerolog.Nop(), reg, SystemClock{}, time.Second, 100)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	rec := func(d checkstest.Def, at time.Time, health string, latency float64) record {
		res := observed(health, "HTTP in %.0f ms", latency)
		res.Summary = map[string]any{"latency_ms": latency}
		res.Metrics = []Metric{{"http_latency_ms", latency}}
		return record{checkID: d.ID, checkSlug: d.Slug, kind: d.Kind, targetID: d.TargetID, targetSlug: d.TargetSlug, at: at, res: res}
	}
	gone := record{checkID: uuid.NewString(), checkSlug: "check:gone", kind: "http", targetID: a.TargetID, targetSlug: a.TargetSlug,
		at: t0, res: observed(HealthUp, "gone")}
	gone.res.Metrics = []Metric{{"http_latency_ms", 99}}
	batch := []record{
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
	result := func(d checkstest.Def) row {
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
	status := func(d checkstest.Def) string {
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
	if err := w.flush(ctx, []record{rec(a, t0.Add(time.Second), HealthUp, 4)}); err != nil {
		t.Fatal(err)
	}
	if r := result(a); r.health != HealthDown || r.runs != 1 {
		t.Errorf("after an older result: %+v", r)
	}
	if err := w.flush(ctx, []record{rec(a, t0.Add(3*time.Second), HealthUp, 5)}); err != nil {
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
