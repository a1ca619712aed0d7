package leases

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Three schedulers lose the database for longer than a lease lasts, and one of them (c)
// dies meanwhile. The first one back must not find itself the only live member and take
// every unit under a new generation: the others held their results through the same outage
// and would see them fenced out. Each survivor renews its own units with the generation
// unchanged; the dead one's units go to the survivors one expiry after they are back.
func TestOutageLongerThanExpiryKeepsEachSchedulersUnits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stops a private Postgres for longer than a lease")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, db := pgtest.Private(t, 8)
	lab := labtest.New(t, labtest.Options{Inventory: fleet(12), NoSim: true, DB: db})
	const renew, expiry = 100 * time.Millisecond, time.Second
	mk := func(id string) *Manager {
		m, err := New(Options{Pool: lab.DB, ID: id, Logger: zerolog.Nop(), Renew: renew, Expiry: expiry})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b, c := mk("a"), mk("b"), mk("c")
	for range 3 {
		tick(t, a, b, c)
	}
	const units = 14 // 12 hosts, the planned one, net
	assertPartition(t, units, a, b, c)
	gens := func(m *Manager) map[string]int64 {
		out := map[string]int64{}
		for _, l := range m.Held() {
			out[l.Unit] = l.Generation
		}
		return out
	}
	before := map[string]map[string]int64{"a": gens(a), "b": gens(b), "c": gens(c)}
	for id, g := range before {
		if len(g) == 0 {
			t.Fatalf("%s holds no unit before the outage: %v", id, before)
		}
	}

	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Manager{a, b, c} {
		if err := m.Tick(ctx); err == nil {
			t.Fatalf("%s ticked with the database stopped", m.ID())
		}
	}
	// The outage outlasts every lease and every membership row (a duration the scenario is
	// made of, not a wait for something to happen); c dies in it and never ticks again.
	time.Sleep(2 * expiry)
	for _, m := range []*Manager{a, b} {
		if err := m.Tick(ctx); err == nil {
			t.Fatalf("%s ticked with the database stopped", m.ID())
		}
	}
	if err := cluster.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	back := func(m *Manager) {
		t.Helper()
		var err error
		for range 50 { // the pool drops the connections the restart broke, one failure each
			if err = m.Tick(ctx); err == nil {
				return
			}
		}
		t.Fatalf("%s after the database returned: %v", m.ID(), err)
	}
	back(a)
	if got := gens(a); !maps.Equal(got, before["a"]) {
		t.Fatalf("the first scheduler back holds %v, want only its own units as before %v", got, before["a"])
	}
	back(b)
	for _, m := range []*Manager{a, b} {
		if got := gens(m); !maps.Equal(got, before[m.ID()]) {
			t.Errorf("%s holds %v after the outage, want its units with their generations unchanged %v", m.ID(), got, before[m.ID()])
		}
	}
	rows, err := lab.DB.Query(ctx, `SELECT resource, holder, generation FROM scheduler_leases WHERE expires_at > now()`)
	if err != nil {
		t.Fatal(err)
	}
	var unit, holder string
	var gen int64
	live := 0
	for rows.Next() {
		if err := rows.Scan(&unit, &holder, &gen); err != nil {
			t.Fatal(err)
		}
		live++
		if want, ok := before[holder][unit]; !ok || want != gen || holder == "c" {
			t.Errorf("lease %s: holder %s generation %d after the outage; before it was %v", unit, holder, gen, before)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := len(before["a"]) + len(before["b"]); live != want {
		t.Errorf("%d live leases after the outage, want the survivors' %d", live, want)
	}

	// c does not come back: once the grace is over, a and b share its units.
	deadline := time.Now().Add(30 * expiry)
	for len(owners(a, b)) < units {
		if time.Now().After(deadline) {
			t.Fatalf("c's units were never taken: owned %v", owners(a, b))
		}
		time.Sleep(renew)
		back(a)
		back(b)
	}
	o := assertPartition(t, units, a, b)
	for u := range before["c"] {
		if by := o[u]; len(by) != 1 || by[0] == "c" {
			t.Errorf("c's unit %s owned by %v", u, by)
		}
	}
}
