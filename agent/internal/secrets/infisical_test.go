package secrets

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/rs/zerolog"
)

const (
	testClientID     = "3f6c1a52-7a0e-4b8e-9d55-2c1f0e6b9a11"
	testClientSecret = "c7e1b7c2d5a94e0b8f2e6f1d3a9c4b5e6d7f8a9b0c1d2e3f"
	testProjectID    = "6578a9b1c2d3e4f5a6b7c8d9"
)

// fakeInfisical is a loopback Infisical answering the API's real shapes: universal-auth
// login, /api/v4/secrets and the legacy /api/v3/secrets/raw.
type fakeInfisical struct {
	srv *httptest.Server

	mu                    sync.Mutex
	env                   string
	secrets               map[string]string
	hidden                map[string]bool // values the identity may not read
	expiresIn             int64
	logins                int
	valid                 map[string]bool
	legacyOnly            bool // the server predates /api/v4/secrets
	ignoreViewSecretValue bool
	echoLoginBody         bool // a careless server quoting the request in its error
	requests              []string
	rawQueries            []string
}

// newFakeInfisical starts the fake after setup has configured it; later changes take f.mu.
func newFakeInfisical(t *testing.T, setup ...func(*fakeInfisical)) *fakeInfisical {
	t.Helper()
	f := &fakeInfisical{env: "prod", expiresIn: 7200, valid: map[string]bool{}, secrets: map[string]string{}, hidden: map[string]bool{}}
	for _, s := range setup {
		s(f)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiErr(w http.ResponseWriter, status int, name, msg string) {
	writeJSON(w, status, map[string]any{"reqId": "req-test", "statusCode": status, "message": msg, "error": name})
}

func (f *fakeInfisical) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/auth/universal-auth/login":
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			ClientID     string `json:"clientId"`
			ClientSecret string `json:"clientSecret"`
		}
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") || json.Unmarshal(raw, &body) != nil {
			apiErr(w, http.StatusBadRequest, "Bad Request", "body must be JSON")
			return
		}
		if f.echoLoginBody {
			apiErr(w, http.StatusBadRequest, "Bad Request", "could not process "+string(raw))
			return
		}
		if body.ClientID != testClientID || body.ClientSecret != testClientSecret {
			apiErr(w, http.StatusUnauthorized, "Unauthorized", "Invalid credentials")
			return
		}
		f.logins++
		tok := fmt.Sprintf("eyJ.test-token-%d", f.logins)
		f.valid[tok] = true
		writeJSON(w, http.StatusOK, map[string]any{"accessToken": tok, "expiresIn": f.expiresIn, "accessTokenMaxTTL": 2592000, "tokenType": "Bearer"})
	case r.Method == http.MethodGet && (r.URL.Path == "/api/v4/secrets" || r.URL.Path == "/api/v3/secrets/raw"):
		project := r.URL.Query().Get("projectId")
		if r.URL.Path == "/api/v3/secrets/raw" {
			project = r.URL.Query().Get("workspaceId")
		} else if f.legacyOnly {
			apiErr(w, http.StatusNotFound, "Not Found", "Route GET:/api/v4/secrets?"+r.URL.RawQuery+" not found")
			return
		}
		f.rawQueries = append(f.rawQueries, r.URL.RawQuery)
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !f.valid[tok] {
			apiErr(w, http.StatusUnauthorized, "UnauthorizedError", "Token missing or invalid")
			return
		}
		q := r.URL.Query()
		if project != testProjectID {
			apiErr(w, http.StatusNotFound, "NotFound", fmt.Sprintf("Project with ID '%s' not found", project))
			return
		}
		if q.Get("environment") != f.env {
			apiErr(w, http.StatusNotFound, "NotFound", fmt.Sprintf("Environment with slug '%s' in project with ID '%s' not found", q.Get("environment"), project))
			return
		}
		if q.Get("secretPath") != "/" {
			apiErr(w, http.StatusBadRequest, "BadRequest", "unexpected secretPath")
			return
		}
		view := q.Get("viewSecretValue") != "false" || f.ignoreViewSecretValue
		keys := make([]string, 0, len(f.secrets))
		for k := range f.secrets {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		list := []map[string]any{}
		for i, k := range keys {
			value, hidden := f.secrets[k], false
			if !view || f.hidden[k] {
				value, hidden = "<hidden-by-infisical>", true
			}
			list = append(list, map[string]any{
				"id": fmt.Sprintf("id-%d", i), "_id": fmt.Sprintf("id-%d", i), "workspace": testProjectID,
				"environment": f.env, "version": 1, "type": "shared", "secretKey": k, "secretValue": value,
				"secretValueHidden": hidden, "secretComment": "", "secretPath": "/", "skipMultilineEncoding": false,
				"createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
				"isRotatedSecret": false, "rotationId": nil, "secretMetadata": []any{}, "tags": []any{},
			})
		}
		writeJSON(w, http.StatusOK, map[string]any{"secrets": list, "imports": []any{}})
	default:
		apiErr(w, http.StatusNotFound, "Not Found", "Route "+r.Method+":"+r.URL.Path+" not found")
	}
}

// backend configures an Infisical backend at the fake through FromEnv.
func (f *fakeInfisical) backend(t *testing.T, extra ...string) *infisical {
	t.Helper()
	pairs := append([]string{
		"OIKOS_INFISICAL_URL", f.srv.URL, "OIKOS_INFISICAL_CLIENT_ID", testClientID,
		"OIKOS_INFISICAL_CLIENT_SECRET", testClientSecret, "OIKOS_INFISICAL_PROJECT_ID", testProjectID,
	}, extra...)
	getenv, environ := env(pairs...)
	b, err := FromEnv(getenv, environ)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	inf, ok := b.(*infisical)
	if !ok {
		t.Fatalf("FromEnv picked %s", b.Name())
	}
	return inf
}

func (f *fakeInfisical) loginCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logins
}

func (f *fakeInfisical) revokeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.valid)
}

func (f *fakeInfisical) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *fakeInfisical) queries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.rawQueries...)
}

func (f *fakeInfisical) sawViewSecretValue(v string) bool {
	return slices.ContainsFunc(f.queries(), func(q string) bool { return strings.Contains(q, "viewSecretValue="+v) })
}

func TestInfisicalListAndResolve(t *testing.T) {
	t.Parallel()
	f := newFakeInfisical(t, func(f *fakeInfisical) {
		f.secrets = map[string]string{"GRAFANA_TOKEN": "glsa_live_value", "proxmox_api": "PVEAPIToken=x", "LOCKED": "cannot read"}
		f.hidden["LOCKED"] = true
	})
	b := f.backend(t)
	if b.Name() != "infisical" {
		t.Errorf("Name %q", b.Name())
	}
	names, err := b.List(t.Context())
	if want := []string{"grafana_token", "locked", "proxmox_api"}; err != nil || !slices.Equal(names, want) {
		t.Fatalf("List = %v, %v; want %v", names, err, want)
	}
	for name, want := range map[string]string{"grafana_token": "glsa_live_value", "GRAFANA_TOKEN": "glsa_live_value", "proxmox_api": "PVEAPIToken=x"} {
		if v, err := b.Resolve(t.Context(), name); err != nil || v != want {
			t.Errorf("Resolve(%q) = %q, %v", name, v, err)
		}
	}
	_, err = b.Resolve(t.Context(), "missing")
	if want := `secret not found: no secret named "missing" in Infisical project ` + testProjectID + `, environment prod, path /`; !errors.Is(err, ErrNotFound) || err.Error() != want {
		t.Errorf("missing: %v", err)
	}
	if _, err := b.Resolve(t.Context(), "locked"); err == nil || !strings.Contains(err.Error(), "Infisical hides the value of LOCKED") {
		t.Errorf("hidden: %v", err)
	}
	if n := f.loginCount(); n != 1 {
		t.Errorf("%d logins; the token is cached", n)
	}
	for _, q := range f.queries() {
		if !strings.Contains(q, "projectId="+testProjectID) || !strings.Contains(q, "environment=prod") || !strings.Contains(q, "secretPath=%2F") {
			t.Errorf("query %q", q)
		}
	}
	if !f.sawViewSecretValue("false") || !f.sawViewSecretValue("true") {
		t.Errorf("List should not ask for values and Resolve should: %v", f.queries())
	}
	// Two keys differing only in case are ambiguous.
	f.mu.Lock()
	f.secrets["grafana_TOKEN"] = "other"
	f.mu.Unlock()
	if _, err := b.Resolve(t.Context(), "grafana_token"); err == nil || !strings.Contains(err.Error(), "ambiguous: Infisical has GRAFANA_TOKEN and grafana_TOKEN") {
		t.Errorf("ambiguous: %v", err)
	}
}

// The access token is reused until shortly before it expires, shared by concurrent
// callers, and replaced when the server refuses it.
func TestInfisicalTokenCaching(t *testing.T) {
	t.Parallel()
	f := newFakeInfisical(t, func(f *fakeInfisical) {
		f.secrets = map[string]string{"A": "1"}
		f.expiresIn = 600 // renewed a minute early: used for 540 s
	})
	b := f.backend(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	b.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	advance := func(d time.Duration) { clockMu.Lock(); now = now.Add(d); clockMu.Unlock() }

	list := func() {
		t.Helper()
		if _, err := b.List(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	list()
	advance(539 * time.Second)
	list()
	if n := f.loginCount(); n != 1 {
		t.Errorf("%d logins before expiry; want 1", n)
	}
	advance(2 * time.Second)
	list()
	if n := f.loginCount(); n != 2 {
		t.Errorf("%d logins after expiry - margin; want 2", n)
	}

	// Concurrent callers with an expired token log in once.
	advance(time.Hour)
	var wg sync.WaitGroup
	log := zerolog.New(zerolog.NewTestWriter(t))
	for range 8 {
		wg.Add(1)
		safego.Go(log, "list", func() {
			defer wg.Done()
			if err := safego.Call(func() error { _, err := b.List(t.Context()); return err }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := f.loginCount(); n != 3 {
		t.Errorf("%d logins after concurrent lists; want 3", n)
	}

	// A token the server no longer accepts is replaced once.
	f.revokeAll()
	list()
	if n := f.loginCount(); n != 4 {
		t.Errorf("%d logins after a revocation; want 4", n)
	}

	// A token without a lifetime is not cached.
	f.mu.Lock()
	f.expiresIn = 0
	f.mu.Unlock()
	advance(time.Hour)
	list()
	list()
	if n := f.loginCount(); n != 6 {
		t.Errorf("%d logins with expiresIn 0; want 6", n)
	}
}

// A server without /api/v4/secrets is asked the legacy path, and from then on only that.
func TestInfisicalLegacyServer(t *testing.T) {
	t.Parallel()
	f := newFakeInfisical(t, func(f *fakeInfisical) {
		f.secrets = map[string]string{"A": "1"}
		f.legacyOnly = true
		f.env = "staging"
	})
	b := f.backend(t, "OIKOS_INFISICAL_ENV", "staging")
	if v, err := b.Resolve(t.Context(), "a"); err != nil || v != "1" {
		t.Fatalf("Resolve: %q, %v", v, err)
	}
	if _, err := b.List(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"POST /api/v1/auth/universal-auth/login", "GET /api/v4/secrets", "GET /api/v3/secrets/raw", "GET /api/v3/secrets/raw"}
	if got := f.paths(); !slices.Equal(got, want) {
		t.Errorf("requests %v; want %v", got, want)
	}
	if q := f.queries(); len(q) != 2 || !strings.Contains(q[0], "workspaceId="+testProjectID) || !strings.Contains(q[0], "environment=staging") {
		t.Errorf("legacy queries %v", q)
	}
}

func TestInfisicalErrors(t *testing.T) {
	t.Parallel()
	f := newFakeInfisical(t)
	b := f.backend(t, "OIKOS_INFISICAL_ENV", "staging") // the server has prod only
	_, err := b.List(t.Context())
	if err == nil || !strings.Contains(err.Error(), "404 Not Found: Environment with slug 'staging' in project with ID '"+testProjectID+"' not found") {
		t.Errorf("wrong environment: %v", err)
	}

	getenv, environ := env("OIKOS_INFISICAL_URL", f.srv.URL+"/api/", "OIKOS_INFISICAL_CLIENT_ID", testClientID,
		"OIKOS_INFISICAL_CLIENT_SECRET", "wrong-secret-value", "OIKOS_INFISICAL_PROJECT_ID", testProjectID)
	wrong, err := FromEnv(getenv, environ)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.List(t.Context())
	if err == nil || !strings.Contains(err.Error(), "Infisical login at "+f.srv.URL+" (universal auth, client "+testClientID+"): 401 Unauthorized: Invalid credentials") {
		t.Errorf("wrong credentials: %v", err)
	}

	// A server quoting the request body: the client secret is scrubbed from the error.
	f2 := newFakeInfisical(t, func(f *fakeInfisical) { f.echoLoginBody = true })
	_, err = f2.backend(t).Resolve(t.Context(), "x")
	if err == nil || strings.Contains(err.Error(), testClientSecret) || !strings.Contains(err.Error(), "[secret:OIKOS_INFISICAL_CLIENT_SECRET]") {
		t.Errorf("echoed body: %v", err)
	}

	// No server at all.
	f3 := newFakeInfisical(t)
	dead := f3.backend(t)
	f3.srv.Close()
	if _, err := dead.List(t.Context()); err == nil || !strings.Contains(err.Error(), "Infisical login at "+f3.srv.URL) {
		t.Errorf("no server: %v", err)
	}
}

func TestInfisicalConfig(t *testing.T) {
	t.Parallel()
	full := []string{"OIKOS_INFISICAL_URL", "https://infisical.lan", "OIKOS_INFISICAL_CLIENT_ID", testClientID,
		"OIKOS_INFISICAL_CLIENT_SECRET", testClientSecret, "OIKOS_INFISICAL_PROJECT_ID", testProjectID}
	tests := []struct {
		name  string
		pairs []string
		want  string
	}{
		{"only the URL", full[:2], "Infisical is partly configured: OIKOS_INFISICAL_CLIENT_ID, OIKOS_INFISICAL_CLIENT_SECRET and OIKOS_INFISICAL_PROJECT_ID are not set"},
		{"no project", full[:6], "OIKOS_INFISICAL_PROJECT_ID is not set (Infisical needs OIKOS_INFISICAL_URL, OIKOS_INFISICAL_CLIENT_ID, OIKOS_INFISICAL_CLIENT_SECRET and OIKOS_INFISICAL_PROJECT_ID; OIKOS_INFISICAL_ENV defaults to prod)"},
		{"no secret", append(append([]string{}, full[:4]...), full[6:]...), "OIKOS_INFISICAL_CLIENT_SECRET is not set"},
		{"only the environment", []string{"OIKOS_INFISICAL_ENV", "dev"}, "OIKOS_INFISICAL_URL, OIKOS_INFISICAL_CLIENT_ID, OIKOS_INFISICAL_CLIENT_SECRET and OIKOS_INFISICAL_PROJECT_ID are not set"},
		{"blank counts as unset", append(append([]string{}, full[:6]...), "OIKOS_INFISICAL_PROJECT_ID", "  "), "OIKOS_INFISICAL_PROJECT_ID is not set"},
		{"both backends", append(append([]string{}, full...), "OIKOS_SECRET_X", "y"), "both Infisical (OIKOS_INFISICAL_*) and env/file secrets"},
		{"both backends, dir", append(append([]string{}, full...), "OIKOS_SECRETS_DIR", "/run/secrets"), "both Infisical"},
		{"not a URL", append([]string{"OIKOS_INFISICAL_URL", "infisical.lan"}, full[2:]...), `OIKOS_INFISICAL_URL="infisical.lan" is not an http(s) URL`},
		{"ftp", append([]string{"OIKOS_INFISICAL_URL", "ftp://infisical.lan"}, full[2:]...), "is not an http(s) URL"},
	}
	for _, tc := range tests {
		getenv, environ := env(tc.pairs...)
		b, err := FromEnv(getenv, environ)
		if b != nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: FromEnv = %v, %v; want an ErrConfig containing %q", tc.name, b, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), testClientSecret) {
			t.Errorf("%s: the error carries the client secret", tc.name)
		}
	}
	for raw, base := range map[string]string{
		"https://infisical.lan":           "https://infisical.lan",
		"https://infisical.lan/":          "https://infisical.lan",
		"https://infisical.lan/api":       "https://infisical.lan",
		"https://infisical.lan/api/":      "https://infisical.lan",
		"http://10.0.0.5:8080/infisical/": "http://10.0.0.5:8080/infisical",
	} {
		getenv, environ := env(append([]string{"OIKOS_INFISICAL_URL", raw}, full[2:]...)...)
		b, err := FromEnv(getenv, environ)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if inf := b.(*infisical); inf.base != base || inf.env != "prod" {
			t.Errorf("%s: base %q env %q; want %q, prod", raw, inf.base, inf.env, base)
		}
	}
}
