package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/eventbus"
)

func TestAuthAndRoles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Open endpoints.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/api/v1/openapi.yaml"} {
		e.anon.do("GET", p, nil).expect(t, http.StatusOK)
	}
	// No token, a garbage token, a wrong-scheme header: 401 problem with WWW-Authenticate.
	r := e.anon.do("GET", "/api/v1/entities", nil).expect(t, http.StatusUnauthorized)
	if r.Header.Get("WWW-Authenticate") == "" || r.problem(t).Type != "urn:oikos:problem:unauthorized" {
		t.Errorf("401 without challenge or problem type: %v %s", r.Header, r.Body)
	}
	bad := &client{t: t, base: e.ts.URL, token: "oik_" + strings.Repeat("A", 43)}
	bad.do("GET", "/api/v1/entities", nil).expect(t, http.StatusUnauthorized)
	e.anon.do("GET", "/api/v1/entities", nil, "Authorization", "Basic b3A6b3A=").expect(t, http.StatusUnauthorized)
	// Every role reads.
	for _, c := range []*client{e.operator, e.agent, e.readonly} {
		c.do("GET", "/api/v1/entities", nil).expect(t, http.StatusOK)
	}
	// readonly cannot mutate, and nothing changes.
	before := e.snapshot()
	r = e.readonly.do("POST", "/api/v1/entities", map[string]any{"type": "host", "name": "ro"}).expect(t, http.StatusForbidden)
	if r.problem(t).Type != "urn:oikos:problem:forbidden" {
		t.Errorf("403 problem: %s", r.Body)
	}
	e.readonly.do("PUT", "/api/v1/knowledge/document:ro", map[string]any{"title": "x"}).expect(t, http.StatusForbidden)
	if after := e.snapshot(); after != before {
		t.Errorf("forbidden request changed the database")
	}
	// agent writes facts.
	e.agent.do("POST", "/api/v1/entities", map[string]any{"type": "host", "name": "by-agent"}).expect(t, http.StatusCreated)
	// Metrics record requests by route.
	m := e.anon.do("GET", "/metrics", nil)
	if !strings.Contains(string(m.Body), `oikos_http_request_duration_seconds_count{code="403",method="POST",route="/api/v1/entities"}`) {
		t.Errorf("metrics lack the 403: %s", m.Body)
	}
}

func TestCorrelationID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.operator.do("POST", "/api/v1/entities", map[string]any{"type": "host", "name": "corr"},
		"X-Correlation-ID", "req-42").expect(t, http.StatusCreated)
	if got := r.Header.Get("X-Correlation-ID"); got != "req-42" {
		t.Errorf("correlation id echoed as %q", got)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE correlation_id = 'req-42' AND actor = 'op'
		AND method = 'POST' AND path = '/api/v1/entities' AND action = 'entity.create' AND after IS NOT NULL`); n != 1 {
		t.Errorf("audit rows with the correlation id: %d", n)
	}
	if n := e.count(`SELECT count(*) FROM events WHERE correlation_id = 'req-42' AND type = 'entity.created' AND actor = 'op'`); n != 1 {
		t.Errorf("events with the correlation id: %d", n)
	}
	// A hostile one is replaced by a generated id; errors carry it too.
	r = e.operator.do("GET", "/api/v1/entities/host:nope", nil, "X-Correlation-ID", "bad id; DROP").expect(t, http.StatusNotFound)
	id := r.Header.Get("X-Correlation-ID")
	if id == "" || strings.Contains(id, " ") || r.problem(t).CorrelationID != id {
		t.Errorf("generated correlation id %q, problem %s", id, r.Body)
	}
}

func TestEntityLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := map[string]any{"type": "proxmox-host", "name": "atlas", "attributes": map[string]any{"node": "atlas", "ssh_port": 2222}}
	r := e.operator.do("POST", "/api/v1/entities", body, "Idempotency-Key", "k1").expect(t, http.StatusCreated)
	var created entityJSON
	r.json(t, &created)
	if created.Slug != "proxmox-host:atlas" || created.State != "active" || created.Version != 1 {
		t.Fatalf("created %+v", created)
	}
	if loc := r.Header.Get("Location"); loc != "/api/v1/entities/proxmox-host:atlas" {
		t.Errorf("Location %q", loc)
	}
	// Replay: the stored answer, no second entity.
	r = e.operator.do("POST", "/api/v1/entities", body, "Idempotency-Key", "k1").expect(t, http.StatusCreated)
	var replayed entityJSON
	r.json(t, &replayed)
	if replayed.ID != created.ID || r.Header.Get("Idempotency-Replayed") != "true" {
		t.Errorf("replay %+v %v", replayed, r.Header)
	}
	if n := e.count(`SELECT count(*) FROM entities WHERE type = 'proxmox-host'`); n != 1 {
		t.Errorf("%d proxmox hosts after replay", n)
	}
	// Get by slug and by id, with ETag.
	var got entityJSON
	r = e.operator.do("GET", "/api/v1/entities/proxmox-host:atlas", nil).expect(t, http.StatusOK)
	r.json(t, &got)
	if r.Header.Get("ETag") != `"1"` {
		t.Errorf("ETag %q", r.Header.Get("ETag"))
	}
	e.operator.do("GET", "/api/v1/entities/"+created.ID, nil).expect(t, http.StatusOK).json(t, &got)
	if got.Slug != created.Slug {
		t.Errorf("get by id: %+v", got)
	}
	// Health and last_check_at come from entity_status.
	e.setHealth("proxmox-host:atlas", "degraded", time.Minute)
	e.operator.do("GET", "/api/v1/entities/proxmox-host:atlas", nil).expect(t, http.StatusOK).json(t, &got)
	if got.Health != "degraded" || got.LastCheckAt == nil {
		t.Errorf("health not shown: %+v", got)
	}
	// PATCH with If-Match merges; null deletes.
	r = e.operator.do("PATCH", "/api/v1/entities/proxmox-host:atlas",
		map[string]any{"attributes": map[string]any{"ssh_port": nil, "pve_version": "8.3"}}, "If-Match", `"1"`).expect(t, http.StatusOK)
	var patched entityJSON
	r.json(t, &patched)
	if patched.Version != 2 || patched.Attributes["pve_version"] != "8.3" || patched.Attributes["node"] != "atlas" {
		t.Errorf("patched %+v", patched)
	}
	if _, ok := patched.Attributes["ssh_port"]; ok {
		t.Errorf("null did not delete ssh_port: %+v", patched.Attributes)
	}
	// expected_version in the body works the same way.
	e.operator.do("PATCH", "/api/v1/entities/proxmox-host:atlas",
		map[string]any{"attributes": map[string]any{"user": "root"}, "expected_version": 2}).expect(t, http.StatusOK)
	// State transition.
	var moved entityJSON
	e.operator.do("POST", "/api/v1/entities/proxmox-host:atlas/state", map[string]any{"state": "maintenance"}).
		expect(t, http.StatusOK).json(t, &moved)
	if moved.State != "maintenance" {
		t.Errorf("state %q", moved.State)
	}
	// The audit trail has create, two updates and a state change, with before and after.
	var audit listJSON[struct {
		Action string         `json:"action"`
		Method string         `json:"method"`
		Path   string         `json:"path"`
		Before map[string]any `json:"before"`
		After  map[string]any `json:"after"`
		Entity *string        `json:"entity"`
	}]
	e.readonly.do("GET", "/api/v1/audit?entity=proxmox-host:atlas", nil).expect(t, http.StatusOK).json(t, &audit)
	var actions []string
	for _, a := range audit.Items {
		actions = append(actions, a.Action)
		if a.After == nil || a.Method == "" || a.Path == "" || a.Entity == nil || *a.Entity != "proxmox-host:atlas" {
			t.Errorf("audit row incomplete: %+v", a)
		}
	}
	if strings.Join(actions, ",") != "entity.state,entity.update,entity.update,entity.create" {
		t.Errorf("audit actions newest first: %v", actions)
	}
	// The timeline has the matching events, newest first.
	var tl listJSON[struct {
		Type string `json:"type"`
	}]
	e.readonly.do("GET", "/api/v1/entities/proxmox-host:atlas/events", nil).expect(t, http.StatusOK).json(t, &tl)
	if len(tl.Items) < 4 || tl.Items[0].Type != "entity.state_changed" || tl.Items[len(tl.Items)-1].Type != "entity.created" {
		t.Errorf("timeline %+v", tl.Items)
	}
	e.readonly.do("GET", "/api/v1/entities/proxmox-host:atlas/events?types=entity.created", nil).expect(t, http.StatusOK).json(t, &tl)
	if len(tl.Items) != 1 {
		t.Errorf("timeline type filter: %+v", tl.Items)
	}
}

// TestBadInputChangesNothing is the bad-input table of issue 4: every case gets a clear
// problem naming what is wrong, and the database (rows, audit, events, idempotency records)
// is exactly as before.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	e.create("lxc", "web", map[string]any{"vmid": 101, "host": "atlas"})
	e.create("service", "nginx", map[string]any{"unit": "nginx.service"})
	e.link("hosts", "proxmox-host:atlas", "lxc:web")
	e.link("runs-on", "service:nginx", "lxc:web")
	e.operator.do("POST", "/api/v1/entities", map[string]any{"type": "host", "name": "idem"}, "Idempotency-Key", "once").
		expect(t, http.StatusCreated)
	big := `{"type":"host","name":"big","attributes":{"blob":"` + strings.Repeat("x", 1<<20) + `"}}`

	cases := []struct {
		name    string
		method  string
		path    string
		body    any
		headers []string
		status  int
		kind    string
		field   string
		detail  string
	}{
		{"malformed JSON", "POST", "/api/v1/entities", `{"type": "host",`, nil, 400, "malformed-request", "", "malformed JSON"},
		{"not JSON at all", "POST", "/api/v1/entities", `type=host`, nil, 400, "malformed-request", "", "malformed JSON"},
		{"two values", "POST", "/api/v1/entities", `{"type":"host","name":"a"} {}`, nil, 400, "malformed-request", "", "single JSON value"},
		{"empty body", "POST", "/api/v1/entities", ``, nil, 400, "malformed-request", "", "required"},
		{"unknown field", "POST", "/api/v1/entities", map[string]any{"type": "host", "name": "u", "colour": "red"}, nil, 422, "validation", "colour", "unknown field"},
		{"wrong type", "POST", "/api/v1/entities", map[string]any{"type": "host", "name": 7}, nil, 422, "validation", "name", "expected string"},
		{"attributes not an object", "POST", "/api/v1/entities", map[string]any{"type": "host", "name": "w", "attributes": []int{1}}, nil, 422, "validation", "attributes", "expected object"},
		{"wrong attribute type", "POST", "/api/v1/entities", map[string]any{"type": "lxc", "name": "x", "attributes": map[string]any{"vmid": "one"}}, nil, 422, "invalid-attribute", "attributes.vmid", "integer"},
		{"missing required attribute", "POST", "/api/v1/entities", map[string]any{"type": "lxc", "name": "x"}, nil, 422, "invalid-attribute", "attributes.vmid", "required"},
		{"unknown type", "POST", "/api/v1/entities", map[string]any{"type": "spaceship", "name": "x"}, nil, 422, "unknown-type", "type", "spaceship"},
		{"abstract type", "POST", "/api/v1/entities", map[string]any{"type": "machine", "name": "x"}, nil, 422, "abstract-type", "type", "machine"},
		{"undeclared state", "POST", "/api/v1/entities", map[string]any{"type": "host", "name": "x", "state": "flying"}, nil, 422, "undeclared-state", "state", "flying"},
		{"illegal transition", "POST", "/api/v1/entities/lxc:web/state", map[string]any{"state": "provisioning"}, nil, 422, "illegal-transition", "state", "provisioning"},
		{"failed precondition", "POST", "/api/v1/entities/lxc:web/state", map[string]any{"state": "destroyed"}, nil, 422, "precondition-failed", "state", "no_live_dependents"},
		{"forbidden edge", "POST", "/api/v1/relationships", map[string]any{"type": "hosts", "source": "service:nginx", "target": "lxc:web"}, nil, 422, "edge-not-allowed", "", "hosts"},
		{"unknown relationship type", "POST", "/api/v1/relationships", map[string]any{"type": "loves", "source": "service:nginx", "target": "lxc:web"}, nil, 422, "edge-not-allowed", "", "loves"},
		{"edge to unknown slug", "POST", "/api/v1/relationships", map[string]any{"type": "runs-on", "source": "service:nginx", "target": "lxc:ghost"}, nil, 404, "not-found", "", "target"},
		{"version conflict (If-Match)", "PATCH", "/api/v1/entities/lxc:web", map[string]any{"attributes": map[string]any{"cores": 2}}, []string{"If-Match", `"9"`}, 409, "version-conflict", "", ""},
		{"version conflict (body)", "PATCH", "/api/v1/entities/lxc:web", map[string]any{"attributes": map[string]any{"cores": 2}, "expected_version": 9}, nil, 409, "version-conflict", "", ""},
		{"version conflict on state", "POST", "/api/v1/entities/lxc:web/state", map[string]any{"state": "maintenance", "expected_version": 9}, nil, 409, "version-conflict", "", ""},
		{"If-Match disagrees with body", "PATCH", "/api/v1/entities/lxc:web", map[string]any{"attributes": map[string]any{"cores": 2}, "expected_version": 1}, []string{"If-Match", `"2"`}, 400, "malformed-request", "expected_version", "disagrees"},
		{"duplicate slug", "POST", "/api/v1/entities", map[string]any{"type": "lxc", "name": "web", "attributes": map[string]any{"vmid": 102}}, nil, 409, "duplicate", "name", "lxc:web"},
		{"idempotency key with another body", "POST", "/api/v1/entities", map[string]any{"type": "host", "name": "other"}, []string{"Idempotency-Key", "once"}, 422, "idempotency-mismatch", "Idempotency-Key", "once"},
		{"body over 1 MiB", "POST", "/api/v1/entities", big, nil, 413, "payload-too-large", "", "exceeds"},
		{"unknown slug (get)", "GET", "/api/v1/entities/lxc:ghost", nil, nil, 404, "not-found", "", "lxc:ghost"},
		{"unknown slug (patch)", "PATCH", "/api/v1/entities/lxc:ghost", map[string]any{"attributes": map[string]any{"cores": 1}}, nil, 404, "not-found", "", "lxc:ghost"},
		{"unknown slug (state)", "POST", "/api/v1/entities/lxc:ghost/state", map[string]any{"state": "active"}, nil, 404, "not-found", "", "lxc:ghost"},
		{"scheduler-owned health", "PATCH", "/api/v1/entities/lxc:web", map[string]any{"attributes": map[string]any{"health": "up"}}, nil, 422, "scheduler-owned", "attributes.health", "scheduler"},
		{"scheduler-owned last_check_at", "PATCH", "/api/v1/entities/lxc:web", map[string]any{"attributes": map[string]any{"last_check_at": "now"}}, nil, 422, "scheduler-owned", "attributes.last_check_at", "health/summary"},
		{"patch without attributes", "PATCH", "/api/v1/entities/lxc:web", map[string]any{"expected_version": 1}, nil, 422, "validation", "attributes", "required"},
		{"removing a required attribute", "PATCH", "/api/v1/entities/lxc:web", map[string]any{"attributes": map[string]any{"vmid": nil}}, nil, 422, "invalid-attribute", "attributes.vmid", "cannot be removed"},
		{"not JSON content type", "POST", "/api/v1/entities", "type: host", []string{"Content-Type", "text/yaml"}, 415, "unsupported-media-type", "", "application/json"},
		{"end unknown relationship", "POST", "/api/v1/relationships/0191d2a4-0000-7000-8000-000000000000/end", nil, nil, 404, "not-found", "", ""},
		{"knowledge with bad kind", "PUT", "/api/v1/knowledge/spaceship:x", map[string]any{"title": "t"}, nil, 422, "", "kind", ""},
		{"knowledge without title", "PUT", "/api/v1/knowledge/runbook:x", map[string]any{"body": "b"}, nil, 422, "validation", "title", ""},
		{"knowledge about unknown entity", "PUT", "/api/v1/knowledge/runbook:x", map[string]any{"title": "t", "about": "lxc:ghost"}, nil, 404, "not-found", "", "about"},
		{"bad limit", "GET", "/api/v1/entities?limit=501", nil, nil, 400, "malformed-request", "limit", ""},
		{"bad cursor", "GET", "/api/v1/entities?cursor=***", nil, nil, 400, "malformed-request", "cursor", ""},
		{"unknown type filter", "GET", "/api/v1/entities?type=spaceship", nil, nil, 422, "validation", "type", "spaceship"},
		{"unknown health filter", "GET", "/api/v1/health/summary?health=sad", nil, nil, 422, "validation", "health", "sad"},
		{"no such route", "GET", "/api/v1/nothing-here", nil, nil, 404, "no-route", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.snapshot()
			r := e.operator.do(c.method, c.path, c.body, c.headers...)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			p := r.problem(t)
			if p.Status != c.status || p.Title == "" || p.Detail == "" || !strings.HasPrefix(p.Type, "urn:oikos:problem:") {
				t.Errorf("problem incomplete: %s", r.Body)
			}
			if c.kind != "" && p.Type != "urn:oikos:problem:"+c.kind {
				t.Errorf("type %q, want %q (%s)", p.Type, c.kind, r.Body)
			}
			if c.field != "" && p.Field != c.field {
				t.Errorf("field %q, want %q (%s)", p.Field, c.field, r.Body)
			}
			if c.detail != "" && !strings.Contains(p.Detail, c.detail) {
				t.Errorf("detail %q does not mention %q", p.Detail, c.detail)
			}
			if after := e.snapshot(); after != before {
				t.Errorf("the database changed:\n before %s\n after  %s", before, after)
			}
		})
	}
}

func TestEntityFiltersAndSubtypes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas"})
	e.create("host", "docker1", map[string]any{"role": "docker box"})
	e.create("lxc", "jellyfin", map[string]any{"vmid": 101, "host": "atlas", "onboot": true})
	e.create("lxc", "pihole", map[string]any{"vmid": 102, "host": "atlas"}, "maintenance")
	e.create("vm", "homeassistant", map[string]any{"vmid": 200, "host": "atlas"})
	e.create("service", "jellyfin", map[string]any{"unit": "jellyfin.service"})
	e.setHealth("lxc:jellyfin", "down", time.Minute)
	e.setHealth("vm:homeassistant", "up", time.Minute)

	slugs := func(query string) string {
		t.Helper()
		var l listJSON[entityJSON]
		e.readonly.do("GET", "/api/v1/entities?"+query, nil).expect(t, http.StatusOK).json(t, &l)
		var out []string
		for _, x := range l.Items {
			out = append(out, x.Slug)
		}
		return strings.Join(out, ",")
	}
	cases := map[string]string{
		"type=guest":                           "lxc:jellyfin,lxc:pihole,vm:homeassistant",
		"type=machine":                         "host:docker1,proxmox-host:atlas",
		"type=lxc,service":                     "lxc:jellyfin,lxc:pihole,service:jellyfin",
		"type=guest&state=maintenance":         "lxc:pihole",
		"health=down,up":                       "lxc:jellyfin,vm:homeassistant",
		"type=lxc&health=down":                 "lxc:jellyfin",
		"attr.vmid=101":                        "lxc:jellyfin",
		"attr.onboot=true":                     "lxc:jellyfin",
		"attr.host=atlas&attr.vmid=200":        "vm:homeassistant",
		"q=JELLY&type=lxc,service":             "lxc:jellyfin,service:jellyfin",
		"q=jellyfin&type=check":                "check:lxc.jellyfin.proxmox-guest,check:lxc.jellyfin.ssh-script.cpu,check:lxc.jellyfin.ssh-script.disk,check:lxc.jellyfin.ssh-script.memory,check:service.jellyfin.ssh-script.process",
		"q=" + url.QueryEscape("100%"):         "",
		"q=proxmox-host:":                      "proxmox-host:atlas",
		"state=destroyed":                      "",
		"type=guest&attr.host=atlas&q=pi":      "lxc:pihole",
		"type=service&health=down":             "",
		"attr.unit=" + url.QueryEscape("j%"):   "",
		"attr.unit=jellyfin.service&type=host": "",
		"q=jellyfin&not_type=check":            "lxc:jellyfin,service:jellyfin",
		"q=jelly&not_type=guest,check":         "service:jellyfin",
	}
	for q, want := range cases {
		if got := slugs(q); got != want {
			t.Errorf("%s: got %q, want %q", q, got, want)
		}
	}
}

func TestPaginationNoDuplicatesNoLoss(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// 23 entities sharing names across types (ties on name, never on slug), created through
	// the api.
	want := map[string]bool{}
	for i := range 23 {
		typ := []string{"host", "document", "site"}[i%3]
		name := []string{"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"}[i%8]
		if i >= 8 {
			name += "-" + string(rune('a'+i))
		}
		var body map[string]any
		if typ == "document" {
			e.operator.do("PUT", "/api/v1/knowledge/document:"+name, map[string]any{"title": "Doc " + name}).expect(t, http.StatusCreated)
			want["document:"+name] = true
			continue
		}
		body = map[string]any{"type": typ, "name": name}
		e.operator.do("POST", "/api/v1/entities", body).expect(t, http.StatusCreated)
		want[typ+":"+name] = true
	}
	total := int(e.count(`SELECT count(*) FROM entities`))
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	last := ""
	for {
		var l listJSON[entityJSON]
		path := "/api/v1/entities?limit=4"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		e.readonly.do("GET", path, nil).expect(t, http.StatusOK).json(t, &l)
		pages++
		for _, x := range l.Items {
			if seen[x.Slug] {
				t.Fatalf("%s repeated on page %d", x.Slug, pages)
			}
			if x.Slug <= last {
				t.Fatalf("out of order: %s after %s", x.Slug, last)
			}
			seen[x.Slug], last = true, x.Slug
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
		if pages > 50 {
			t.Fatal("pagination does not end")
		}
	}
	if len(seen) != total {
		t.Errorf("paged %d entities, table has %d", len(seen), total)
	}
	for s := range want {
		if !seen[s] {
			t.Errorf("%s lost", s)
		}
	}

	// Events written in one transaction share their timestamp; paging by id still neither
	// drops nor repeats one.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ties := make([]eventbus.Event, 17)
	for i := range ties {
		ties[i] = eventbus.Event{Type: "test.tie", Payload: []byte(`{"i": ` + strconv.Itoa(i) + `}`)}
	}
	if _, err := eventbus.AppendMany(ctx, tx, ties); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[float64]bool{}
	cursor = ""
	for range 20 {
		var l listJSON[struct {
			Payload map[string]float64 `json:"payload"`
		}]
		path := "/api/v1/events?types=test.tie&limit=5"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		e.readonly.do("GET", path, nil).expect(t, http.StatusOK).json(t, &l)
		for _, x := range l.Items {
			if got[x.Payload["i"]] {
				t.Fatalf("event %v repeated", x.Payload["i"])
			}
			got[x.Payload["i"]] = true
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	if len(got) != 17 {
		t.Errorf("paged %d of 17 tied events", len(got))
	}
	// since= is the catch-up form of the same read.
	var l listJSON[struct {
		ID int64 `json:"id"`
	}]
	e.readonly.do("GET", "/api/v1/events?since=0&types=test.&limit=500", nil).expect(t, http.StatusOK).json(t, &l)
	if len(l.Items) != 17 || l.NextCursor != nil {
		t.Errorf("prefix type filter: %d events", len(l.Items))
	}
	var after listJSON[struct {
		ID int64 `json:"id"`
	}]
	e.readonly.do("GET", "/api/v1/events?types=test.tie&since="+strconv.FormatInt(l.Items[9].ID, 10), nil).expect(t, http.StatusOK).json(t, &after)
	if len(after.Items) != 7 || after.Items[0].ID != l.Items[10].ID {
		t.Errorf("since: %+v", after.Items)
	}
	// since= may also be a point in time: a duration back from now or an RFC 3339 time, read
	// as everywhere else (7d, 90m); the events at or after it, paged the same way.
	if _, err := e.pool.Exec(ctx, `UPDATE events SET at = now() - interval '10 days' WHERE type = 'test.tie' AND id <= $1`, l.Items[4].ID); err != nil {
		t.Fatal(err)
	}
	for _, since := range []string{"7d", "90m", url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))} {
		var recent listJSON[struct {
			ID int64 `json:"id"`
		}]
		e.readonly.do("GET", "/api/v1/events?types=test.tie&limit=5&since="+since, nil).expect(t, http.StatusOK).json(t, &recent)
		if len(recent.Items) != 5 || recent.Items[0].ID != l.Items[5].ID || recent.NextCursor == nil {
			t.Fatalf("since=%s: %+v", since, recent)
		}
		e.readonly.do("GET", "/api/v1/events?types=test.tie&limit=500&since="+since+"&cursor="+url.QueryEscape(*recent.NextCursor), nil).
			expect(t, http.StatusOK).json(t, &recent)
		if len(recent.Items) != 7 || recent.Items[0].ID != l.Items[10].ID {
			t.Errorf("since=%s, second page: %+v", since, recent.Items)
		}
	}
	for _, bad := range []string{"yesterday", "-7d", "0d"} {
		if p := e.readonly.do("GET", "/api/v1/events?since="+bad, nil).expect(t, http.StatusBadRequest).problem(t); p.Field != "since" {
			t.Errorf("since=%s: %+v", bad, p)
		}
	}
}
