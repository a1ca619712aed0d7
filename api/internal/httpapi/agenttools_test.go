package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestWhoAmI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		client     *client
		name, role string
	}{{e.operator, "op", "operator"}, {e.agent, "nomos", "agent"}, {e.readonly, "viewer", "readonly"}} {
		var got map[string]any
		c.client.do("GET", "/api/v1/whoami", nil).expect(t, http.StatusOK).json(t, &got)
		if len(got) != 2 || got["name"] != c.name || got["role"] != c.role {
			t.Errorf("%s: %v", c.name, got)
		}
	}
	e.anon.do("GET", "/api/v1/whoami", nil).expect(t, http.StatusUnauthorized)
	bad := &client{t: t, base: e.ts.URL, token: "oik_" + strings.Repeat("A", 43)}
	if r := bad.do("GET", "/api/v1/whoami", nil).expect(t, http.StatusUnauthorized); r.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("401 without a challenge")
	}
	// A revoked token is refused at once.
	if _, err := e.pool.Exec(context.Background(), `UPDATE api_tokens SET revoked_at = now() WHERE name = 'viewer'`); err != nil {
		t.Fatal(err)
	}
	e.readonly.do("GET", "/api/v1/whoami", nil).expect(t, http.StatusUnauthorized)
}

// checkJSON is an item of GET /checks.
type checkJSON struct {
	ID              string         `json:"id"`
	Slug            string         `json:"slug"`
	Kind            string         `json:"kind"`
	Target          string         `json:"target"`
	TargetType      string         `json:"target_type"`
	Config          map[string]any `json:"config"`
	IntervalSeconds int            `json:"interval_seconds"`
	Enabled         bool           `json:"enabled"`
	Health          string         `json:"health"`
	Reason          string         `json:"reason"`
	ErrorClass      string         `json:"error_class"`
	At              *time.Time     `json:"at"`
	Since           *time.Time     `json:"since"`
}

func TestListChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222, "user": "root"})
	e.create("lxc", "web", map[string]any{"vmid": 101, "host": "atlas", "hostname": "web"})
	e.create("vm", "ha", map[string]any{"vmid": 200, "host": "atlas", "qemu_guest_agent": true})
	list := func(query string) []checkJSON {
		t.Helper()
		var l listJSON[checkJSON]
		e.readonly.do("GET", "/api/v1/checks"+query, nil).expect(t, http.StatusOK).json(t, &l)
		if l.NextCursor != nil {
			t.Fatalf("%s: a second page with the default limit", query)
		}
		return l.Items
	}
	all := list("")
	want := e.count(`SELECT count(*) FROM check_defs`)
	if int64(len(all)) != want || want < 6 {
		t.Fatalf("%d checks listed, %d defined", len(all), want)
	}
	if !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].Slug < all[j].Slug }) {
		t.Errorf("not in slug order: %v", all)
	}
	byTarget := map[string]int{}
	for _, c := range all {
		byTarget[c.Target]++
		if c.Health != "unknown" || c.At != nil || c.Since != nil || c.Reason != "" || !c.Enabled || c.Config == nil {
			t.Errorf("a check not run yet: %+v", c)
		}
		if want := strings.SplitN(c.Target, ":", 2)[0]; c.TargetType != want {
			t.Errorf("%s: target type %s of %s", c.Slug, c.TargetType, c.Target)
		}
	}

	// The scheduler's results, as it writes them.
	at := time.Now().UTC().Truncate(time.Second)
	result := func(slug, health, reason, errClass string, since time.Time) {
		t.Helper()
		_, err := e.pool.Exec(context.Background(), `INSERT INTO check_results (check_id, target_id, health, reason, error_class, at, since, first_at)
			SELECT id, target_id, $2, $3, $4, $5, $6, $6 FROM check_defs WHERE slug = $1`, slug, health, reason, errClass, at, since)
		if err != nil {
			t.Fatal(err)
		}
	}
	var webGuest, webCPU, haGuest string
	for _, c := range all {
		switch {
		case c.Target == "lxc:web" && c.Kind == "proxmox-guest":
			webGuest = c.Slug
		case c.Target == "lxc:web" && c.Config["script"] == "cpu":
			webCPU = c.Slug
		case c.Target == "vm:ha" && c.Kind == "proxmox-guest":
			haGuest = c.Slug
		}
	}
	if webGuest == "" || webCPU == "" || haGuest == "" {
		t.Fatalf("derived checks missing: %+v", all)
	}
	result(webGuest, "down", "stopped", "", at.Add(-time.Hour))
	result(webCPU, "unknown", "host unreachable", "unreachable", at.Add(-time.Minute))
	result(haGuest, "up", "running", "", at.Add(-24*time.Hour))

	web := list("?target=lxc:web")
	if len(web) != byTarget["lxc:web"] || len(web) < 2 {
		t.Fatalf("lxc:web: %d checks, want %d", len(web), byTarget["lxc:web"])
	}
	for _, c := range web {
		if c.Target != "lxc:web" || c.TargetType != "lxc" {
			t.Errorf("target filter let through %+v", c)
		}
		if c.Slug == webGuest && (c.Health != "down" || c.Reason != "stopped" || c.At == nil || !c.At.Equal(at) ||
			c.Since == nil || !c.Since.Equal(at.Add(-time.Hour))) {
			t.Errorf("the latest result of %s: %+v", webGuest, c)
		}
		if c.Slug == webCPU && (c.Health != "unknown" || c.ErrorClass != "unreachable") {
			t.Errorf("the latest result of %s: %+v", webCPU, c)
		}
	}
	var webID string
	if err := e.pool.QueryRow(context.Background(), `SELECT id::text FROM entities WHERE slug = 'lxc:web'`).Scan(&webID); err != nil {
		t.Fatal(err)
	}
	if byID := list("?target=" + webID); len(byID) != len(web) {
		t.Errorf("by target id: %d checks, want %d", len(byID), len(web))
	}
	slugs := func(cs []checkJSON) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Slug)
		}
		return out
	}
	if got := slugs(list("?health=down,up")); !slices.Equal(got, []string{webGuest, haGuest}) {
		t.Errorf("down,up: %v", got)
	}
	unknown := list("?health=unknown&target=lxc:web")
	if len(unknown) != len(web)-1 || slices.Contains(slugs(unknown), webGuest) || !slices.Contains(slugs(unknown), webCPU) {
		t.Errorf("unknown on lxc:web (a result of unknown and checks not run yet): %v", slugs(unknown))
	}
	for _, c := range list("?kind=proxmox-guest") {
		if c.Kind != "proxmox-guest" {
			t.Errorf("kind filter let through %+v", c)
		}
	}
	if got := slugs(list("?kind=proxmox-guest&target=vm:ha&health=up")); !slices.Equal(got, []string{haGuest}) {
		t.Errorf("combined filters: %v", got)
	}
	if got := list("?kind=http"); len(got) != 0 {
		t.Errorf("no http checks were derived, got %v", got)
	}

	// Pages in slug order, no row lost or repeated.
	var paged []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := "?limit=2"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		var l listJSON[checkJSON]
		e.readonly.do("GET", "/api/v1/checks"+q, nil).expect(t, http.StatusOK).json(t, &l)
		paged = append(paged, slugs(l.Items)...)
		if l.NextCursor == nil {
			break
		}
		if pages > len(all) {
			t.Fatal("pages never end")
		}
		cursor = *l.NextCursor
	}
	if !slices.Equal(paged, slugs(all)) {
		t.Errorf("paged %v, want %v", paged, slugs(all))
	}

	// Bad filters name the parameter.
	for _, c := range []struct {
		query  string
		status int
		field  string
	}{
		{"?kind=ping", http.StatusUnprocessableEntity, "kind"},
		{"?health=stale", http.StatusUnprocessableEntity, "health"},
		{"?health=up,sideways", http.StatusUnprocessableEntity, "health"},
		{"?target=lxc:ghost", http.StatusNotFound, "target"},
		{"?limit=0", http.StatusBadRequest, "limit"},
		{"?limit=501", http.StatusBadRequest, "limit"},
		{"?cursor=%25%25", http.StatusBadRequest, "cursor"},
	} {
		r := e.readonly.do("GET", "/api/v1/checks"+c.query, nil).expect(t, c.status)
		if p := r.problem(t); p.Field != c.field {
			t.Errorf("%s: field %q, want %q", c.query, p.Field, c.field)
		}
	}
	e.anon.do("GET", "/api/v1/checks", nil).expect(t, http.StatusUnauthorized)
}

func TestEntitiesWithLastAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222, "user": "root"})
	e.create("lxc", "web", map[string]any{"vmid": 101, "host": "atlas", "hostname": "web"})
	e.create("lxc", "db", map[string]any{"vmid": 102, "host": "atlas", "hostname": "db"})
	e.create("host", "box", map[string]any{"lan_ipv4": "127.0.11.1"})
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	doc := func(slug, title string, tags []string, about string, at time.Time) {
		t.Helper()
		body := map[string]any{"title": title, "body": "text", "tags": tags}
		if about != "" {
			body["about"] = about
		}
		e.agent.do("PUT", "/api/v1/knowledge/"+slug, body).expect(t, http.StatusCreated)
		_, err := e.pool.Exec(context.Background(), `UPDATE knowledge_entities SET updated_at = $2
			WHERE entity_id = (SELECT id FROM entities WHERE slug = $1)`, slug, at)
		if err != nil {
			t.Fatal(err)
		}
	}
	// lxc:web: an audit by tag, a newer update by title, and a still newer document that is
	// neither; atlas: a runbook whose title says AUDIT, and an older one tagged Update; db:
	// only documents that are not audits, and an audit whose about edge has ended; box:
	// nothing.
	doc("document:web-audit", "Security review", []string{"audit", "ssh"}, "lxc:web", base)
	doc("document:web-upd", "Monthly Updates applied", nil, "lxc:web", base.Add(2*time.Hour))
	doc("document:web-notes", "Notes on web", []string{"misc"}, "lxc:web", base.Add(5*time.Hour))
	doc("runbook:atlas-audit", "Quarterly AUDIT of atlas", nil, "proxmox-host:atlas", base.Add(time.Hour))
	doc("document:atlas-old", "Old notes", []string{"Update"}, "proxmox-host:atlas", base.Add(-time.Hour))
	doc("document:db-notes", "Schema notes", []string{"postgres"}, "lxc:db", base.Add(3*time.Hour))
	doc("document:db-audit", "db audit", nil, "lxc:db", base.Add(4*time.Hour))
	var edge string
	if err := e.pool.QueryRow(context.Background(), `SELECT r.id::text FROM relationships r
		JOIN entities s ON s.id = r.source_id WHERE s.slug = 'document:db-audit' AND r.type = 'about'`).Scan(&edge); err != nil {
		t.Fatal(err)
	}
	e.operator.do("POST", "/api/v1/relationships/"+edge+"/end", map[string]any{}).expect(t, http.StatusOK)
	// A document about two entities counts for both (a second about edge).
	doc("document:fleet-audit", "Fleet audit", nil, "", base.Add(30*time.Minute))
	e.link("about", "document:fleet-audit", "host:box")

	type item struct {
		Slug          string     `json:"slug"`
		LastAuditedAt *time.Time `json:"last_audited_at"`
	}
	var l listJSON[item]
	e.readonly.do("GET", "/api/v1/entities?type=machine,guest&with=last_audited", nil).expect(t, http.StatusOK).json(t, &l)
	want := map[string]*time.Time{
		"proxmox-host:atlas": ptr(base.Add(time.Hour)),
		"lxc:web":            ptr(base.Add(2 * time.Hour)),
		"lxc:db":             nil,
		"host:box":           ptr(base.Add(30 * time.Minute)),
	}
	if len(l.Items) != len(want) {
		t.Fatalf("items %+v", l.Items)
	}
	for _, it := range l.Items {
		w, ok := want[it.Slug]
		switch {
		case !ok:
			t.Errorf("unexpected %s", it.Slug)
		case w == nil && it.LastAuditedAt != nil, w != nil && (it.LastAuditedAt == nil || !it.LastAuditedAt.Equal(*w)):
			t.Errorf("%s: last_audited_at %v, want %v", it.Slug, it.LastAuditedAt, w)
		}
	}
	// The member is there, null, when there is no audit; absent without with=.
	var raw struct {
		Items []map[string]any `json:"items"`
	}
	e.readonly.do("GET", "/api/v1/entities?type=lxc&with=last_audited", nil).expect(t, http.StatusOK).json(t, &raw)
	for _, it := range raw.Items {
		v, ok := it["last_audited_at"]
		if !ok || (it["slug"] == "lxc:db" && v != nil) {
			t.Errorf("with=last_audited: %v", it)
		}
		if it["slug"] == "lxc:web" && v != "2025-03-01T14:00:00Z" {
			t.Errorf("lxc:web last_audited_at %v, want RFC 3339 2025-03-01T14:00:00Z", v)
		}
	}
	raw.Items = nil
	e.readonly.do("GET", "/api/v1/entities?type=lxc", nil).expect(t, http.StatusOK).json(t, &raw)
	for _, it := range raw.Items {
		if _, ok := it["last_audited_at"]; ok {
			t.Errorf("without with=: %v", it)
		}
	}
	// It pages like the plain list.
	var p1, p2 listJSON[item]
	e.readonly.do("GET", "/api/v1/entities?type=machine,guest&with=last_audited&limit=3", nil).expect(t, http.StatusOK).json(t, &p1)
	if len(p1.Items) != 3 || p1.NextCursor == nil {
		t.Fatalf("first page %+v", p1)
	}
	e.readonly.do("GET", "/api/v1/entities?type=machine,guest&with=last_audited&limit=3&cursor="+url.QueryEscape(*p1.NextCursor), nil).
		expect(t, http.StatusOK).json(t, &p2)
	if len(p2.Items) != 1 || p2.NextCursor != nil || p2.Items[0].Slug != "proxmox-host:atlas" || p2.Items[0].LastAuditedAt == nil {
		t.Fatalf("second page %+v", p2)
	}
	r := e.readonly.do("GET", "/api/v1/entities?with=last_audit", nil).expect(t, http.StatusUnprocessableEntity)
	if p := r.problem(t); p.Field != "with" {
		t.Errorf("bad with: field %q", p.Field)
	}
}

func ptr[T any](v T) *T { return &v }
