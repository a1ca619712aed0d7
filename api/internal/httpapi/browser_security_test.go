package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/api/internal/ratelimit"
	apirequest "github.com/oikos-hq/oikos/api/internal/request"
)

// tableCounts is the row count of every table of the schema, the migrations' own aside: what
// "changes nothing" is compared with, exactly.
func tableCounts(t *testing.T, e *env) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := e.pool.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> 'goose_db_version' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, n := range names {
		out[n] = countRows(t, e, `SELECT count(*) FROM "`+n+`"`)
	}
	// Revoking a session changes a row, not a count.
	out["web_sessions (live)"] = countRows(t, e, `SELECT count(*) FROM web_sessions WHERE revoked_at IS NULL`)
	return out
}

func sameCounts(t *testing.T, what string, before, after map[string]int) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s has %d rows, had %d", what, k, after[k], v)
		}
	}
	if len(before) < 10 {
		t.Errorf("only %d tables counted", len(before))
	}
}

var routeParam = regexp.MustCompile(`:[a-z_]+`)

// TestCrossOriginMutationsRefused: every route of the api that changes something, sent with
// the operator's session cookie from a page that is not the dashboard's (another port of
// loopback, another site, a form post, no Origin at all), is a 403 of type cross-origin whose
// detail names the header, and not one row of any table changes. The same cookie from the
// dashboard's own origin works, and a bearer token is not asked for an Origin at all.
func TestCrossOriginMutationsRefused(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222, "user": "root"})
	_, op := signIn(t, e, e.operator.token)
	cookie := "oikos_session=" + op
	hostile := "http://127.0.0.1:1" // another port of the same host: same-site, so the cookie rides along
	attempts := []struct {
		name    string
		headers []string
		says    string
	}{
		{"fetch from another port", []string{"Origin", hostile, "Sec-Fetch-Site", "same-site"}, "Sec-Fetch-Site: same-site"},
		{"Origin of another port alone", []string{"Origin", hostile}, hostile},
		{"form post from another site", []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site",
			"Content-Type", "application/x-www-form-urlencoded"}, "Sec-Fetch-Site: cross-site"},
		{"Referer of another port", []string{"Referer", hostile + "/attack.html"}, "Referer"},
		{"no Origin at all", nil, "no Origin, Sec-Fetch-Site or Referer"},
	}
	before := tableCounts(t, e)
	n := 0
	for _, rt := range e.srv.Routes() {
		switch rt.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			continue
		}
		if !strings.HasPrefix(rt.Path, "/api/v1/") {
			continue
		}
		path := routeParam.ReplaceAllStringFunc(rt.Path, func(p string) string {
			if p == ":ref" {
				return "proxmox-host:atlas"
			}
			return "00000000-0000-0000-0000-000000000001"
		})
		for _, a := range attempts {
			h := append([]string{"Cookie", cookie}, a.headers...)
			p := e.anon.do(rt.Method, path, map[string]any{}, h...).expect(t, http.StatusForbidden).problem(t)
			if p.Type != "urn:oikos:problem:cross-origin" || !strings.Contains(p.Detail, a.says) {
				t.Errorf("%s %s, %s: %s %q; want cross-origin naming %q", rt.Method, path, a.name, p.Type, p.Detail, a.says)
			}
			n++
		}
	}
	t.Logf("%d cross-origin attempts refused (%d mutating routes, %d shapes each)", n, n/len(attempts), len(attempts))
	if n < 5*25 {
		t.Fatalf("only %d refused attempts: the route table is not what it was", n)
	}
	sameCounts(t, "after the refused cross-origin changes", before, tableCounts(t, e))
	// The session survived (the sign-out was refused too) and works from the dashboard.
	e.anon.do("GET", "/api/v1/session", nil, "Cookie", cookie).expect(t, 200)
	body := map[string]any{"type": "host", "name": "from-dashboard", "attributes": map[string]any{}}
	e.anon.do("POST", "/api/v1/entities", body, "Cookie", cookie, "Origin", e.ts.URL, "Sec-Fetch-Site", "same-origin").expect(t, 201)
	e.anon.do("PATCH", "/api/v1/entities/host:from-dashboard", map[string]any{"attributes": map[string]any{"note": "x"}},
		"Cookie", cookie, "Referer", e.ts.URL+"/entities/host:from-dashboard").expect(t, 200)
	// Bearer clients (CLI, agent, MCP) send no Origin, or any: not the cookie's check.
	e.operator.do("PATCH", "/api/v1/entities/host:from-dashboard", map[string]any{"attributes": map[string]any{"note": "y"}},
		"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site").expect(t, 200)
	if r := e.agent.do("POST", "/api/v1/chat", map[string]any{"message": "hi"}, "Origin", hostile); r.Status == http.StatusForbidden {
		t.Errorf("the chat's bearer POST was refused: %s", r.Body)
	}
	e.anon.do("DELETE", "/api/v1/session", nil, "Cookie", cookie, "Origin", e.ts.URL).expect(t, 204)
}

// TestSessionCookieOverTLS: over TLS the session cookie is Secure, HttpOnly and
// SameSite=Strict, and so is the cookie that clears it at sign-out; over plain HTTP it is
// not Secure (TestSessionSignIn).
func TestSessionCookieOverTLS(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	ts := httptest.NewTLSServer(e.srv)
	t.Cleanup(ts.Close)
	send := func(method, body string, headers ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+"/api/v1/session", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		r, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return r
	}
	attrs := func(sc string) map[string]bool {
		m := map[string]bool{}
		for _, p := range strings.Split(sc, ";") {
			k, _, _ := strings.Cut(strings.TrimSpace(p), "=")
			m[k] = true
		}
		return m
	}
	// The page over TLS is https://..., so its Origin is.
	r := send("POST", `{"token":"`+e.operator.token+`"}`, "Origin", ts.URL)
	if r.StatusCode != 200 {
		t.Fatalf("sign-in over TLS: %d", r.StatusCode)
	}
	sc := r.Header.Get("Set-Cookie")
	a := attrs(sc)
	for _, want := range []string{"Secure", "HttpOnly", "SameSite", "Path"} {
		if !a[want] {
			t.Errorf("Set-Cookie over TLS %q lacks %s", sc, want)
		}
	}
	if !strings.Contains(sc, "SameSite=Strict") {
		t.Errorf("Set-Cookie %q is not SameSite=Strict", sc)
	}
	var secret string
	for _, c := range r.Cookies() {
		if c.Name == "oikos_session" {
			secret = c.Value
		}
	}
	// An http:// page may not sign out what is served over TLS.
	if r := send("DELETE", "", "Cookie", "oikos_session="+secret, "Origin", strings.Replace(ts.URL, "https://", "http://", 1)); r.StatusCode != 403 {
		t.Errorf("sign-out from the http:// origin of a TLS api: %d, want 403", r.StatusCode)
	}
	r = send("DELETE", "", "Cookie", "oikos_session="+secret, "Origin", ts.URL)
	if r.StatusCode != 204 {
		t.Fatalf("sign-out over TLS: %d", r.StatusCode)
	}
	if a := attrs(r.Header.Get("Set-Cookie")); !a["Secure"] || !a["HttpOnly"] || !a["Max-Age"] {
		t.Errorf("clearing Set-Cookie over TLS %q", r.Header.Get("Set-Cookie"))
	}
}

// TestSignInRateLimit: sign-in attempts, good or bad, are limited per client address with a
// 429 problem and Retry-After; a refused attempt opens nothing and audits nothing. The address
// is the connection's peer: an X-Forwarded-For from an untrusted peer changes nothing; from a
// trusted proxy, the client it names has its own bucket. Bearer requests are not limited.
func TestSignInRateLimit(t *testing.T) {
	t.Parallel()
	rate := ratelimit.Rate{N: 3, Per: time.Minute}
	// The limiter's clock stands still, so the wait it says is exact however slow the run.
	still := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return still }
	e := newMountedEnv(t, mountedOptions{limit: ratelimit.New(rate, 0).WithClock(clock)})
	bad := "oik_not-a-real-token-at-all-0123456789"
	if r, _ := signIn(t, e, bad); r.Status != 401 {
		t.Fatalf("a bad token: %d", r.Status)
	}
	if r, _ := signIn(t, e, e.operator.token); r.Status != 200 {
		t.Fatalf("a good token: %d", r.Status)
	}
	if r, _ := signIn(t, e, bad); r.Status != 401 {
		t.Fatalf("a bad token: %d", r.Status)
	}
	before := tableCounts(t, e)
	// The fourth attempt in a minute, with the right token even, and one with a made-up
	// X-Forwarded-For (the peer is no trusted proxy): refused, saying when to come back.
	for _, h := range [][]string{nil, {"X-Forwarded-For", "203.0.113.9"}} {
		r, secret := signIn(t, e, e.operator.token, h...)
		p := r.expect(t, http.StatusTooManyRequests).problem(t)
		if secret != "" {
			t.Errorf("a refused sign-in set a cookie")
		}
		if ra := r.Header.Get("Retry-After"); ra != "20" {
			t.Errorf("Retry-After %q, want 20 (one attempt refills every 60s/3)", ra)
		}
		if p.Type != "urn:oikos:problem:rate-limited" || !strings.Contains(p.Detail, "at most 3 per 1m;") ||
			!strings.Contains(p.Detail, "127.0.0.1") || !strings.Contains(p.Detail, "try again in 20s") {
			t.Errorf("429 problem %s %q", p.Type, p.Detail)
		}
	}
	sameCounts(t, "after the refused sign-ins", before, tableCounts(t, e))
	// The limit is the sign-in's: bearer requests, and the api's other routes, go on.
	e.operator.do("GET", "/api/v1/entities", nil).expect(t, 200)

	// Behind a trusted proxy each client it names has its own bucket; hops a client wrote
	// itself on the left of the header do not get it a fresh one.
	site := &apirequest.Site{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	p := newMountedEnv(t, mountedOptions{site: site, limit: ratelimit.New(rate, 0).WithClock(clock)})
	for i := 0; i < 3; i++ {
		r, _ := signIn(t, p, p.operator.token, "X-Forwarded-For", "198.51.100.1")
		r.expect(t, 200)
	}
	r, _ := signIn(t, p, p.operator.token, "X-Forwarded-For", "6.6.6.6, 198.51.100.1")
	if pr := r.expect(t, 429).problem(t); !strings.Contains(pr.Detail, "198.51.100.1") {
		t.Errorf("the 429 names %q, not the proxied client", pr.Detail)
	}
	r, _ = signIn(t, p, p.operator.token, "X-Forwarded-For", "198.51.100.2")
	r.expect(t, 200)
}

// TestSecurityHeaders: every answer of the api, JSON and problem alike, forbids MIME
// sniffing and framing and keeps the Referer to the api's own origin, under a policy that
// runs nothing; the dashboard's page carries the app's policy instead (webui's tests read
// it directive by directive).
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	for _, r := range []resp{
		e.operator.do("GET", "/api/v1/entities", nil).expect(t, 200),
		e.anon.do("GET", "/api/v1/entities", nil).expect(t, 401),
		e.operator.do("GET", "/api/v1/no-such-thing", nil).expect(t, 404),
		e.operator.do("POST", "/api/v1/entities", "{", "Content-Type", "application/json").expect(t, 400),
	} {
		for k, want := range map[string]string{
			"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
			"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
		} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("%s: %q, want %q", k, got, want)
			}
		}
	}
	page, err := http.Get(e.ts.URL + "/entities/host:atlas")
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("the page: %d %s", page.StatusCode, page.Header.Get("Content-Type"))
	}
	csp := page.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe-eval") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("the page's policy: %q", csp)
	}
	if page.Header.Get("X-Content-Type-Options") != "nosniff" || page.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the page's headers: %v", page.Header)
	}
}
