package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// signIn posts a token to /api/v1/session from the api's own page and returns the response
// and the session cookie it set ("" when none).
func signIn(t *testing.T, e *env, token string, headers ...string) (resp, string) {
	t.Helper()
	h := append([]string{"Origin", e.ts.URL}, headers...)
	r := e.anon.do("POST", "/api/v1/session", map[string]string{"token": token}, h...)
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "oikos_session" {
			return r, c.Value
		}
	}
	return r, ""
}

func countRows(t *testing.T, e *env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSessionSignIn: a token becomes an HttpOnly SameSite=Strict cookie that stands for it;
// the sign-in is audited and emitted, and neither record holds the cookie's secret.
func TestSessionSignIn(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	r, secret := signIn(t, e, e.operator.token)
	r.expect(t, 200)
	if secret == "" {
		t.Fatalf("no oikos_session cookie in %v", r.Header.Values("Set-Cookie"))
	}
	sc := r.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	if strings.Contains(sc, "Secure") {
		t.Errorf("a plain-HTTP sign-in set a Secure cookie (the browser would drop it): %q", sc)
	}
	var v struct {
		Name, Role string
		ExpiresAt  time.Time `json:"expires_at"`
	}
	r.json(t, &v)
	if v.Name != "op" || v.Role != "operator" || time.Until(v.ExpiresAt) < 11*time.Hour {
		t.Errorf("session %+v, want op/operator expiring in about 12h", v)
	}
	if n := countRows(t, e, `SELECT count(*) FROM audit_log WHERE action = 'session.create' AND actor = 'op'`); n != 1 {
		t.Errorf("%d session.create audit rows, want 1", n)
	}
	if n := countRows(t, e, `SELECT count(*) FROM events WHERE type = 'session.signed_in' AND actor = 'op'`); n != 1 {
		t.Errorf("%d session.signed_in events, want 1", n)
	}
	if n := countRows(t, e, `SELECT count(*) FROM audit_log WHERE after::text LIKE '%' || $1 || '%'`, secret); n != 0 {
		t.Errorf("the cookie's secret is in the audit log")
	}
	if n := countRows(t, e, `SELECT count(*) FROM web_sessions WHERE secret_hash = $1`, secret); n != 0 {
		t.Errorf("the cookie's secret is stored in clear")
	}

	// Behind a TLS-terminating proxy the cookie is Secure.
	r, _ = signIn(t, e, e.operator.token, "X-Forwarded-Proto", "https", "Origin", strings.Replace(e.ts.URL, "http://", "https://", 1))
	if sc := r.expect(t, 200).Header.Get("Set-Cookie"); !strings.Contains(sc, "Secure") {
		t.Errorf("a sign-in over TLS set %q, without Secure", sc)
	}
}

// TestSessionSignInRefusals: bad tokens and foreign pages open nothing and write nothing.
func TestSessionSignInRefusals(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	cases := []struct {
		name    string
		body    any
		headers []string
		status  int
		field   string
	}{
		{"unknown token", map[string]string{"token": "oik_not-a-real-token-at-all-0123456789"}, []string{"Origin", e.ts.URL}, 401, ""},
		{"empty token", map[string]string{"token": "  "}, []string{"Origin", e.ts.URL}, 422, "token"},
		{"unknown field", map[string]string{"secret": "x"}, []string{"Origin", e.ts.URL}, 422, "secret"},
		{"not JSON", "token=abc", []string{"Origin", e.ts.URL, "Content-Type", "application/x-www-form-urlencoded"}, 415, ""},
		{"foreign page (login CSRF)", map[string]string{"token": e.operator.token}, []string{"Origin", "http://evil.example"}, 403, ""},
		{"no origin at all", map[string]string{"token": e.operator.token}, nil, 403, ""},
	}
	for _, c := range cases {
		r := e.anon.do("POST", "/api/v1/session", c.body, c.headers...)
		r.expect(t, c.status)
		if p := r.problem(t); p.Field != c.field {
			t.Errorf("%s: field %q, want %q (%s)", c.name, p.Field, c.field, p.Detail)
		}
		if len(r.Header.Values("Set-Cookie")) != 0 {
			t.Errorf("%s: a refused sign-in set a cookie", c.name)
		}
	}
	if n := countRows(t, e, `SELECT count(*) FROM web_sessions`); n != 0 {
		t.Errorf("%d sessions after refused sign-ins", n)
	}
	if n := countRows(t, e, `SELECT count(*) FROM audit_log WHERE action LIKE 'session.%'`); n != 0 {
		t.Errorf("%d audit rows after refused sign-ins", n)
	}
}

// TestSessionCookieAuthenticates: the cookie reads like the token; a change made with it
// must come from the api's own origin, and a readonly session changes nothing.
func TestSessionCookieAuthenticates(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	_, op := signIn(t, e, e.operator.token)
	_, ro := signIn(t, e, e.readonly.token)
	cookie := func(s string) string { return "oikos_session=" + s }

	e.anon.do("GET", "/api/v1/entities", nil, "Cookie", cookie(op)).expect(t, 200)
	var cur struct {
		Name      string     `json:"name"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	e.anon.do("GET", "/api/v1/session", nil, "Cookie", cookie(op)).expect(t, 200).json(t, &cur)
	if cur.Name != "op" || cur.ExpiresAt == nil {
		t.Errorf("GET /session with the cookie: %+v", cur)
	}
	e.operator.do("GET", "/api/v1/session", nil).expect(t, 200).json(t, &cur)
	if cur.ExpiresAt != nil {
		t.Errorf("GET /session with a bearer token has an expiry: %+v", cur)
	}

	body := map[string]any{"type": "host", "name": "from-browser", "attributes": map[string]any{}}
	before := countRows(t, e, `SELECT count(*) FROM entities`)
	for _, h := range [][]string{
		{"Cookie", cookie(op)},
		{"Cookie", cookie(op), "Origin", "http://evil.example"},
		{"Cookie", cookie(op), "Sec-Fetch-Site", "cross-site"},
		{"Cookie", cookie(ro), "Origin", e.ts.URL},
	} {
		r := e.anon.do("POST", "/api/v1/entities", body, h...)
		r.expect(t, 403)
	}
	if n := countRows(t, e, `SELECT count(*) FROM entities`); n != before {
		t.Fatalf("refused cookie mutations changed the graph: %d entities, was %d", n, before)
	}
	e.anon.do("POST", "/api/v1/entities", body, "Cookie", cookie(op), "Origin", e.ts.URL).expect(t, 201)
	e.anon.do("GET", "/api/v1/entities/host:from-browser", nil, "Cookie", cookie(ro)).expect(t, 200)
	// A browser without Origin on a same-origin request vouches with Sec-Fetch-Site.
	e.anon.do("PATCH", "/api/v1/entities/host:from-browser", map[string]any{"attributes": map[string]any{"note": "x"}},
		"Cookie", cookie(op), "Sec-Fetch-Site", "same-origin").expect(t, 200)
	// A bearer token needs no Origin: the check is the cookie's.
	e.operator.do("PATCH", "/api/v1/entities/host:from-browser", map[string]any{"attributes": map[string]any{"note": "y"}}).expect(t, 200)
}

// TestSessionEnds: sign-out, the token's revocation and the expiry each end a session, with a
// 401 that says which.
func TestSessionEnds(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	ctx := context.Background()
	get := func(secret string) resp {
		return e.anon.do("GET", "/api/v1/entities", nil, "Cookie", "oikos_session="+secret)
	}

	_, s := signIn(t, e, e.operator.token)
	r := e.anon.do("DELETE", "/api/v1/session", nil, "Cookie", "oikos_session="+s, "Origin", e.ts.URL).expect(t, 204)
	if sc := r.Header.Get("Set-Cookie"); !strings.Contains(sc, "oikos_session=;") || !strings.Contains(sc, "Max-Age=0") {
		t.Errorf("sign-out did not clear the cookie: %q", sc)
	}
	if p := get(s).expect(t, 401).problem(t); !strings.Contains(p.Detail, "signed out") {
		t.Errorf("a signed-out cookie: %q", p.Detail)
	}
	if n := countRows(t, e, `SELECT count(*) FROM audit_log WHERE action = 'session.revoke'`); n != 1 {
		t.Errorf("%d session.revoke rows, want 1", n)
	}
	// Signing out again, or with no session, is still a 204 (a stale tab can always sign out).
	e.anon.do("DELETE", "/api/v1/session", nil, "Cookie", "oikos_session="+s, "Origin", e.ts.URL).expect(t, 204)
	e.anon.do("DELETE", "/api/v1/session", nil).expect(t, 204)
	// A foreign page cannot sign the operator out.
	_, s2 := signIn(t, e, e.operator.token)
	e.anon.do("DELETE", "/api/v1/session", nil, "Cookie", "oikos_session="+s2, "Origin", "http://evil.example").expect(t, 403)
	get(s2).expect(t, 200)

	// Expired: the row's expiry is in the past.
	if _, err := e.pool.Exec(ctx, `UPDATE web_sessions SET expires_at = now() - interval '1 second' WHERE revoked_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	if p := get(s2).expect(t, 401).problem(t); !strings.Contains(p.Detail, "expired") {
		t.Errorf("an expired cookie: %q", p.Detail)
	}

	// Revoked token: its sessions die with it.
	_, s3 := signIn(t, e, e.readonly.token)
	get(s3).expect(t, 200)
	if _, err := e.pool.Exec(ctx, `UPDATE api_tokens SET revoked_at = now() WHERE name = 'viewer'`); err != nil {
		t.Fatal(err)
	}
	if p := get(s3).expect(t, 401).problem(t); !strings.Contains(p.Detail, "revoked") {
		t.Errorf("a session of a revoked token: %q", p.Detail)
	}
	if p := get("made-up").expect(t, 401).problem(t); !strings.Contains(p.Detail, "not known") {
		t.Errorf("a made-up cookie: %q", p.Detail)
	}
}

// TestListKnowledge: the knowledge base's entries with titles, by kind, paged in slug order.
func TestListKnowledge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, d := range []struct{ slug, title string }{
		{"document:b-notes", "Notes"}, {"runbook:a-restart", "Restart things"}, {"document:a-overview", "Lab overview"},
	} {
		e.agent.do("PUT", "/api/v1/knowledge/"+d.slug, map[string]any{"title": d.title, "body": "x", "tags": []string{"t"}}).expect(t, 201)
	}
	var page struct {
		Items []struct {
			Slug, Kind, Title string
			Tags              []string
		}
		NextCursor *string `json:"next_cursor"`
	}
	e.readonly.do("GET", "/api/v1/knowledge?limit=2", nil).expect(t, 200).json(t, &page)
	if len(page.Items) != 2 || page.Items[0].Slug != "document:a-overview" || page.Items[0].Title != "Lab overview" || page.NextCursor == nil {
		t.Fatalf("first page %+v", page)
	}
	e.readonly.do("GET", "/api/v1/knowledge?limit=2&cursor="+*page.NextCursor, nil).expect(t, 200).json(t, &page)
	if len(page.Items) != 1 || page.Items[0].Slug != "runbook:a-restart" || page.Items[0].Kind != "runbook" || page.NextCursor != nil {
		t.Fatalf("second page %+v", page)
	}
	e.readonly.do("GET", "/api/v1/knowledge?kind=runbook", nil).expect(t, 200).json(t, &page)
	if len(page.Items) != 1 || page.Items[0].Title != "Restart things" {
		t.Fatalf("runbooks %+v", page)
	}
	if p := e.readonly.do("GET", "/api/v1/knowledge?kind=novel", nil).expect(t, 400).problem(t); p.Field != "kind" {
		t.Errorf("bad kind: field %q", p.Field)
	}
}
