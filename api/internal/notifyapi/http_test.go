package notifyapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyapi"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// surface is the notification routes mounted as the api mounts them, with a client per role.
type surface struct {
	e                         *env
	operator, agent, readonly *client
}

func newSurface(t *testing.T) *surface {
	t.Helper()
	e := newEnv(t)
	ont := apitest.SeedOntology(t)
	e.Service = notify.NewService(notify.ServiceOptions{Pool: e.Pool, Secrets: e.Secrets(), KnownType: func(s string) bool {
		_, ok := ont.Type(s)
		return ok
	}})
	tokens := auth.NewStore(e.Pool)
	api := notifyapi.New(notifyapi.Deps{Service: e.Service, PublicURL: "https://oikos.example", Logger: e.Logger})
	ech := echo.New()
	g := ech.Group("/api/v1")
	g.Use(request.Correlation)
	request.Mount(g, tokens, e.Logger, api.Routes()...)
	ts := httptest.NewServer(ech)
	t.Cleanup(ts.Close)
	mk := func(name string, role auth.Role) *client {
		tok, err := tokens.Create(context.Background(), name, role)
		if err != nil {
			t.Fatal(err)
		}
		return &client{t: t, base: ts.URL, token: tok}
	}
	return &surface{e: e, operator: mk("op", auth.RoleOperator), agent: mk("nomos", auth.RoleAgent),
		readonly: mk("viewer", auth.RoleReadonly)}
}

type client struct {
	t     *testing.T
	base  string
	token string
}

type resp struct {
	status int
	body   []byte
}

// do sends a request and validates the answer against api/openapi.yaml.
func (c *client) do(method, path string, body any) resp {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer hr.Body.Close()
	raw, _ := io.ReadAll(hr.Body)
	if hr.StatusCode >= 400 && !strings.HasPrefix(hr.Header.Get("Content-Type"), "application/problem+json") {
		c.t.Fatalf("%s %s: %d is not problem JSON: %s", method, path, hr.StatusCode, raw)
	}
	if err := apitest.Validate(req, hr, raw); err != nil {
		c.t.Fatalf("%s %s -> %d does not match openapi.yaml:\n  %v\n  body: %.600s", method, path, hr.StatusCode, err, raw)
	}
	return resp{status: hr.StatusCode, body: raw}
}

func (r resp) expect(t *testing.T, status int) resp {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

type problem struct {
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

func (r resp) problem(t *testing.T, status int, field string) problem {
	t.Helper()
	r.expect(t, status)
	var p problem
	decode(t, r.body, &p)
	if p.Field != field {
		t.Fatalf("problem names field %q, want %q: %s", p.Field, field, r.body)
	}
	return p
}

// The HTTP surface: only an operator configures; bad input is a problem naming the field and
// changes nothing; every answer matches the spec; a test send answers ok or a 502 with the
// redacted error.
func TestHTTPSurface(t *testing.T) {
	t.Parallel()
	s := newSurface(t)
	e := s.e
	ntfy, hook := newReceiver(t), newReceiver(t)
	e.Vars.Set("HOOK_SECRET", hookSecret)
	changes := func() int {
		return e.Count(`SELECT (SELECT count(*) FROM notification_channels) + (SELECT count(*) FROM notification_rules) +
			(SELECT count(*) FROM audit_log) + (SELECT count(*) FROM events WHERE type LIKE 'notification.%')`)
	}
	good := map[string]any{"name": "phone", "url": ntfy.Ntfy("alerts"), "quiet_start": "22:00", "quiet_end": "07:00",
		"timezone": "Europe/Berlin", "rules": []map[string]any{{"kinds": []string{"incident.opened"}, "min_severity": "warning",
			"entity_types": []string{"guest"}}}}

	s.readonly.do("POST", "/api/v1/notifications/channels", good).expect(t, http.StatusForbidden)
	s.agent.do("POST", "/api/v1/notifications/channels", good).expect(t, http.StatusForbidden)
	s.agent.do("POST", "/api/v1/notifications/test", map[string]any{"url": ntfy.Ntfy("x")}).expect(t, http.StatusForbidden)
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		body   any
		status int
		field  string
	}{
		{`{"name": "phone",`, http.StatusBadRequest, ""},
		{with("colour", "red"), http.StatusUnprocessableEntity, "colour"},
		{with("url", "ntfyy://ntfy.sh/x"), http.StatusUnprocessableEntity, "url"},
		{with("url", "ntfy://"), http.StatusUnprocessableEntity, "url"},
		{with("url", nil), http.StatusUnprocessableEntity, "url"},
		{with("url_ref", "env:NOT_SET_ANYWHERE"), http.StatusUnprocessableEntity, "url"},
		{with("name", "no spaces"), http.StatusUnprocessableEntity, "name"},
		{with("kind", "pigeon"), http.StatusUnprocessableEntity, "kind"},
		{with("secret", "0123456789abcdef"), http.StatusUnprocessableEntity, "secret"},
		{with("quiet_end", nil), http.StatusUnprocessableEntity, "quiet_end"},
		{with("quiet_start", "25:00"), http.StatusUnprocessableEntity, "quiet_start"},
		{with("timezone", "Mars/Olympus"), http.StatusUnprocessableEntity, "timezone"},
		{with("rules", []map[string]any{{"kinds": []string{"incident.exploded"}}}), http.StatusUnprocessableEntity, "rules[0].kinds"},
		{with("rules", []map[string]any{{"kinds": []string{}}}), http.StatusUnprocessableEntity, "rules[0].kinds"},
		{with("rules", []map[string]any{{"kinds": []string{"drift.found"}, "min_severity": "loud"}}), http.StatusUnprocessableEntity,
			"rules[0].min_severity"},
		{with("rules", []map[string]any{{"kinds": []string{"drift.found"}, "entity_types": []string{"toaster"}}}),
			http.StatusUnprocessableEntity, "rules[0].entity_types"},
		{map[string]any{"name": "hook", "kind": "webhook", "url": hook.Srv.URL}, http.StatusUnprocessableEntity, "secret"},
		{map[string]any{"name": "hook", "kind": "webhook", "url": "ftp://h/x", "secret_ref": "env:HOOK_SECRET"},
			http.StatusUnprocessableEntity, "url"},
		{map[string]any{"name": "hook", "kind": "webhook", "url": hook.Srv.URL, "secret": "short"}, http.StatusUnprocessableEntity, "secret"},
	} {
		p := s.operator.do("POST", "/api/v1/notifications/channels", c.body).problem(t, c.status, c.field)
		if strings.Contains(p.Detail, "alerts") {
			t.Errorf("a problem quotes the URL: %s", p.Detail)
		}
	}
	if n := changes(); n != 0 {
		t.Fatalf("refused requests changed %d rows", n)
	}

	var ch notify.Channel
	decode(t, s.operator.do("POST", "/api/v1/notifications/channels", good).expect(t, http.StatusCreated).body, &ch)
	if ch.URL != fmt.Sprintf("ntfy://%s/…", ntfy.Srv.Listener.Addr()) || len(ch.Rules) != 1 || *ch.QuietStart != "22:00" {
		t.Errorf("created %+v", ch)
	}
	s.operator.do("POST", "/api/v1/notifications/channels", good).problem(t, http.StatusConflict, "name")
	var hookCh notify.Channel
	decode(t, s.operator.do("POST", "/api/v1/notifications/channels", map[string]any{"name": "hook", "kind": "webhook",
		"url": hook.Srv.URL + "/in?key=k", "secret_ref": "env:HOOK_SECRET"}).expect(t, http.StatusCreated).body, &hookCh)
	if hookCh.URL != "http://"+hook.Srv.Listener.Addr().String()+"/…" || hookCh.SecretRef == nil || *hookCh.SecretRef != "env:HOOK_SECRET" {
		t.Errorf("webhook channel %+v", hookCh)
	}

	// Reads are anyone's; a channel is found by id or by name.
	var list struct{ Items []notify.Channel }
	decode(t, s.readonly.do("GET", "/api/v1/notifications/channels", nil).expect(t, http.StatusOK).body, &list)
	if len(list.Items) != 2 || list.Items[1].Name != "phone" {
		t.Errorf("list %+v", list)
	}
	s.readonly.do("GET", "/api/v1/notifications/channels/"+ch.ID, nil).expect(t, http.StatusOK)
	s.readonly.do("GET", "/api/v1/notifications/channels/phone", nil).expect(t, http.StatusOK)
	s.readonly.do("GET", "/api/v1/notifications/channels/nope", nil).expect(t, http.StatusNotFound)
	s.readonly.do("PATCH", "/api/v1/notifications/channels/phone", map[string]any{"enabled": false}).expect(t, http.StatusForbidden)

	// A bad patch changes nothing; a good one changes what it names.
	before := changes()
	s.operator.do("PATCH", "/api/v1/notifications/channels/phone", map[string]any{"quiet_start": ""}).
		problem(t, http.StatusUnprocessableEntity, "quiet_start")
	s.operator.do("PATCH", "/api/v1/notifications/channels/phone", map[string]any{"kind": "webhook"}).
		problem(t, http.StatusUnprocessableEntity, "kind")
	s.operator.do("PATCH", "/api/v1/notifications/channels/phone", map[string]any{"name": "hook"}).problem(t, http.StatusConflict, "name")
	if changes() != before {
		t.Fatal("a refused patch changed something")
	}
	var patched notify.Channel
	decode(t, s.operator.do("PATCH", "/api/v1/notifications/channels/phone", map[string]any{"quiet_start": "", "quiet_end": "",
		"url": ntfy.Ntfy("other")}).expect(t, http.StatusOK).body, &patched)
	if patched.QuietStart != nil || patched.URLRef == ch.URLRef || patched.Timezone != "Europe/Berlin" {
		t.Errorf("patched %+v", patched)
	}
	// The replaced URL is not kept (the other stored value is the webhook's URL).
	if n := e.Count(`SELECT count(*) FROM notification_secrets WHERE 'stored:' || id = $1`, ch.URLRef); n != 0 {
		t.Error("the replaced URL is still stored")
	}
	if n := e.Count(`SELECT count(*) FROM notification_secrets`); n != 2 {
		t.Errorf("%d stored URLs, want 2", n)
	}

	// Rules.
	s.operator.do("POST", "/api/v1/notifications/rules", map[string]any{"channel": "nope", "kinds": []string{"drift.found"}}).
		problem(t, http.StatusUnprocessableEntity, "channel")
	s.operator.do("POST", "/api/v1/notifications/rules", map[string]any{"channel": "hook"}).
		problem(t, http.StatusUnprocessableEntity, "kinds")
	var rule notify.Rule
	decode(t, s.operator.do("POST", "/api/v1/notifications/rules", map[string]any{"channel": "hook",
		"kinds": []string{"approval.requested", "host_key.changed"}, "tags": []string{"prod"}}).expect(t, http.StatusCreated).body, &rule)
	var rules struct{ Items []notify.Rule }
	decode(t, s.readonly.do("GET", "/api/v1/notifications/rules?channel=hook", nil).expect(t, http.StatusOK).body, &rules)
	if len(rules.Items) != 1 || rules.Items[0].ID != rule.ID || rules.Items[0].MinSeverity != "info" {
		t.Errorf("rules %+v", rules)
	}
	s.readonly.do("GET", "/api/v1/notifications/rules", nil).expect(t, http.StatusOK)
	s.readonly.do("DELETE", "/api/v1/notifications/rules/"+rule.ID, nil).expect(t, http.StatusForbidden)
	s.operator.do("DELETE", "/api/v1/notifications/rules/"+rule.ID, nil).expect(t, http.StatusNoContent)
	s.operator.do("DELETE", "/api/v1/notifications/rules/"+rule.ID, nil).expect(t, http.StatusNotFound)

	// Deliveries.
	s.readonly.do("GET", "/api/v1/notifications/deliveries?channel=phone&status=pending,failed&limit=10", nil).expect(t, http.StatusOK)
	s.readonly.do("GET", "/api/v1/notifications/deliveries?status=lost", nil).problem(t, http.StatusUnprocessableEntity, "status")
	s.readonly.do("GET", "/api/v1/notifications/deliveries?limit=0", nil).problem(t, http.StatusBadRequest, "limit")
	s.readonly.do("GET", "/api/v1/notifications/deliveries?channel=nope", nil).expect(t, http.StatusNotFound)

	// Test sends: a channel, a URL, a webhook that answers 500 (its error is redacted).
	s.operator.do("POST", "/api/v1/notifications/channels/phone/test", nil).expect(t, http.StatusOK)
	if got := ntfy.Next(t); got.Path != "/other" || got.Header.Get("Title") != "Oikos test notification" {
		t.Errorf("channel test reached %s with title %q", got.Path, got.Header.Get("Title"))
	}
	before = changes()
	s.operator.do("POST", "/api/v1/notifications/test", map[string]any{"url": ntfy.Ntfy("adhoc")}).expect(t, http.StatusOK)
	if got := ntfy.Next(t); got.Path != "/adhoc" || !strings.Contains(string(got.Body), "https://oikos.example/") {
		t.Errorf("test reached %s: %s", got.Path, got.Body)
	}
	var ok notifyapi.TestResult
	decode(t, s.operator.do("POST", "/api/v1/notifications/channels/hook/test", nil).expect(t, http.StatusOK).body, &ok)
	if !ok.OK || ok.StatusCode == nil || *ok.StatusCode != 200 {
		t.Errorf("webhook test %+v", ok)
	}
	hook.Next(t)
	hook.Status.Store(http.StatusInternalServerError)
	p := s.operator.do("POST", "/api/v1/notifications/test", map[string]any{"kind": "webhook", "url": hook.Srv.URL + "/in?key=topsecretkey",
		"secret": "0123456789abcdef0123"}).problem(t, http.StatusBadGateway, "")
	if !strings.Contains(p.Detail, "500") || strings.Contains(p.Detail, "topsecretkey") {
		t.Errorf("502 detail %q", p.Detail)
	}
	s.operator.do("POST", "/api/v1/notifications/test", map[string]any{"url": "ntfyy://x"}).problem(t, http.StatusUnprocessableEntity, "url")
	s.operator.do("POST", "/api/v1/notifications/test", map[string]any{"url_ref": "env:NOT_SET"}).
		problem(t, http.StatusUnprocessableEntity, "url_ref")
	if changes() != before || e.Count(`SELECT count(*) FROM notification_deliveries`) != 0 {
		t.Error("a test send stored something")
	}

	// Deleting: the channel, its rules, its stored URL.
	s.operator.do("DELETE", "/api/v1/notifications/channels/phone", nil).expect(t, http.StatusNoContent)
	s.readonly.do("GET", "/api/v1/notifications/channels/phone", nil).expect(t, http.StatusNotFound)
	if n := e.Count(`SELECT count(*) FROM notification_secrets WHERE 'stored:' || id = $1`, patched.URLRef); n != 0 {
		t.Error("the deleted channel's URL is still stored")
	}
	for action, want := range map[string]int{"notification_channel.create": 2, "notification_channel.update": 1,
		"notification_channel.delete": 1, "notification_rule.create": 1, "notification_rule.delete": 1} {
		if n := e.Count(`SELECT count(*) FROM audit_log a JOIN events v ON v.correlation_id = a.correlation_id AND v.actor = a.actor
			WHERE a.action = $1 AND a.actor = 'op' AND a.method <> ''`, action); n != want {
			t.Errorf("%s: %d audit rows with their event, want %d", action, n, want)
		}
	}

	// Deliveries as they are listed, sent and pending after a failed attempt, match the spec.
	e.Retry = []time.Duration{time.Hour}
	sink, failing := newReceiver(t), newReceiver(t)
	failing.Status.Store(http.StatusServiceUnavailable)
	for _, c := range []map[string]any{
		{"name": "sink", "url": sink.Ntfy("sink")},
		{"name": "failing", "kind": "webhook", "url": failing.Srv.URL, "secret_ref": "env:HOOK_SECRET"},
	} {
		c["rules"] = []map[string]any{{"kinds": []string{"approval.requested"}}}
		s.operator.do("POST", "/api/v1/notifications/channels", c).expect(t, http.StatusCreated)
	}
	e.Start()
	e.AppendEvent("approval.requested", "", map[string]any{"approval_id": "a-1", "execution_id": "x-1", "target": "lxc:web",
		"action": "run", "command": "systemctl restart caddy", "risk_class": "config_mutation"})
	e.Outcome(of("sink", notifyworker.ResultSent))
	e.Outcome(of("failing", notifyworker.ResultRetry))
	var page struct{ Items []notify.Delivery }
	decode(t, s.readonly.do("GET", "/api/v1/notifications/deliveries", nil).expect(t, http.StatusOK).body, &page)
	if len(page.Items) != 2 {
		t.Fatalf("%d deliveries listed", len(page.Items))
	}
	for _, d := range page.Items {
		switch {
		case d.Channel == "sink" && d.Status == "sent" && d.SentAt != nil && len(d.Attempts) == 1 && d.Attempts[0].OK:
		case d.Channel == "failing" && d.Status == "pending" && d.NextAttemptAt != nil && len(d.Attempts) == 1 &&
			d.Attempts[0].StatusCode != nil && *d.Attempts[0].StatusCode == 503 && d.LastError != nil:
		default:
			t.Errorf("delivery %+v", d)
		}
	}
	decode(t, s.readonly.do("GET", "/api/v1/notifications/deliveries?channel=failing&status=pending&limit=1", nil).
		expect(t, http.StatusOK).body, &page)
	if len(page.Items) != 1 || page.Items[0].Channel != "failing" {
		t.Errorf("filtered: %+v", page.Items)
	}
	var first, second struct {
		Items      []notify.Delivery
		NextCursor *string `json:"next_cursor"`
	}
	decode(t, s.readonly.do("GET", "/api/v1/notifications/deliveries?limit=1", nil).expect(t, http.StatusOK).body, &first)
	if len(first.Items) != 1 || first.NextCursor == nil {
		t.Fatalf("first page %+v", first)
	}
	decode(t, s.readonly.do("GET", "/api/v1/notifications/deliveries?limit=1&cursor="+*first.NextCursor, nil).
		expect(t, http.StatusOK).body, &second)
	if len(second.Items) != 1 || second.NextCursor != nil || second.Items[0].ID == first.Items[0].ID {
		t.Errorf("second page %+v", second)
	}
	s.readonly.do("GET", "/api/v1/notifications/deliveries?cursor=bm90LWEtdXVpZA", nil).problem(t, http.StatusBadRequest, "cursor")
}

// Every notification route is an operation of openapi.yaml, and every notification operation
// of the spec is a route (httpapi's TestSpecCoversEveryRoute checks the whole server).
func TestRoutesMatchTheSpec(t *testing.T) {
	t.Parallel()
	inSpec := map[string]bool{}
	for op := range apitest.SpecOperations(t) {
		if _, path, _ := strings.Cut(op, " "); strings.HasPrefix(path, "/api/v1/notifications") {
			inSpec[op] = true
		}
	}
	routes := notifyapi.New(notifyapi.Deps{Service: notify.NewService(notify.ServiceOptions{})}).Routes()
	served := map[string]bool{}
	for _, r := range routes {
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if strings.HasPrefix(p, ":") {
				parts[i] = "{" + p[1:] + "}"
			}
		}
		op := r.Method + " /api/v1" + strings.Join(parts, "/")
		served[op] = true
		if !inSpec[op] {
			t.Errorf("route %s is not in openapi.yaml", op)
		}
	}
	for op := range inSpec {
		if !served[op] {
			t.Errorf("openapi.yaml has %s, which notify does not serve", op)
		}
	}
	if len(served) != 11 {
		t.Errorf("%d routes", len(served))
	}
}
