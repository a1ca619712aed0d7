package leases

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
)

// fleet is n Proxmox hosts (and guests, which are not units of their own).
func fleet(n int) []byte {
	var b strings.Builder
	b.WriteString("entities:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {type: proxmox-host, name: h%02d, attributes: {lan_ipv4: 127.0.10.%d, node: h%02d}}\n", i, i+1, i)
		fmt.Fprintf(&b, "  - {type: lxc, name: g%02d, attributes: {vmid: %d, host: h%02d}}\n", i, 100+i, i)
	}
	b.WriteString("  - {type: proxmox-host, name: later, state: planned, attributes: {lan_ipv4: 127.0.10.99, node: later}}\n")
	return []byte(b.String())
}

func newManager(t testing.TB, lab *labtest.Lab, id string) *Manager {
	t.Helper()
	m, err := New(Options{Pool: lab.DB, ID: id, Logger: zerolog.Nop(), Renew: 100 * time.Millisecond, Expiry: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tick(t *testing.T, ms ...*Manager) {
	t.Helper()
	for _, m := range ms {
		if err := m.Tick(context.Background()); err != nil {
			t.Fatalf("%s: %v", m.ID(), err)
		}
	}
}

// owners maps every owned unit to its owners; more than one is a double.
func owners(ms ...*Manager) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		for _, u := range m.Owned() {
			out[u] = append(out[u], m.ID())
		}
	}
	return out
}

func assertPartition(t *testing.T, units int, ms ...*Manager) map[string][]string {
	t.Helper()
	o := owners(ms...)
	for u, by := range o {
		if len(by) > 1 {
			t.Fatalf("%s owned by %v at once", u, by)
		}
	}
	if len(o) != units {
		t.Fatalf("%d units owned, want %d: %v", len(o), units, o)
	}
	return o
}

// Three schedulers split the units between them (each a share, none twice, every host not
// destroyed and net); a fourth joining takes units only from the others,
// moving nothing between them; a leaving one's units go to the rest.
func TestSpreadJoinLeave(t *testing.T) {
	lab := labtest.New(t, labtest.Options{Inventory: fleet(30), NoSim: true})
	units := 32 // 30 hosts, the planned one (its guests are refused by the key gate, visibly) + net
	a, b, c := newManager(t, lab, "a"), newManager(t, lab, "b"), newManager(t, lab, "c")
	tick(t, a, b, c) // all join
	tick(t, a, b, c) // all see all, release what is not theirs
	tick(t, a, b, c) // and take what was released
	o := assertPartition(t, units, a, b, c)
	for _, m := range []*Manager{a, b, c} {
		if n := len(m.Owned()); n < 4 {
			t.Errorf("%s owns %d of %d units", m.ID(), n, units)
		}
	}

	d := newManager(t, lab, "d")
	for range 3 {
		tick(t, d, a, b, c)
		for u, by := range owners(a, b, c, d) {
			if len(by) > 1 {
				t.Fatalf("during the join %s owned by %v", u, by)
			}
		}
	}
	after := assertPartition(t, units, a, b, c, d)
	moved := 0
	for u, by := range o {
		if after[u][0] != by[0] {
			moved++
			if after[u][0] != "d" {
				t.Errorf("%s moved from %s to %s, not to the newcomer", u, by[0], after[u][0])
			}
		}
	}
	if moved == 0 || len(d.Owned()) != moved {
		t.Errorf("the newcomer owns %d, %d moved", len(d.Owned()), moved)
	}

	// d stops gracefully: its units are free at once.
	d.Stop()
	tick(t, a, b, c)
	tick(t, a, b, c)
	assertPartition(t, units, a, b, c)
}

// A scheduler that stops renewing (killed, or paused) stops owning its units by itself
// before its leases expire, and the others take them after the expiry, never earlier.
func TestFailoverAndFencing(t *testing.T) {
	lab := labtest.New(t, labtest.Options{Inventory: fleet(12), NoSim: true})
	a, b := newManager(t, lab, "a"), newManager(t, lab, "b")
	for range 3 {
		tick(t, a, b)
	}
	assertPartition(t, 14, a, b)
	mine := b.Owned()
	if len(mine) == 0 {
		t.Fatal("b owns nothing")
	}
	var gens []int64
	for _, l := range b.Held() {
		gens = append(gens, l.Generation)
	}

	// b is paused (it ticks no more). a keeps ticking: until b's leases lapse a takes
	// nothing of b's; b's Owns turns false before they lapse.
	paused := time.Now()
	sawBStop := false
	for time.Since(paused) < 2*time.Second {
		tick(t, a)
		o := owners(a, b)
		for u, by := range o {
			if len(by) > 1 {
				t.Fatalf("%s owned by %v at once", u, by)
			}
		}
		if len(b.Owned()) == 0 {
			sawBStop = true
		}
		if slices.Contains(a.Owned(), mine[0]) {
			if !sawBStop {
				t.Fatal("a took a unit while b still counted it as owned")
			}
			if since := time.Since(paused); since < 300*time.Millisecond {
				t.Fatalf("a took %s %s after b's last renewal, before the 400 ms expiry", mine[0], since)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// a is alone now (b's membership lapsed too): it owns everything, at a higher generation.
	for range 2 {
		tick(t, a)
	}
	assertPartition(t, 14, a)
	for i, u := range mine {
		for _, l := range a.Held() {
			if l.Unit == u && l.Generation <= gens[i] {
				t.Errorf("%s taken over at generation %d, not above b's %d", u, l.Generation, gens[i])
			}
		}
	}

	// b wakes up: its renewals find its leases taken, so it owns nothing until the units
	// are handed back to it; at no point do both own one.
	for range 4 {
		tick(t, b, a)
		for u, by := range owners(a, b) {
			if len(by) > 1 {
				t.Fatalf("after b woke, %s owned by %v", u, by)
			}
		}
	}
	assertPartition(t, 14, a, b)
}

// A unit no scheduler holds for two expiries raises unit_unheld; it resolves once held. The
// unit's owner is a member that renews its membership but takes nothing (hung after its
// heartbeat): the holder of net, which watches, reports it.
func TestUnheldSignal(t *testing.T) {
	lab := labtest.New(t, labtest.Options{Inventory: fleet(6), NoSim: true})
	ctx := context.Background()
	a := newManager(t, lab, "a")
	var zombie string
	var theirs []string
	for i := 0; zombie == ""; i++ {
		z := fmt.Sprintf("zombie-%d", i)
		if Owner(NetUnit, []string{"a", z}) != "a" {
			continue
		}
		for h := range 7 {
			name := fmt.Sprintf("h%02d", h)
			if h == 6 {
				name = "later"
			}
			if u := HostUnit("proxmox-host:" + name); Owner(u, []string{"a", z}) == z {
				theirs = append(theirs, u)
			}
		}
		if len(theirs) > 0 {
			zombie = z
		} else {
			theirs = nil
		}
	}
	beat := func() {
		if _, err := lab.DB.Exec(ctx, `INSERT INTO scheduler_members (id, expires_at) VALUES ($1, now() + interval '1 hour')
ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at`, zombie); err != nil {
			t.Fatal(err)
		}
	}
	beat()
	open := func() int {
		var n int
		if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM signals WHERE kind = $1 AND status <> 'resolved'`, SignalKind).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	start := time.Now()
	for open() == 0 && time.Since(start) < 3*time.Second {
		tick(t, a)
		time.Sleep(50 * time.Millisecond)
	}
	if n := open(); n != len(theirs) {
		t.Fatalf("%d unit_unheld signals, want %d (%v)", n, len(theirs), theirs)
	}
	if since := time.Since(start); since < 800*time.Millisecond {
		t.Errorf("raised after %s, before two expiries (800 ms)", since)
	}
	// The zombie is gone: a takes its units and the signals resolve.
	if _, err := lab.DB.Exec(ctx, `DELETE FROM scheduler_members WHERE id = $1`, zombie); err != nil {
		t.Fatal(err)
	}
	tick(t, a)
	tick(t, a)
	if n := open(); n != 0 {
		t.Fatalf("%d unit_unheld signals open once a holds everything", n)
	}
}

func TestOwnerIsStable(t *testing.T) {
	ms := []string{"a", "b", "c"}
	if Owner("host:x", ms) != Owner("host:x", []string{"c", "a", "b"}) {
		t.Fatal("the owner depends on the order of members")
	}
	// Removing a member moves only its units.
	for i := range 200 {
		u := fmt.Sprintf("host:h%d", i)
		if o := Owner(u, ms); o != "c" && Owner(u, []string{"a", "b"}) != o {
			t.Fatalf("%s moved from %s when c left", u, o)
		}
	}
}

// A unit whose owner changed is handed over in two steps: its holder stops counting it as
// owned at once (Change.Releasing) but keeps the lease while Busy says work is in hand, so
// the new owner cannot take it; it is released once Busy turns false, or after Expiry at the
// most when Busy never does.
func TestHandoverWaitsForWorkInHand(t *testing.T) {
	lab := labtest.New(t, labtest.Options{Inventory: fleet(8), NoSim: true})
	var mu sync.Mutex
	busy := map[string]bool{}
	var releasing []string
	a, err := New(Options{Pool: lab.DB, ID: "a", Logger: zerolog.Nop(), Renew: 100 * time.Millisecond, Expiry: 400 * time.Millisecond,
		Busy:     func(u string) bool { mu.Lock(); defer mu.Unlock(); return busy[u] },
		OnChange: func(c Change) { mu.Lock(); defer mu.Unlock(); releasing = append(releasing, c.Releasing...) }})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, a)
	assertPartition(t, 10, a) // 8 hosts, the planned one, net
	all := a.Owned()
	mu.Lock()
	for _, u := range all {
		busy[u] = true // every unit has a check running
	}
	mu.Unlock()

	b := newManager(t, lab, "b")
	tick(t, b) // joins; everything is under a's live leases
	began := time.Now()
	tick(t, a) // sees b: the units b owns now begin their hand-over
	var moving []string
	for _, u := range all {
		if Owner(u, []string{"a", "b"}) == "b" {
			moving = append(moving, u)
		}
	}
	if len(moving) < 2 {
		t.Fatalf("b owns %v of %v: the test needs two units moving", moving, all)
	}
	mu.Lock()
	got := slices.Clone(releasing)
	mu.Unlock()
	slices.Sort(got)
	if !slices.Equal(got, moving) {
		t.Fatalf("Change.Releasing = %v, want the units moving to b %v", got, moving)
	}
	for _, u := range moving {
		if a.Owns(u) {
			t.Fatalf("a still owns %s after its hand-over began", u)
		}
	}
	// While the work is in hand, a keeps the leases and b takes nothing.
	for range 2 {
		tick(t, a, b)
		time.Sleep(50 * time.Millisecond)
	}
	if took := b.Owned(); len(took) > 0 && time.Since(began) < 400*time.Millisecond {
		t.Fatalf("b took %v while a's work on them was in hand", took)
	}

	// The first unit's work ends: it is released at a's next tick and b takes it.
	first, rest := moving[0], moving[1:]
	mu.Lock()
	busy[first] = false
	mu.Unlock()
	tick(t, a, b)
	if !b.Owns(first) {
		t.Fatalf("b does not own %s once a's work on it ended (held by a: %v)", first, a.Held())
	}
	if took := b.Owned(); len(took) != 1 && time.Since(began) < 400*time.Millisecond {
		t.Fatalf("b owns %v, want only %s: the others' work is still in hand", took, first)
	}

	// The rest stay busy for ever: they go at the Expiry bound, not before, not much after.
	for !slices.Contains(b.Owned(), rest[0]) {
		if time.Since(began) > 3*time.Second {
			t.Fatalf("%s still not handed over %s after its hand-over began (a holds %v)", rest[0], time.Since(began), a.Held())
		}
		tick(t, a, b)
		for u, by := range owners(a, b) {
			if len(by) > 1 {
				t.Fatalf("%s owned by %v at once", u, by)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if since := time.Since(began); since < 400*time.Millisecond {
		t.Fatalf("busy units handed over %s after the hand-over began, before the 400 ms bound", since)
	}
	tick(t, a, b)
	assertPartition(t, 10, a, b)
}

// Change.TakenOver names the units taken from a holder that is no longer a member (it died
// or stopped), never those handed over by a live one: only the former resume at once.
func TestTakenOverOnlyFromGoneHolders(t *testing.T) {
	lab := labtest.New(t, labtest.Options{Inventory: fleet(12), NoSim: true})
	var mu sync.Mutex
	acquired, takenOver := map[string][]string{}, map[string][]string{}
	manager := func(id string) *Manager {
		m, err := New(Options{Pool: lab.DB, ID: id, Logger: zerolog.Nop(), Renew: 100 * time.Millisecond, Expiry: 400 * time.Millisecond,
			OnChange: func(c Change) {
				mu.Lock()
				defer mu.Unlock()
				acquired[id] = append(acquired[id], c.Acquired...)
				takenOver[id] = append(takenOver[id], c.TakenOver...)
			}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := manager("a")
	tick(t, a)
	b := manager("b")
	for range 3 {
		tick(t, b, a)
	}
	assertPartition(t, 14, a, b)
	mu.Lock()
	if len(acquired["b"]) == 0 || len(takenOver["b"]) != 0 {
		t.Fatalf("b joined and took %v from live a, reported as taken over: %v", acquired["b"], takenOver["b"])
	}
	clear(acquired)
	clear(takenOver)
	mu.Unlock()
	mine := b.Owned()
	b.Stop() // its membership is gone with it
	tick(t, a)
	assertPartition(t, 14, a)
	mu.Lock()
	defer mu.Unlock()
	got := slices.Clone(takenOver["a"])
	slices.Sort(got)
	if !slices.Equal(got, mine) || !slices.Equal(acquired["a"], got) {
		t.Fatalf("a took %v from gone b, reported taken over %v; want %v", acquired["a"], got, mine)
	}
}
