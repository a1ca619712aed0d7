package httpapi_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// smallFleet builds: proxmox-host:atlas hosts lxc:web and vm:db; service:app runs-on lxc:web;
// service:app depends-on database:pg; database:pg runs-on vm:db; ingress-route:app routes-to
// service:app; a document about lxc:web. A depends-on cycle between two services checks that
// the walk ends.
func smallFleet(e *env) {
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	e.create("lxc", "web", map[string]any{"vmid": 101, "host": "atlas"})
	e.create("vm", "db", map[string]any{"vmid": 200, "host": "atlas"})
	e.create("service", "app", map[string]any{"port": 8080})
	e.create("database", "pg", map[string]any{"engine": "postgres"})
	e.create("ingress-route", "app.lab.example", map[string]any{"public_host": "app.lab.example"})
	e.create("service", "loop-a", nil)
	e.create("service", "loop-b", nil)
	e.link("hosts", "proxmox-host:atlas", "lxc:web")
	e.link("hosts", "proxmox-host:atlas", "vm:db")
	e.link("runs-on", "service:app", "lxc:web")
	e.link("depends-on", "service:app", "database:pg")
	e.link("runs-on", "database:pg", "vm:db")
	e.link("routes-to", "ingress-route:app.lab.example", "service:app")
	e.link("depends-on", "service:loop-a", "service:loop-b")
	e.link("depends-on", "service:loop-b", "service:loop-a")
	e.link("depends-on", "service:loop-a", "ingress-route:app.lab.example")
}

type affectedJSON struct {
	Slug  string `json:"slug"`
	Depth int    `json:"depth"`
}

func TestBlastRadius(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	smallFleet(e)
	radius := func(ref string, depth string) string {
		t.Helper()
		var out struct {
			Root  entityJSON     `json:"root"`
			Items []affectedJSON `json:"items"`
		}
		path := "/api/v1/entities/" + ref + "/blast-radius"
		if depth != "" {
			path += "?depth=" + depth
		}
		e.readonly.do("GET", path, nil).expect(t, http.StatusOK).json(t, &out)
		var parts []string
		for _, x := range out.Items {
			parts = append(parts, x.Slug+"@"+string(rune('0'+x.Depth)))
		}
		return strings.Join(parts, " ")
	}
	cases := []struct{ ref, depth, want string }{
		{"proxmox-host:atlas", "1", "lxc:web@1 vm:db@1"},
		{"proxmox-host:atlas", "2", "lxc:web@1 vm:db@1 database:pg@2 service:app@2"},
		{"proxmox-host:atlas", "3", "lxc:web@1 vm:db@1 database:pg@2 service:app@2 ingress-route:app.lab.example@3"},
		// service:app is reached at depth 2 via lxc:web and at 3 via the database: the fewest hops win.
		{"proxmox-host:atlas", "6", "lxc:web@1 vm:db@1 database:pg@2 service:app@2 ingress-route:app.lab.example@3 service:loop-a@4 service:loop-b@5"},
		{"database:pg", "", "service:app@1 ingress-route:app.lab.example@2 service:loop-a@3"},
		{"service:loop-b", "10", "service:loop-a@1"},
		{"ingress-route:app.lab.example", "", "service:loop-a@1 service:loop-b@2"},
	}
	for _, c := range cases {
		if got := radius(c.ref, c.depth); got != c.want {
			t.Errorf("%s depth %s:\n got  %s\n want %s", c.ref, c.depth, got, c.want)
		}
	}
	// lxc:web's id is now remembered: the requests below take the one-round-trip path, which
	// must still see every change committed since.
	if got, want := radius("lxc:web", ""), "service:app@1 ingress-route:app.lab.example@2 service:loop-a@3"; got != want {
		t.Errorf("lxc:web: got %q, want %q", got, want)
	}
	e.create("service", "extra", nil)
	e.link("runs-on", "service:extra", "lxc:web")
	if got, want := radius("proxmox-host:atlas", "2"), "lxc:web@1 vm:db@1 database:pg@2 service:app@2 service:extra@2"; got != want {
		t.Errorf("after a new runs-on edge: got %q, want %q", got, want)
	}
	var atlas struct {
		ID string `json:"id"`
	}
	e.readonly.do("GET", "/api/v1/entities/proxmox-host:atlas", nil).expect(t, http.StatusOK).json(t, &atlas)
	if got, want := radius(atlas.ID, "1"), "lxc:web@1 vm:db@1"; got != want {
		t.Errorf("by id: got %q, want %q", got, want)
	}
	var byID struct {
		Root entityJSON `json:"root"`
	}
	e.setHealth("proxmox-host:atlas", "down", time.Minute)
	e.readonly.do("GET", "/api/v1/entities/"+atlas.ID+"/blast-radius", nil).expect(t, http.StatusOK).json(t, &byID)
	if byID.Root.Slug != "proxmox-host:atlas" || byID.Root.Health != "down" {
		t.Errorf("root read with the radius: %+v, want proxmox-host:atlas, down", byID.Root)
	}
	// An ended edge no longer carries impact.
	var rels struct {
		Items []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"items"`
	}
	e.readonly.do("GET", "/api/v1/entities/service:app/relations?types=runs-on&direction=out", nil).expect(t, http.StatusOK).json(t, &rels)
	if len(rels.Items) != 1 {
		t.Fatalf("relations: %+v", rels)
	}
	e.operator.do("POST", "/api/v1/relationships/"+rels.Items[0].ID+"/end", nil).expect(t, http.StatusOK)
	if got := radius("lxc:web", ""); got != "service:extra@1" {
		t.Errorf("after ending runs-on, lxc:web still affects %q", got)
	}
	e.readonly.do("GET", "/api/v1/entities/lxc:ghost/blast-radius", nil).expect(t, http.StatusNotFound)
	e.readonly.do("GET", "/api/v1/entities/lxc:web/blast-radius?depth=11", nil).expect(t, http.StatusBadRequest)
}

func TestRelationsAndGraph(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	smallFleet(e)
	type relJSON struct {
		ID     string  `json:"id"`
		Type   string  `json:"type"`
		Source string  `json:"source_slug"`
		Target string  `json:"target_slug"`
		To     *string `json:"valid_to"`
	}
	rels := func(q string) string {
		t.Helper()
		var l listJSON[relJSON]
		e.readonly.do("GET", "/api/v1/entities/service:app/relations"+q, nil).expect(t, http.StatusOK).json(t, &l)
		var out []string
		for _, r := range l.Items {
			out = append(out, r.Source+" "+r.Type+" "+r.Target)
		}
		sort.Strings(out)
		return strings.Join(out, "; ")
	}
	all := "ingress-route:app.lab.example routes-to service:app; service:app depends-on database:pg; service:app runs-on lxc:web"
	if got := rels(""); got != all {
		t.Errorf("all relations: %s", got)
	}
	if got := rels("?types=runs-on,depends-on"); got != "service:app depends-on database:pg; service:app runs-on lxc:web" {
		t.Errorf("types filter: %s", got)
	}
	if got := rels("?direction=in"); got != "ingress-route:app.lab.example routes-to service:app" {
		t.Errorf("direction in: %s", got)
	}
	if got := rels("?types=hosts"); got != "" {
		t.Errorf("no hosts edges expected: %s", got)
	}
	e.readonly.do("GET", "/api/v1/entities/service:app/relations?types=nonsense", nil).expect(t, http.StatusUnprocessableEntity)
	e.readonly.do("GET", "/api/v1/entities/service:app/relations?direction=sideways", nil).expect(t, http.StatusUnprocessableEntity)

	// Creating an existing edge is idempotent (200, same id); ending it keeps it with valid_to.
	r1 := e.operator.do("POST", "/api/v1/relationships", map[string]any{"type": "depends-on", "source": "service:app", "target": "database:pg"}).
		expect(t, http.StatusOK)
	var rel relJSON
	r1.json(t, &rel)
	var ended relJSON
	e.operator.do("POST", "/api/v1/relationships/"+rel.ID+"/end", nil).expect(t, http.StatusOK).json(t, &ended)
	if ended.To == nil {
		t.Errorf("ended edge has no valid_to")
	}
	if got := rels("?types=depends-on"); got != "" {
		t.Errorf("ended edge still current: %s", got)
	}
	if got := rels("?types=depends-on&include_ended=true"); got != "service:app depends-on database:pg" {
		t.Errorf("include_ended: %s", got)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'relationship.end'`); n != 1 {
		t.Errorf("relationship.end audit rows: %d", n)
	}

	// The graph view: nodes of the asked types (subtypes included) and edges between them.
	var g struct {
		Nodes []struct {
			Slug string `json:"slug"`
		} `json:"nodes"`
		Edges []struct {
			Type   string `json:"type"`
			Source string `json:"source"`
			Target string `json:"target"`
		} `json:"edges"`
		Truncated bool `json:"truncated"`
	}
	e.readonly.do("GET", "/api/v1/graph?types=machine,guest", nil).expect(t, http.StatusOK).json(t, &g)
	var nodes []string
	for _, n := range g.Nodes {
		nodes = append(nodes, n.Slug)
	}
	if strings.Join(nodes, ",") != "lxc:web,proxmox-host:atlas,vm:db" || len(g.Edges) != 2 || g.Truncated {
		t.Errorf("graph of machines and guests: %v %+v", nodes, g.Edges)
	}
	for _, ed := range g.Edges {
		if ed.Type != "hosts" || ed.Source != "proxmox-host:atlas" {
			t.Errorf("unexpected edge %+v", ed)
		}
	}
	e.readonly.do("GET", "/api/v1/graph?types=service&rel_types=runs-on&limit=2", nil).expect(t, http.StatusOK).json(t, &g)
	if len(g.Nodes) != 2 || !g.Truncated {
		t.Errorf("limited graph: %+v", g)
	}
	e.readonly.do("GET", "/api/v1/graph?types=spaceship", nil).expect(t, http.StatusUnprocessableEntity)
}

func TestGraphAudit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	e.create("lxc", "old", map[string]any{"vmid": 150, "host": "atlas"})
	e.create("lxc", "gone", map[string]any{"vmid": 151, "host": "atlas"})
	e.create("service", "web", map[string]any{"url": "http://127.0.0.1:1/"})
	e.create("service", "watcher", nil)
	e.create("site", "home", nil)
	e.link("hosts", "proxmox-host:atlas", "lxc:gone")
	// Deprecated target with enabled checks; destroyed target (planned → destroyed has no
	// precondition, so go through the lifecycle the api allows).
	e.operator.do("POST", "/api/v1/entities/lxc:old/state", map[string]any{"state": "deprecated"}).expect(t, http.StatusOK)
	e.create("lxc", "ghost", map[string]any{"vmid": 152, "host": "atlas"}, "planned")
	e.operator.do("POST", "/api/v1/entities/lxc:ghost/state", map[string]any{"state": "destroyed"}).expect(t, http.StatusOK)
	e.link("depends-on", "service:watcher", "lxc:ghost")
	// An orphan check entity: check bookkeeping whose definition is gone. The api refuses to
	// create check entities (they are derived), so the leftover of an old bug is inserted.
	if _, err := e.pool.Exec(ctx, `INSERT INTO entities (id, slug, type, name, state, attributes)
		VALUES (gen_random_uuid(), 'check:leftover.probe', 'check', 'leftover.probe', 'enabled', '{"target": "lxc:vanished"}')`); err != nil {
		t.Fatal(err)
	}
	// service:web is stuck down for two days; its checks are then all disabled, so it is also
	// unmonitored although its type (and its url) warrant an http check.
	e.setHealth("service:web", "down", 48*time.Hour)
	e.setHealth("proxmox-host:atlas", "down", 30*time.Minute) // not stuck by the 24 h default
	if _, err := e.pool.Exec(ctx, `UPDATE check_defs SET enabled = false WHERE target_id = (SELECT id FROM entities WHERE slug = 'service:web')`); err != nil {
		t.Fatal(err)
	}
	// The api retires a deprecated entity's checks; someone re-enabled one by hand.
	tag, err := e.pool.Exec(ctx, `UPDATE check_defs SET enabled = true WHERE target_id = (SELECT id FROM entities WHERE slug = 'lxc:old')`)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("re-enable a check of lxc:old: %v (%d rows)", err, tag.RowsAffected())
	}
	before := e.snapshot()
	var rep struct {
		Counts   map[string]int `json:"counts"`
		Findings []struct {
			Kind    string `json:"kind"`
			Entity  string `json:"entity"`
			Related string `json:"related"`
			Runbook string `json:"runbook"`
		} `json:"findings"`
		StuckAfterSeconds int64 `json:"stuck_after_seconds"`
	}
	e.readonly.do("GET", "/api/v1/audit/graph", nil).expect(t, http.StatusOK).json(t, &rep)
	got := map[string]bool{}
	for _, f := range rep.Findings {
		got[f.Kind+" "+f.Entity+" "+f.Related+" "+f.Runbook] = true
	}
	want := []string{
		"orphan_check check:leftover.probe lxc:vanished runbook:orphan-check",
		"stuck_probe service:web  runbook:stuck-probe",
		"unmonitored service:web  runbook:unmonitored-type",
		"edge_to_destroyed service:watcher lxc:ghost runbook:edge-to-destroyed",
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("missing finding %q", w)
		}
	}
	retired := 0
	for _, f := range rep.Findings {
		if f.Kind == "check_on_retired_target" {
			retired++
			if f.Related != "lxc:old" || f.Runbook != "runbook:check-on-destroyed-entity" {
				t.Errorf("check_on_retired_target %+v", f)
			}
		}
		if f.Entity == "site:home" || f.Entity == "proxmox-host:atlas" && f.Kind == "stuck_probe" {
			t.Errorf("false positive %+v", f)
		}
	}
	if retired == 0 || rep.Counts["check_on_retired_target"] != retired {
		t.Errorf("checks on deprecated/destroyed targets: %d (counts %v)", retired, rep.Counts)
	}
	if e.snapshot() != before {
		t.Errorf("the audit wrote something")
	}
	e.readonly.do("GET", "/api/v1/audit/graph?stuck_after=10m", nil).expect(t, http.StatusOK).json(t, &rep)
	var stuck []string
	for _, f := range rep.Findings {
		if f.Kind == "stuck_probe" {
			stuck = append(stuck, f.Entity)
		}
	}
	if strings.Join(stuck, ",") != "proxmox-host:atlas,service:web" {
		t.Errorf("stuck probes with stuck_after=10m: %v", stuck)
	}
	// Durations are read as everywhere else: whole days too, never negative.
	e.readonly.do("GET", "/api/v1/audit/graph?stuck_after=7d", nil).expect(t, http.StatusOK).json(t, &rep)
	if rep.StuckAfterSeconds != 7*24*3600 {
		t.Errorf("stuck_after=7d: %d s", rep.StuckAfterSeconds)
	}
	for _, bad := range []string{"soon", "-1h", "0d"} {
		if p := e.readonly.do("GET", "/api/v1/audit/graph?stuck_after="+bad, nil).expect(t, http.StatusBadRequest).problem(t); p.Field != "stuck_after" {
			t.Errorf("stuck_after=%s: %+v", bad, p)
		}
	}
}
