package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/auth"
	apirequest "github.com/oikos-hq/oikos/api/internal/request"
)

func TestKnowledge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("lxc", "nfs-export", map[string]any{"vmid": 120, "host": "atlas"})
	docs := []struct{ slug, title, body string }{
		{"runbook:zfs-scrub", "ZFS scrub procedure", "Start a scrub with zpool scrub tank and watch zpool status."},
		{"document:storage-layout", "Storage layout", "The pools are mirrored. A monthly ZFS scrub runs from a timer; see the zfs runbook."},
		{"investigation:jellyfin-buffering", "Jellyfin buffering", "Transcoding was CPU bound; nothing to do with storage."},
	}
	for _, d := range docs {
		body := map[string]any{"title": d.title, "body": d.body, "tags": []string{"storage"}}
		if d.slug == "runbook:zfs-scrub" {
			body["about"] = "lxc:nfs-export"
		}
		e.agent.do("PUT", "/api/v1/knowledge/"+d.slug, body).expect(t, http.StatusCreated)
	}
	type hit struct {
		Slug    string  `json:"slug"`
		Kind    string  `json:"kind"`
		Rank    float64 `json:"rank"`
		Snippet string  `json:"snippet"`
	}
	search := func(q string) listJSON[hit] {
		t.Helper()
		var l listJSON[hit]
		e.readonly.do("GET", "/api/v1/knowledge/search?q="+url.QueryEscape(q), nil).expect(t, http.StatusOK).json(t, &l)
		return l
	}
	l := search("zfs scrub")
	if len(l.Items) != 2 || l.Items[0].Slug != "runbook:zfs-scrub" || l.Items[1].Slug != "document:storage-layout" {
		t.Fatalf("ranking: %+v", l.Items)
	}
	if l.Items[0].Rank <= l.Items[1].Rank {
		t.Errorf("a title match must outrank a body match: %+v", l.Items)
	}
	if !strings.Contains(strings.ToLower(l.Items[1].Snippet), "**zfs**") || len(l.Items[1].Snippet) > 400 {
		t.Errorf("snippet %q", l.Items[1].Snippet)
	}
	if l := search("storage -zfs"); len(l.Items) != 1 || l.Items[0].Slug != "investigation:jellyfin-buffering" {
		t.Errorf("exclusion: %+v", l.Items)
	}
	var kl listJSON[hit]
	e.readonly.do("GET", "/api/v1/knowledge/search?q=zfs&kind=document", nil).expect(t, http.StatusOK).json(t, &kl)
	if len(kl.Items) != 1 || kl.Items[0].Kind != "document" {
		t.Errorf("kind filter: %+v", kl.Items)
	}
	if l := search("the"); len(l.Items) != 0 {
		t.Errorf("stop words only: %+v", l.Items)
	}
	e.readonly.do("GET", "/api/v1/knowledge/search", nil).expect(t, http.StatusBadRequest)
	// Search pages on (rank, slug) without losing or repeating a hit.
	var p1, p2 listJSON[hit]
	e.readonly.do("GET", "/api/v1/knowledge/search?q=storage&limit=2", nil).expect(t, http.StatusOK).json(t, &p1)
	if p1.NextCursor == nil || len(p1.Items) != 2 {
		t.Fatalf("page 1: %+v", p1)
	}
	e.readonly.do("GET", "/api/v1/knowledge/search?q=storage&limit=2&cursor="+url.QueryEscape(*p1.NextCursor), nil).
		expect(t, http.StatusOK).json(t, &p2)
	if len(p2.Items) != 1 || p2.NextCursor != nil || p2.Items[0].Slug == p1.Items[0].Slug || p2.Items[0].Slug == p1.Items[1].Slug {
		t.Errorf("page 2: %+v after %+v", p2.Items, p1.Items)
	}

	// Full content, and knowledge about an entity.
	var k struct {
		Slug  string   `json:"slug"`
		Title string   `json:"title"`
		Body  string   `json:"body"`
		About []string `json:"about"`
	}
	e.readonly.do("GET", "/api/v1/knowledge/runbook:zfs-scrub", nil).expect(t, http.StatusOK).json(t, &k)
	if k.Body != docs[0].body || len(k.About) != 1 || k.About[0] != "lxc:nfs-export" {
		t.Errorf("content %+v", k)
	}
	var about listJSON[struct {
		Slug string `json:"slug"`
	}]
	e.readonly.do("GET", "/api/v1/entities/lxc:nfs-export/knowledge", nil).expect(t, http.StatusOK).json(t, &about)
	if len(about.Items) != 1 || about.Items[0].Slug != "runbook:zfs-scrub" {
		t.Errorf("knowledge about lxc:nfs-export: %+v", about.Items)
	}
	// Upsert by slug: a new title updates in place (200), and search sees it.
	r := e.agent.do("PUT", "/api/v1/knowledge/runbook:zfs-scrub", map[string]any{"title": "Scrubbing ZFS pools", "body": docs[0].body,
		"tags": []string{"storage"}}).expect(t, http.StatusOK)
	var upd struct {
		Version int64  `json:"version"`
		Title   string `json:"title"`
	}
	r.json(t, &upd)
	if upd.Version != 2 || upd.Title != "Scrubbing ZFS pools" {
		t.Errorf("upsert: %+v", upd)
	}
	if n := e.count(`SELECT count(*) FROM entities WHERE type = 'runbook'`); n != 1 {
		t.Errorf("%d runbooks after an update", n)
	}
	if l := search("scrubbing pools"); len(l.Items) == 0 || l.Items[0].Slug != "runbook:zfs-scrub" {
		t.Errorf("search after update: %+v", l.Items)
	}
	e.readonly.do("GET", "/api/v1/knowledge/runbook:nothing", nil).expect(t, http.StatusNotFound)
}

func TestHealthSummary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	e.create("lxc", "up1", map[string]any{"vmid": 101, "host": "atlas"})
	e.create("lxc", "down1", map[string]any{"vmid": 102, "host": "atlas"})
	e.create("lxc", "stale1", map[string]any{"vmid": 103, "host": "atlas"})
	e.create("vm", "degraded1", map[string]any{"vmid": 200, "host": "atlas"})
	e.create("lxc", "dead", map[string]any{"vmid": 104, "host": "atlas"}, "planned")
	e.operator.do("POST", "/api/v1/entities/lxc:dead/state", map[string]any{"state": "destroyed"}).expect(t, http.StatusOK)
	e.create("lxc", "builder", map[string]any{"vmid": 105, "host": "atlas"}, "maintenance")
	e.create("site", "home", nil) // never monitored: not counted
	// Start from a clean status table, then write what the scheduler would.
	if _, err := e.pool.Exec(ctx, `DELETE FROM entity_status`); err != nil {
		t.Fatal(err)
	}
	e.setHealth("proxmox-host:atlas", "up", time.Minute)
	e.setHealth("lxc:up1", "up", time.Minute)
	e.setHealth("lxc:down1", "down", time.Minute)
	e.setHealth("lxc:stale1", "stale", time.Minute)
	e.setHealth("vm:degraded1", "degraded", time.Minute)
	e.setHealth("lxc:dead", "down", time.Minute)    // destroyed: excluded
	e.setHealth("lxc:builder", "down", time.Minute) // maintenance: counted apart, listed with its health
	var checkSlug string
	if err := e.pool.QueryRow(ctx, `SELECT slug FROM entities WHERE type = 'check' ORDER BY slug LIMIT 1`).Scan(&checkSlug); err != nil {
		t.Fatalf("no check entity was derived: %v", err)
	}
	e.setHealth(checkSlug, "down", time.Minute) // a check's own bookkeeping: excluded

	type summary struct {
		Counts   map[string]int `json:"counts"`
		Entities []struct {
			Slug   string `json:"slug"`
			Health string `json:"health"`
		} `json:"entities"`
	}
	var s summary
	e.readonly.do("GET", "/api/v1/health/summary", nil).expect(t, http.StatusOK).json(t, &s)
	wantCounts := map[string]int{"up": 2, "degraded": 1, "down": 1, "unknown": 0, "stale": 1, "maintenance": 1}
	if len(s.Counts) != 6 {
		t.Errorf("counts must have exactly the five states and maintenance: %v", s.Counts)
	}
	for k, v := range wantCounts {
		if s.Counts[k] != v {
			t.Errorf("count %s = %d, want %d (%v)", k, s.Counts[k], v, s.Counts)
		}
	}
	var order []string
	for _, x := range s.Entities {
		order = append(order, x.Slug)
	}
	if strings.Join(order, ",") != "lxc:builder,lxc:down1,vm:degraded1,lxc:stale1,lxc:up1,proxmox-host:atlas" {
		t.Errorf("entities worst first: %v", order)
	}
	e.readonly.do("GET", "/api/v1/health/summary?health=down,stale", nil).expect(t, http.StatusOK).json(t, &s)
	order = nil
	for _, x := range s.Entities {
		order = append(order, x.Slug+"="+x.Health)
	}
	if strings.Join(order, ",") != "lxc:builder=down,lxc:down1=down,lxc:stale1=stale" || s.Counts["up"] != 2 {
		t.Errorf("filtered: %v %v", order, s.Counts)
	}
}

func TestSignals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	web := e.create("lxc", "web", map[string]any{"vmid": 101, "host": "atlas"})
	other := e.create("host", "other", nil)
	// The scheduler raises signals; the test plays it.
	var ids []string
	for i, s := range []struct{ entity, kind, key string }{
		{web.ID, "check_failed", "a"}, {web.ID, "unmonitored", "b"}, {other.ID, "check_failed", "c"},
	} {
		var id string
		err := e.pool.QueryRow(ctx, `INSERT INTO signals (id, kind, entity_id, dedup_key, summary, last_seen)
			VALUES (gen_random_uuid(), $1, $2, $3, 'test', now() - make_interval(secs => $4)) RETURNING id::text`,
			s.kind, s.entity, s.key, i).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	type sig struct {
		ID             string  `json:"id"`
		Status         string  `json:"status"`
		Entity         *string `json:"entity"`
		AcknowledgedBy *string `json:"acknowledged_by"`
		MutedUntil     *string `json:"muted_until"`
	}
	var l listJSON[sig]
	e.readonly.do("GET", "/api/v1/signals?entity=lxc:web&status=open", nil).expect(t, http.StatusOK).json(t, &l)
	if len(l.Items) != 2 || *l.Items[0].Entity != "lxc:web" {
		t.Fatalf("signals of lxc:web: %+v", l.Items)
	}
	e.readonly.do("POST", "/api/v1/signals/"+ids[0]+"/ack", nil).expect(t, http.StatusForbidden)

	var s sig
	r := e.operator.do("POST", "/api/v1/signals/"+ids[0]+"/ack", nil, "X-Correlation-ID", "ack-1").expect(t, http.StatusOK)
	r.json(t, &s)
	if s.Status != "acknowledged" || s.AcknowledgedBy == nil || *s.AcknowledgedBy != "op" {
		t.Errorf("ack: %+v", s)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'signal.ack' AND correlation_id = 'ack-1' AND entity_id = $1
		AND before->>'status' = 'open' AND after->>'status' = 'acknowledged'`, web.ID); n != 1 {
		t.Errorf("ack audit rows: %d", n)
	}
	if n := e.count(`SELECT count(*) FROM events WHERE type = 'signal.acknowledged' AND correlation_id = 'ack-1' AND entity_id = $1`, web.ID); n != 1 {
		t.Errorf("ack events: %d", n)
	}
	// Acknowledging twice is a conflict and changes nothing.
	before := e.snapshot()
	e.operator.do("POST", "/api/v1/signals/"+ids[0]+"/ack", nil).expect(t, http.StatusConflict)
	// Mute needs a future until.
	e.operator.do("POST", "/api/v1/signals/"+ids[1]+"/mute", map[string]any{"until": "2001-01-01T00:00:00Z"}).expect(t, http.StatusUnprocessableEntity)
	e.operator.do("POST", "/api/v1/signals/"+ids[1]+"/mute", map[string]any{"until": "tomorrow"}).expect(t, http.StatusUnprocessableEntity)
	e.operator.do("POST", "/api/v1/signals/"+ids[1]+"/mute", map[string]any{}).expect(t, http.StatusUnprocessableEntity)
	e.operator.do("POST", "/api/v1/signals/0191d2a4-0000-7000-8000-000000000000/resolve", nil).expect(t, http.StatusNotFound)
	e.operator.do("POST", "/api/v1/signals/not-a-uuid/resolve", nil).expect(t, http.StatusNotFound)
	if e.snapshot() != before {
		t.Errorf("refused decisions changed the database")
	}
	until := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	e.agent.do("POST", "/api/v1/signals/"+ids[1]+"/mute", map[string]any{"until": until}).expect(t, http.StatusOK).json(t, &s)
	if s.Status != "muted" || s.MutedUntil == nil {
		t.Errorf("mute: %+v", s)
	}
	e.operator.do("POST", "/api/v1/signals/"+ids[1]+"/resolve", nil).expect(t, http.StatusOK).json(t, &s)
	if s.Status != "resolved" || s.MutedUntil != nil {
		t.Errorf("resolve: %+v", s)
	}
	e.operator.do("POST", "/api/v1/signals/"+ids[1]+"/resolve", nil).expect(t, http.StatusConflict)
	e.readonly.do("GET", "/api/v1/signals?status=open,acknowledged", nil).expect(t, http.StatusOK).json(t, &l)
	if len(l.Items) != 2 {
		t.Errorf("open+acknowledged: %+v", l.Items)
	}
	e.readonly.do("GET", "/api/v1/signals?status=angry", nil).expect(t, http.StatusUnprocessableEntity)
	// Paging signals by id.
	var p listJSON[sig]
	e.readonly.do("GET", "/api/v1/signals?limit=2", nil).expect(t, http.StatusOK).json(t, &p)
	if len(p.Items) != 2 || p.NextCursor == nil {
		t.Fatalf("signals page 1: %+v", p)
	}
	var p2 listJSON[sig]
	e.readonly.do("GET", "/api/v1/signals?limit=2&cursor="+url.QueryEscape(*p.NextCursor), nil).expect(t, http.StatusOK).json(t, &p2)
	if len(p2.Items) != 1 || p2.NextCursor != nil || p2.Items[0].ID == p.Items[0].ID || p2.Items[0].ID == p.Items[1].ID {
		t.Errorf("signals page 2: %+v", p2)
	}
}

func TestOntologyEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var types listJSON[struct {
		Name     string `json:"name"`
		Abstract bool   `json:"abstract"`
	}]
	e.readonly.do("GET", "/api/v1/ontology/types", nil).expect(t, http.StatusOK).json(t, &types)
	if len(types.Items) != len(apitest.SeedOntology(t).Types()) || types.NextCursor != nil {
		t.Errorf("%d types", len(types.Items))
	}
	var rels listJSON[struct {
		Name    string   `json:"name"`
		Sources []string `json:"sources"`
	}]
	e.readonly.do("GET", "/api/v1/ontology/relationship-types", nil).expect(t, http.StatusOK).json(t, &rels)
	if len(rels.Items) != len(apitest.SeedOntology(t).RelationshipTypes()) {
		t.Errorf("%d relationship types", len(rels.Items))
	}
}

// TestMountedRoutes: routes another package mounts get the same authentication, role
// checks, correlation ids and problem JSON as the server's own.
func TestMountedRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{routes: []apirequest.Route{
		apirequest.GET("/x-mounted", auth.PermRead, func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) }),
		apirequest.POST("/x-mounted", auth.PermWrite, func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }),
	}})
	call := func(method, token string) (int, http.Header) {
		req, _ := http.NewRequest(method, e.ts.URL+"/api/v1/x-mounted", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	for _, c := range []struct {
		method, token string
		status        int
	}{
		{"GET", "", 401}, {"GET", e.readonly.token, 200}, {"POST", e.readonly.token, 403}, {"POST", e.agent.token, 204},
	} {
		status, h := call(c.method, c.token)
		if status != c.status || h.Get("X-Correlation-ID") == "" {
			t.Errorf("%s with %q: %d (correlation %q), want %d", c.method, c.token, status, h.Get("X-Correlation-ID"), c.status)
		}
		if status >= 400 && !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: error is not problem JSON", c.method)
		}
	}
	// The server's own routes are unaffected, and an unknown /api/v1 path is still a 404
	// problem for a valid token.
	e.readonly.do("GET", "/api/v1/entities", nil).expect(t, http.StatusOK)
	e.readonly.do("GET", "/api/v1/nothing", nil).expect(t, http.StatusNotFound)
}

// The scheduler writes incidents (a signal of kind incident and its members); the api lists
// them open first with their affected counts, shows one with its members, finds them by an
// affected entity, and acknowledges them as signals, with a note.
func TestIncidents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	host := e.create("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	web := e.create("lxc", "web", map[string]any{"vmid": 101, "host": "atlas"})
	db := e.create("lxc", "db", map[string]any{"vmid": 102, "host": "atlas"})
	other := e.create("host", "other", nil)
	incident := func(root string, status string, members ...string) string {
		var id string
		err := e.pool.QueryRow(ctx, `INSERT INTO signals (id, kind, entity_id, dedup_key, summary, severity, status, resolved_at)
VALUES (gen_random_uuid(), 'incident', $1::uuid, 'incident:' || $1::text || ':' || $2::text, 'test', 'critical', $2::text,
        CASE WHEN $2::text = 'resolved' THEN now() END) RETURNING id::text`, root, status).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range append([]string{root}, members...) {
			role := "affected"
			if i == 0 {
				role = "root"
			}
			if _, err := e.pool.Exec(ctx, `INSERT INTO incident_members (incident_id, entity_id, role, health, reason)
VALUES ($1, $2, $3, 'unknown', 'host unreachable')`, id, m, role); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	old := incident(other.ID, "resolved")
	open := incident(host.ID, "open", web.ID, db.ID)

	var list struct {
		Items []struct {
			ID, Root, Status string
			AffectedCount    int `json:"affected_count"`
		} `json:"items"`
	}
	e.readonly.do("GET", "/api/v1/incidents", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 2 || list.Items[0].ID != open || list.Items[0].AffectedCount != 2 || list.Items[1].ID != old {
		t.Fatalf("incidents: %+v", list.Items)
	}
	e.readonly.do("GET", "/api/v1/incidents?status=open&entity=lxc:db", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 1 || list.Items[0].Root != "proxmox-host:atlas" {
		t.Fatalf("incidents of lxc:db: %+v", list.Items)
	}
	var one struct {
		Affected []struct{ Entity, Health, Reason string } `json:"affected"`
	}
	e.readonly.do("GET", "/api/v1/incidents/"+open, nil).expect(t, http.StatusOK).json(t, &one)
	if len(one.Affected) != 2 || one.Affected[0].Entity != "lxc:db" || one.Affected[0].Reason != "host unreachable" {
		t.Fatalf("members: %+v", one.Affected)
	}
	e.readonly.do("GET", "/api/v1/incidents?status=sad", nil).expect(t, http.StatusUnprocessableEntity)
	e.readonly.do("GET", "/api/v1/incidents/not-a-uuid", nil).expect(t, http.StatusNotFound)

	var acked struct {
		Status  string `json:"status"`
		AckNote string `json:"ack_note"`
	}
	e.operator.do("POST", "/api/v1/signals/"+open+"/ack", map[string]any{"note": "rebooting atlas"}).expect(t, http.StatusOK).json(t, &acked)
	if acked.Status != "acknowledged" || acked.AckNote != "rebooting atlas" {
		t.Fatalf("ack: %+v", acked)
	}
	e.operator.do("POST", "/api/v1/signals/"+open+"/ack", map[string]any{"note": strings.Repeat("x", 2001)}).expect(t, http.StatusUnprocessableEntity)
}
