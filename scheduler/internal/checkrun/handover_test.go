package checkrun

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
)

// A unit taken over from another scheduler continues each check's phase from its latest
// stored result: a check that ran half a second ago under the previous holder runs again one
// interval after that run (not at once: no double), and one whose last run is older than an
// interval (its holder died long ago) runs within 2 s (no gap).
func TestTakenUnitContinuesFromStoredRuns(t *testing.T) {
	t.Parallel()
	const interval = 6 * time.Second
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory)})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool {
		d.Interval, d.Timeout = interval, 2*time.Second
		return d.Kind != "http" && d.Kind != "tcp"
	})
	if len(defs) < 4 {
		t.Fatalf("%d checks derived, want a few", len(defs))
	}
	ctx := context.Background()
	seeded := time.Now()
	recent := map[string]bool{}
	for i, d := range defs {
		at := seeded.Add(-500 * time.Millisecond)
		if i%2 == 1 {
			at = seeded.Add(-10 * time.Minute)
		} else {
			recent[d.ID] = true
		}
		if _, err := lab.DB.Exec(ctx, `INSERT INTO check_results (check_id, target_id, health, at, since, first_at, runs)
VALUES ($1, $2, 'up', $3, $3, $3, 1)`, d.ID, d.TargetID, at); err != nil {
			t.Fatal(err)
		}
	}

	var held atomic.Bool
	r := startRunner(t, lab, func(o *Options) {
		o.Holder = "s1"
		o.Lease = func(string) (int64, bool) { return 1, held.Load() }
	})
	// Until the unit is taken nothing runs here; the first runs are skipped (not owned).
	time.Sleep(500 * time.Millisecond)
	units := map[string]bool{}
	r.mu.Lock()
	for _, e := range r.entries {
		units[e.def.Load().Unit] = true
	}
	r.mu.Unlock()
	var list []string
	for u := range units {
		list = append(list, u)
		if _, err := lab.DB.Exec(ctx, `INSERT INTO scheduler_leases (resource, holder, expires_at, generation)
VALUES ($1, 's1', now() + interval '1 hour', 1)`, u); err != nil {
			t.Fatal(err)
		}
	}
	held.Store(true)
	taken := time.Now()
	r.Acquired(list)

	// When each check's next run was written (runs went past the seeded 1).
	ran := map[string]time.Time{}
	for time.Since(seeded) < interval+4*time.Second && len(ran) < len(defs) {
		rows, err := lab.DB.Query(ctx, `SELECT check_id::text FROM check_results WHERE runs > 1`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			if _, ok := ran[id]; !ok {
				ran[id] = time.Now()
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The recent ones are due at seeded − 0.5 s + 6 s, ± the 5 % jitter (0.3 s).
	notBefore := seeded.Add(interval - 500*time.Millisecond - 300*time.Millisecond - 200*time.Millisecond)
	for _, d := range defs {
		at, ok := ran[d.ID]
		switch {
		case !ok:
			t.Errorf("%s (ran %s before the take-over) did not run again within %s", d.Slug, map[bool]string{true: "0.5 s", false: "10 min"}[recent[d.ID]], time.Since(seeded).Round(time.Millisecond))
		case recent[d.ID] && at.Before(notBefore):
			t.Errorf("%s ran %s after the take-over, %s after its previous run: before its interval (%s) was up", d.Slug,
				at.Sub(taken).Round(time.Millisecond), at.Sub(seeded.Add(-500*time.Millisecond)).Round(time.Millisecond), interval)
		case !recent[d.ID] && at.Sub(taken) > 3500*time.Millisecond:
			t.Errorf("%s, last run 10 min ago, ran %s after the take-over, want within 2 s (and a flush)", d.Slug, at.Sub(taken).Round(time.Millisecond))
		}
	}
}

// A unit taken over from a scheduler that died (TakenOver) does not wait a whole interval
// from its checks' last stored runs: each wait is scaled into TakeoverWithin, so every check
// runs again long before its interval from its last run is up, in the order of those runs.
func TestTakenOverUnitResumesWithin(t *testing.T) {
	t.Parallel()
	const interval, within = 8 * time.Second, 2 * time.Second
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory)})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool {
		d.Interval, d.Timeout = interval, 2*time.Second
		return d.Kind != "http" && d.Kind != "tcp"
	})
	ctx := context.Background()
	seeded := time.Now()
	for _, d := range defs {
		// Every check ran just before its holder died: phase continuation would wait ~8 s.
		if _, err := lab.DB.Exec(ctx, `INSERT INTO check_results (check_id, target_id, health, at, since, first_at, runs)
VALUES ($1, $2, 'up', $3, $3, $3, 1)`, d.ID, d.TargetID, seeded.Add(-200*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	var held atomic.Bool
	type run struct {
		id string
		at time.Time
	}
	runs := make(chan run, 1024)
	r := startRunner(t, lab, func(o *Options) {
		o.Holder = "s1"
		o.TakeoverWithin = within
		o.Lease = func(string) (int64, bool) { return 1, held.Load() }
		o.Ran = func(id, _ string, at time.Time) {
			select {
			case runs <- run{id, at}:
			default: // the test has what it needs
			}
		}
	})
	var list []string
	r.mu.Lock()
	seen := map[string]bool{}
	for _, e := range r.entries {
		if u := e.def.Load().Unit; !seen[u] {
			seen[u] = true
			list = append(list, u)
		}
	}
	r.mu.Unlock()
	held.Store(true)
	taken := time.Now()
	r.TakenOver(list)
	first := map[string]time.Time{}
	deadline := time.After(30 * time.Second) // a bound on the wait, not the assertion
	for len(first) < len(defs) {
		select {
		case x := <-runs:
			if _, ok := first[x.id]; !ok {
				first[x.id] = x.at
			}
		case <-deadline:
			t.Fatalf("%d of %d checks ran again after the takeover", len(first), len(defs))
		}
	}
	var worst time.Duration
	for _, d := range defs {
		// Phase continuation would start it at seeded − 0.2 s + 8 s ± 0.4 s: well after.
		if at := first[d.ID]; at.Sub(seeded) >= interval-time.Second {
			t.Errorf("%s ran %s after the takeover: it waited out its interval", d.Slug, at.Sub(taken).Round(time.Millisecond))
		}
		worst = max(worst, first[d.ID].Sub(taken))
	}
	t.Logf("%d checks taken over ran again within %s of the takeover (TakeoverWithin %s, interval %s)", len(defs), worst.Round(time.Millisecond), within, interval)
}
