package topology

import "fmt"

// UUID is an entity or relationship id in its 16-byte form: half the memory of the text form
// and encoded to Postgres as binary uuid.
type UUID = [16]byte

// Direction bits of an edge type: which way "depends on" runs along it.
const (
	// dirForward: the source depends on the target (a service runs-on its LXC).
	dirForward uint8 = 1 << iota
	// dirReverse: the target depends on the source (a host hosts its guests).
	dirReverse
)

// edgeRef is a current dependency edge as the adjacency holds it.
type edgeRef struct {
	source, target int32
	dir            uint8
}

// adjacency is the current dependency edges as arcs from an entity to the entities that
// depend on it directly. It is not safe for concurrent use; Index guards it.
type adjacency struct {
	// changes is topology_version.changes at the state this adjacency reflects; cursor is
	// the id of the newest outbox event it reflects.
	changes, cursor int64
	nodes           map[UUID]int32
	ids             []UUID
	// dependents[n] lists the nodes that depend directly on node n; an entity reached over
	// two edges appears twice (removing one edge leaves the other arc).
	dependents [][]int32
	edges      map[UUID]edgeRef
	// removed counts edges removed since the build: their nodes stay allocated, so the
	// index rebuilds once removals outgrow the live edges (memory stays bounded).
	removed int
}

func newAdjacency(edgeHint int) *adjacency {
	return &adjacency{
		nodes:      make(map[UUID]int32, edgeHint/2),
		ids:        make([]UUID, 0, edgeHint/2),
		dependents: make([][]int32, 0, edgeHint/2),
		edges:      make(map[UUID]edgeRef, edgeHint),
	}
}

func (a *adjacency) node(id UUID) int32 {
	if n, ok := a.nodes[id]; ok {
		return n
	}
	n := int32(len(a.ids))
	a.nodes[id] = n
	a.ids = append(a.ids, id)
	a.dependents = append(a.dependents, nil)
	return n
}

// add records the current edge id source -> target whose type has direction bits dir. An
// edge id already present means the adjacency and the database disagree.
func (a *adjacency) add(id, source, target UUID, dir uint8) error {
	if _, ok := a.edges[id]; ok {
		return fmt.Errorf("edge %x is already current", id)
	}
	s, t := a.node(source), a.node(target)
	if dir&dirForward != 0 {
		a.dependents[t] = append(a.dependents[t], s)
	}
	if dir&dirReverse != 0 {
		a.dependents[s] = append(a.dependents[s], t)
	}
	a.edges[id] = edgeRef{source: s, target: t, dir: dir}
	return nil
}

// remove forgets the edge id. An unknown id means the adjacency and the database disagree.
func (a *adjacency) remove(id UUID) error {
	e, ok := a.edges[id]
	if !ok {
		return fmt.Errorf("edge %x is not current", id)
	}
	if e.dir&dirForward != 0 {
		if !dropOne(&a.dependents[e.target], e.source) {
			return fmt.Errorf("edge %x: arc missing", id)
		}
	}
	if e.dir&dirReverse != 0 {
		if !dropOne(&a.dependents[e.source], e.target) {
			return fmt.Errorf("edge %x: arc missing", id)
		}
	}
	delete(a.edges, id)
	a.removed++
	return nil
}

// dropOne removes one occurrence of v from *s (order does not matter).
func dropOne(s *[]int32, v int32) bool {
	for i, x := range *s {
		if x == v {
			last := len(*s) - 1
			(*s)[i] = (*s)[last]
			*s = (*s)[:last]
			return true
		}
	}
	return false
}

// Radius is the result of a walk: IDs[i] depends, transitively, on the root and is first
// reached after Depths[i] hops. It is in walk order; callers sort. Changes is the
// topology_version.changes the walked adjacency reflected.
type Radius struct {
	IDs     []UUID
	Depths  []int32
	Changes int64
}

// visits marks the nodes a walk has reached: stamp[n] == gen. Reusing one (from a pool)
// costs no clearing between walks, unlike a map or a fresh slice per walk.
type visits struct {
	stamp []uint32
	gen   uint32
}

// reset prepares v for a walk over n nodes.
func (v *visits) reset(n int) {
	if len(v.stamp) < n {
		v.stamp, v.gen = make([]uint32, n+n/4), 0
	}
	v.gen++
	if v.gen == 0 { // wrapped: old stamps could collide
		clear(v.stamp)
		v.gen = 1
	}
}

// walk is a breadth-first walk from root along dependents, at most maxDepth hops: each
// entity is reported once, at its smallest depth, and never the root itself (a cycle back
// to the root ends there).
func (a *adjacency) walk(root UUID, maxDepth int, v *visits) Radius {
	r := Radius{Changes: a.changes}
	start, ok := a.nodes[root]
	if !ok || maxDepth < 1 {
		return r
	}
	v.reset(len(a.ids))
	v.stamp[start] = v.gen
	frontier := []int32{start}
	var next []int32
	for depth := int32(1); int(depth) <= maxDepth && len(frontier) > 0; depth++ {
		next = next[:0]
		for _, n := range frontier {
			for _, m := range a.dependents[n] {
				if v.stamp[m] == v.gen {
					continue
				}
				v.stamp[m] = v.gen
				next = append(next, m)
				r.IDs = append(r.IDs, a.ids[m])
				r.Depths = append(r.Depths, depth)
			}
		}
		frontier, next = next, frontier
	}
	return r
}
