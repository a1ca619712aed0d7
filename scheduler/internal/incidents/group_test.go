package incidents

import (
	"fmt"
	"strings"
	"testing"
)

// build makes a graph from "slug=health[flags]" nodes (flags: ! failing past the
// threshold, m in maintenance, s settling: just became unknown) and "a>b" edges (a depends
// on b).
func build(nodes []string, edges ...string) *graph {
	g := newGraph()
	for _, spec := range nodes {
		var slug, health string
		var flags string
		for i := len(spec) - 1; i >= 0; i-- {
			if spec[i] == '=' {
				slug, health = spec[:i], spec[i+1:]
				break
			}
		}
		for len(health) > 0 && strings.ContainsRune("!ms", rune(health[len(health)-1])) {
			flags += health[len(health)-1:]
			health = health[:len(health)-1]
		}
		n := &node{id: slug, slug: slug, health: health, state: "active", problem: health != "up"}
		for _, f := range flags {
			switch f {
			case '!':
				n.failing = true
			case 'm':
				n.state = "maintenance"
			case 's':
				n.settling = true
			}
		}
		g.nodes[slug] = n
	}
	for _, e := range edges {
		for i := 0; i < len(e); i++ {
			if e[i] == '>' {
				g.depend(e[:i], e[i+1:])
			}
		}
	}
	return g
}

func TestRoots(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		edges []string
		roots string
		of    string // affected of the first root
	}{
		{"host down: guests unknown, a route down behind a service",
			[]string{"host=down!", "lxc=unknown", "svc=unknown", "route=down!", "other=down!"},
			[]string{"lxc>host", "svc>lxc", "route>svc"}, "[host other]", "[lxc route svc]"},
		{"a failure behind a healthy entity is no cause",
			[]string{"db=down!", "api=up", "web=down!"}, []string{"api>db", "web>api"}, "[db web]", "[]"},
		{"a host below its threshold holds back what fails behind it",
			[]string{"host=down", "lxc=down!"}, []string{"lxc>host"}, "[]", ""},
		{"an upstream that just became unknown holds back what fails behind it",
			[]string{"host=unknowns", "lxc=unknowns", "route=down!"}, []string{"lxc>host", "route>lxc"}, "[]", ""},
		{"an upstream unknown for long is no cause: the failure behind it is a root",
			[]string{"lxc=unknown", "svc=down!"}, []string{"svc>lxc"}, "[svc]", "[]"},
		{"an unknown alone opens nothing", []string{"lxc=unknown", "svc=unknown"}, []string{"svc>lxc"}, "[]", ""},
		{"a cycle of failures is one root, its first slug",
			[]string{"b=down!", "a=down!", "c=down!"}, []string{"a>b", "b>a", "c>a"}, "[a]", "[b c]"},
		{"two upstream causes: the entity is affected by both",
			[]string{"h1=down!", "h2=down!", "svc=down!"}, []string{"svc>h1", "svc>h2"}, "[h1 h2]", "[svc]"},
		{"maintenance still explains what is behind it",
			[]string{"host=downm!", "lxc=unknown", "route=down!"}, []string{"lxc>host", "route>lxc"}, "[host]", "[lxc route]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(tc.nodes, tc.edges...)
			roots := g.roots()
			if fmt.Sprint(roots) != tc.roots {
				t.Fatalf("roots %v, want %s", roots, tc.roots)
			}
			if len(roots) > 0 {
				aff := g.affected(roots[0])
				if aff == nil {
					aff = []string{}
				}
				if fmt.Sprint(aff) != tc.of {
					t.Errorf("affected by %s: %v, want %s", roots[0], aff, tc.of)
				}
			}
		})
	}
}

func TestParseByKind(t *testing.T) {
	got, err := ParseByKind("http=3, backup-freshness=1/2")
	if err != nil || got["http"] != (Pair{Failure: 3}) || got["backup-freshness"] != (Pair{Failure: 1, Success: 2}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"http", "=2", "http=0", "http=x", "http=2/0"} {
		if _, err := ParseByKind(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	th := Thresholds{ByKind: got}.withDefaults()
	if th.failure(entityThresholds{}, "tcp") != DefaultFailure || th.failure(entityThresholds{}, "http") != 3 ||
		th.failure(entityThresholds{failure: 5}, "http") != 5 || th.success(entityThresholds{}, "backup-freshness") != 2 {
		t.Error("thresholds do not resolve entity > kind > default")
	}
}

// One root fails among 2,000 problem entities (a 20 × 100 fleet's Proxmox host with its
// hundred guests, their services and routes, the rest unknown): the grouping of one
// evaluation.
func BenchmarkGroupHostDown(b *testing.B) {
	g := newGraph()
	add := func(id, health string, failing bool) {
		g.nodes[id] = &node{id: id, slug: id, health: health, problem: health != "up", failing: failing, state: "active"}
	}
	add("host", "down", true)
	for i := range 100 {
		lxc, svc, route := fmt.Sprintf("lxc%03d", i), fmt.Sprintf("svc%03d", i), fmt.Sprintf("route%03d", i)
		add(lxc, "unknown", false)
		add(svc, "unknown", false)
		add(route, "down", true)
		g.depend(lxc, "host")
		g.depend(svc, lxc)
		g.depend(route, svc)
	}
	for i := range 1700 {
		add(fmt.Sprintf("other%04d", i), "up", false)
	}
	b.ResetTimer()
	for b.Loop() {
		roots := g.roots()
		if len(roots) != 1 || len(g.affected(roots[0])) != 300 {
			b.Fatal(roots)
		}
	}
}
