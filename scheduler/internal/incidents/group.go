package incidents

import (
	"slices"
	"sort"
)

// node is an entity as the grouping sees it.
type node struct {
	id, slug, typ, state string
	tags                 []string
	health, reason       string
	// problem: anything but up. failing: down or degraded past the failure threshold.
	// recovered: up past the success threshold (only asked of incident roots).
	problem, failing, recovered bool
	// unmonitored: no enabled check observes it.
	unmonitored bool
	// settling: unknown or stale for less time than its checks need to find a failure
	// past the threshold (failure threshold + 1 runs of its fastest check) — a host whose
	// connection just dropped is unknown for a run before it is found unreachable.
	settling bool
}

func (n *node) maintenance() bool { return n.state == "maintenance" }

// observedFailure: the entity is down or degraded, past its failure threshold or not yet.
func (n *node) observedFailure() bool {
	return n.problem && (n.health == "down" || n.health == "degraded")
}

// mayExplain: the entity's state may be the cause of what fails behind it — it fails, or
// it just stopped answering and has not settled yet.
func (n *node) mayExplain() bool { return n.observedFailure() || (n.problem && n.settling) }

// graph is the problem entities (and the roots of open incidents) with the dependency
// edges between them: up[a] lists what a depends on, down[a] what depends on a.
type graph struct {
	nodes    map[string]*node
	up, down map[string][]string
}

func newGraph() *graph {
	return &graph{nodes: map[string]*node{}, up: map[string][]string{}, down: map[string][]string{}}
}

// depend records that a depends on b.
func (g *graph) depend(a, b string) {
	if a == b || g.nodes[a] == nil || g.nodes[b] == nil || slices.Contains(g.up[a], b) {
		return
	}
	g.up[a] = append(g.up[a], b)
	g.down[b] = append(g.down[b], a)
}

// roots returns the failing entities whose failure nothing upstream explains, sorted by
// slug. The walk follows "depends on" edges through problem entities only: a failing
// database behind a healthy service does not explain that service's failure. What blocks a
// root is any entity upstream that is itself down or degraded, past its threshold or not
// yet, or that has just become unknown (settling): a host that has failed one run is about
// to be the root of its guests' failures, and the route that failed twice behind it must
// not open an incident of its own first (an incident, once open, stays until its own root
// recovers). An upstream that has been unknown for long explains nothing: the failure
// behind it is a root. Strongly connected components
// (Tarjan) make it linear and settle cycles: a component is a root component when it holds
// a failing entity and nothing it reaches is down or degraded; its root is its failing
// entity with the smallest slug.
func (g *graph) roots() []string {
	ids := make([]string, 0, len(g.nodes))
	for id, n := range g.nodes {
		if n.problem {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids) // deterministic components
	var (
		index   = map[string]int{}
		low     = map[string]int{}
		onStack = map[string]bool{}
		stack   []string
		comp    = map[string]int{}
		comps   [][]string
		next    int
	)
	var connect func(v string)
	connect = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.up[v] {
			if !g.nodes[w].problem {
				continue
			}
			if _, seen := index[w]; !seen {
				connect(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = len(comps)
				c = append(c, w)
				if w == v {
					break
				}
			}
			comps = append(comps, c)
		}
	}
	for _, v := range ids {
		if _, seen := index[v]; !seen {
			connect(v)
		}
	}
	// Tarjan emits a component after every component it reaches, so one pass in emission
	// order knows, for each component, whether anything upstream of it is down or degraded.
	blocked := make([]bool, len(comps)) // a down or degraded entity in a component it reaches
	holds := make([]bool, len(comps))   // a down or degraded entity in the component
	var out []string
	for ci, c := range comps {
		var first *node
		for _, v := range c {
			n := g.nodes[v]
			holds[ci] = holds[ci] || n.mayExplain()
			if n.failing && (first == nil || n.slug < first.slug) {
				first = n
			}
			for _, w := range g.up[v] {
				if cw, ok := comp[w]; ok && cw != ci && (holds[cw] || blocked[cw]) {
					blocked[ci] = true
				}
			}
		}
		if first != nil && !blocked[ci] {
			out = append(out, first.id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return g.nodes[out[i]].slug < g.nodes[out[j]].slug })
	return out
}

// affected returns the problem entities that depend on root through problem entities only,
// root excluded, sorted by slug: the members of root's incident.
func (g *graph) affected(root string) []string {
	seen := map[string]bool{root: true}
	queue := []string{root}
	var out []string
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range g.down[v] {
			if seen[w] || !g.nodes[w].problem {
				continue
			}
			seen[w] = true
			out = append(out, w)
			queue = append(queue, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return g.nodes[out[i]].slug < g.nodes[out[j]].slug })
	return out
}
