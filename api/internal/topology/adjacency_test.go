package topology

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// id makes a readable UUID from a short name (the name's bytes, zero padded).
func id(name string) UUID {
	var u UUID
	copy(u[:], name)
	return u
}

func name(u UUID) string { return strings.TrimRight(string(u[:]), "\x00") }

// edge is a test edge: source -dir-> target with an id.
type edge struct {
	id, source, target string
	dir                uint8
}

func build(t *testing.T, edges []edge) *adjacency {
	t.Helper()
	a := newAdjacency(len(edges))
	for _, e := range edges {
		if err := a.add(id(e.id), id(e.source), id(e.target), e.dir); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// render shows a radius as "name@depth" sorted by depth then name (the order the api answers).
func render(r Radius) string {
	parts := make([]string, len(r.IDs))
	for i := range r.IDs {
		parts[i] = fmt.Sprintf("%d %s", r.Depths[i], name(r.IDs[i]))
	}
	slices.Sort(parts)
	for i, p := range parts {
		d, n, _ := strings.Cut(p, " ")
		parts[i] = n + "@" + d
	}
	return strings.Join(parts, " ")
}

func TestWalk(t *testing.T) {
	t.Parallel()
	// host hosts lxc1 and lxc2 (reverse: the guests depend on the host); svc runs-on lxc1
	// (forward: svc depends on lxc1); route routes-to svc; svc also depends-on db, which runs
	// on lxc2, so svc is reachable from the host at depth 2 both ways; a depends-on cycle
	// a <-> b hangs off route.
	fleet := []edge{
		{"e1", "host", "lxc1", dirReverse},
		{"e2", "host", "lxc2", dirReverse},
		{"e3", "svc", "lxc1", dirForward},
		{"e4", "route", "svc", dirForward},
		{"e5", "svc", "db", dirForward},
		{"e6", "db", "lxc2", dirForward},
		{"e7", "a", "route", dirForward},
		{"e8", "a", "b", dirForward},
		{"e9", "b", "a", dirForward},
		{"e10", "host", "power", dirForward}, // the host depends on power, not the reverse
	}
	cases := []struct {
		name  string
		edges []edge
		root  string
		depth int
		want  string
	}{
		{"depth 1", fleet, "host", 1, "lxc1@1 lxc2@1"},
		{"depth 2: smallest depth wins", fleet, "host", 2, "lxc1@1 lxc2@1 db@2 svc@2"},
		{"depth 10 ends at the cycle", fleet, "host", 10, "lxc1@1 lxc2@1 db@2 svc@2 route@3 a@4 b@5"},
		{"everything above the power feed", fleet, "power", 10, "host@1 lxc1@2 lxc2@2 db@3 svc@3 route@4 a@5 b@6"},
		{"depth 0 is empty", fleet, "host", 0, ""},
		{"from inside a cycle, never the root", fleet, "b", 10, "a@1"},
		{"a leaf", fleet, "a", 10, "b@1"},
		{"unknown root", fleet, "nobody", 10, ""},
		{"dependency is not impact", fleet, "svc", 1, "route@1"},
		{"self loop", []edge{{"x", "n", "n", dirForward}}, "n", 3, ""},
		{"both directions", []edge{{"x", "p", "q", dirForward | dirReverse}}, "p", 1, "q@1"},
		{"both directions, other end", []edge{{"x", "p", "q", dirForward | dirReverse}}, "q", 1, "p@1"},
		{"two edges, one arc each", []edge{{"x", "s", "t", dirForward}, {"y", "s", "t", dirForward}}, "t", 2, "s@1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := build(t, c.edges)
			if got := render(a.walk(id(c.root), c.depth, &visits{})); got != c.want {
				t.Errorf("walk(%s, %d) = %q, want %q", c.root, c.depth, got, c.want)
			}
		})
	}
}

func TestAddRemove(t *testing.T) {
	t.Parallel()
	a := build(t, []edge{{"x", "s", "t", dirForward}, {"y", "s", "t", dirForward}, {"z", "h", "g", dirReverse}})
	if err := a.add(id("x"), id("s"), id("t"), dirForward); err == nil {
		t.Error("adding a current edge id again succeeded")
	}
	// Removing one of two parallel edges keeps the dependency.
	if err := a.remove(id("x")); err != nil {
		t.Fatal(err)
	}
	if got := render(a.walk(id("t"), 1, &visits{})); got != "s@1" {
		t.Errorf("after removing one of two edges: %q", got)
	}
	if err := a.remove(id("y")); err != nil {
		t.Fatal(err)
	}
	if got := render(a.walk(id("t"), 1, &visits{})); got != "" {
		t.Errorf("after removing both edges: %q", got)
	}
	if err := a.remove(id("y")); err == nil {
		t.Error("removing an edge twice succeeded")
	}
	if err := a.remove(id("z")); err != nil {
		t.Fatal(err)
	}
	if got := render(a.walk(id("h"), 1, &visits{})); got != "" {
		t.Errorf("after removing a reverse edge: %q", got)
	}
	if a.removed != 3 || len(a.edges) != 0 {
		t.Errorf("removed %d, edges %d; want 3 and 0", a.removed, len(a.edges))
	}
	// The ids were re-added after removal: a later edge with a known id is not a conflict.
	if err := a.add(id("x"), id("t"), id("s"), dirForward); err != nil {
		t.Fatal(err)
	}
	if got := render(a.walk(id("s"), 1, &visits{})); got != "t@1" {
		t.Errorf("after re-adding reversed: %q", got)
	}
}

// TestVisitsReuse: one visits buffer serves walks over growing graphs and survives its
// generation counter wrapping around.
func TestVisitsReuse(t *testing.T) {
	t.Parallel()
	v := &visits{}
	a := build(t, []edge{{"x", "s", "t", dirForward}})
	for i := range 3 {
		if got := render(a.walk(id("t"), 2, v)); got != "s@1" {
			t.Fatalf("walk %d: %q", i, got)
		}
	}
	// Grow past the buffer: the new nodes must start unvisited.
	for i := range 50 {
		if err := a.add(id(fmt.Sprint("e", i)), id(fmt.Sprint("n", i)), id("s"), dirForward); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.walk(id("t"), 2, v); len(got.IDs) != 51 {
		t.Fatalf("after growth: %d reached, want 51", len(got.IDs))
	}
	v.gen = ^uint32(0) // the next walk wraps
	if got := a.walk(id("t"), 2, v); len(got.IDs) != 51 || v.gen != 1 {
		t.Fatalf("after wrap: %d reached (gen %d), want 51 (gen 1)", len(got.IDs), v.gen)
	}
	if got := a.walk(id("t"), 2, v); len(got.IDs) != 51 {
		t.Fatalf("after wrap, again: %d reached, want 51", len(got.IDs))
	}
}
