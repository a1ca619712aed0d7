package app

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Two schedulers share a fleet and lose their database for longer than a lease lasts (issue
// #32, review): when it returns, neither takes the other's units (the first one back would
// otherwise be the only live member and take every unit under a new generation); each
// renews its own, generation unchanged, so the results it held through the outage are
// written, not fenced out as lease_lost.
func TestTwoSchedulersThroughAnOutageLongerThanTheLeases(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stops a private Postgres for longer than a lease")
	}
	ctx := context.Background()
	c, pool := pgtest.Private(t, 4)
	url := c.URL("postgres")
	// Hosts on loopback addresses nothing listens on: their checks fail at once (unreachable),
	// and a failed check's result is a result to keep like any other.
	var inv strings.Builder
	inv.WriteString("entities:\n")
	for i := range 6 {
		fmt.Fprintf(&inv, "  - {type: proxmox-host, name: n%d, attributes: {lan_ipv4: 127.0.77.%d, ssh_port: 2222, user: root, node: n%d, os: linux}}\n", i, i+1, i)
	}
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inv.String()), NoSim: true, DB: pool})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool {
		d.Interval, d.Timeout = time.Second, time.Second
		return true
	})
	key := writeKey(t)
	const expiry = 1500 * time.Millisecond
	start := func(id string) string {
		cfg, err := LoadConfig(func(k string) string {
			return map[string]string{"OIKOS_DATABASE_URL": url, "OIKOS_SSH_KEY_FILE": key, "OIKOS_SCHEDULER_ID": id,
				"OIKOS_SCHEDULER_ADDR": "127.0.0.1:0", "OIKOS_SCHEMA_WAIT": "10s",
				"OIKOS_LEASE_RENEW": "500ms", "OIKOS_LEASE_EXPIRY": expiry.String()}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		return serve(t, func(ctx context.Context, ready func(net.Addr)) error { return run(ctx, cfg, zerolog.Nop(), ready) })
	}
	bases := map[string]string{"s-one": start("s-one"), "s-two": start("s-two")}

	type lease struct {
		holder string
		gen    int64
	}
	leasesNow := func() (map[string]lease, error) {
		rows, err := pool.Query(ctx, `SELECT resource, holder, generation FROM scheduler_leases WHERE expires_at > now()`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string]lease{}
		for rows.Next() {
			var u string
			var l lease
			if err := rows.Scan(&u, &l.holder, &l.gen); err != nil {
				return nil, err
			}
			out[u] = l
		}
		return out, rows.Err()
	}
	// Every check has a result written after `after`.
	allRanSince := func(after time.Time) (bool, string) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM check_results WHERE at > $1`, after).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == len(defs), fmt.Sprintf("%d of %d checks have a result since %s", n, len(defs), after.Format(time.StampMilli))
	}
	within := func(d time.Duration, what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s: %s", what, d, state)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	const units = 7 // six hosts and net
	var before map[string]lease
	within(60*time.Second, "the two schedulers share the units", func() (bool, string) {
		l, err := leasesNow()
		if err != nil {
			return false, err.Error()
		}
		by := map[string]int{}
		for _, x := range l {
			by[x.holder]++
		}
		before = l
		return len(l) == units && by["s-one"] > 0 && by["s-two"] > 0, fmt.Sprintf("%v", l)
	})
	within(60*time.Second, "every check's first result", func() (bool, string) { return allRanSince(time.Time{}) })

	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	// The outage outlasts every lease and membership row: a duration the scenario is made
	// of, not a wait for something to happen.
	time.Sleep(3 * expiry)
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	within(60*time.Second, "every unit held again", func() (bool, string) {
		l, err := leasesNow()
		return err == nil && len(l) == units, fmt.Sprintf("%v %v", l, err)
	})
	after, err := leasesNow()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(after, before) {
		t.Fatalf("leases after the outage %v, want each scheduler's own with its generation unchanged %v", after, before)
	}
	// Results flow again for every check, and none made by either scheduler was fenced out
	// or given up.
	within(90*time.Second, "every check's result after the outage", func() (bool, string) { return allRanSince(resumed) })
	for id, base := range bases {
		for _, reason := range []string{"lease_lost", "buffer_full", "write_failed"} {
			if v := droppedResults(t, base, reason); v != 0 {
				t.Errorf("%s dropped %v results as %s", id, v, reason)
			}
		}
	}
	var unrecorded int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = 'check.results_unrecorded'`).Scan(&unrecorded); err != nil {
		t.Fatal(err)
	}
	if unrecorded != 0 {
		t.Errorf("%d check.results_unrecorded events", unrecorded)
	}
}

// droppedResults reads oikos_scheduler_results_dropped_total{reason} from a scheduler's
// /metrics (0 when the series does not exist yet).
func droppedResults(t *testing.T, base, reason string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^oikos_scheduler_results_dropped_total\{reason="` + regexp.QuoteMeta(reason) + `"\} (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
