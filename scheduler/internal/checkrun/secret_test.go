package checkrun

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/scheduler/internal/secretref"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/secretbox"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// An http check's header written `secret:NAME` is resolved when the request is sent: the
// target gets the value, a redirect to another origin gets no header, and what the check
// reports (reason, summary) holds the reference at most, never the value. An unknown name,
// or a scheduler without the key, is the check's configuration error naming the secret.
func TestHTTPSecretHeader(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	box, err := secretbox.New([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	const value = "planted-check-value-0123456789"
	if _, err := db.Pool.Exec(t.Context(), `INSERT INTO secrets (name, ciphertext, key_id, set_by) VALUES ('probe_token', $1, $2, 'test')`,
		box.Seal("probe_token", value), box.KeyID()); err != nil {
		t.Fatal(err)
	}
	leaked := make(chan string, 4)
	other := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values("Authorization")) > 0 || r.Header.Get("X-Plain") != "" {
			leaked <- r.Header.Get("Authorization")
		}
	}))
	srv := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+value || r.Header.Get("X-Plain") != "hello" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/away" {
			http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	lines, reason := checks.HeaderLines(map[string]any{"Authorization": "Bearer secret:probe_token", "X-Plain": "hello"})
	if reason != "" {
		t.Fatal(reason)
	}
	def := func(path string, headers []string) *checkDef {
		d := httpDef(srv.URL+path, 200, "", 5*time.Second)
		s := d.spec.(httpSpec)
		s.Headers = headers
		d.spec = s
		return d
	}
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), Secrets: secretref.New(db.Pool, box)}, &blockingExec{})
	t.Cleanup(func() { r.closeIdleHTTP(0) })
	noKey := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop()}, &blockingExec{})
	ctx := context.Background()
	clean := func(what string, res results.Result) {
		t.Helper()
		raw, _ := json.Marshal(res)
		if strings.Contains(string(raw), value) {
			t.Errorf("%s: the result holds the value: %s", what, raw)
		}
	}

	res, err := r.runProbe(ctx, def("/", lines), nil)
	if err != nil || res.Health != results.HealthUp {
		t.Fatalf("with the secret header: %+v %v", res, err)
	}
	clean("up", res)
	// Followed to another origin: no header goes there (its answer, 200, is the result).
	res, err = r.runProbe(ctx, def("/away", lines), nil)
	if err != nil || res.Health != results.HealthUp {
		t.Fatalf("redirected: %+v %v", res, err)
	}
	select {
	case v := <-leaked:
		t.Fatalf("the other origin received the check's headers (%q)", v)
	default:
	}
	res, _ = r.runProbe(ctx, def("/", nil), nil)
	if res.Health != results.HealthDown {
		t.Errorf("without headers: %+v", res)
	}
	missing, _ := checks.HeaderLines(map[string]any{"Authorization": "secret:missing_one"})
	res, _ = r.runProbe(ctx, def("/", missing), nil)
	if res.Class != results.ClassConfig || !strings.Contains(res.Reason, "secret missing_one is not set") {
		t.Errorf("unknown secret: %+v", res)
	}
	res, _ = noKey.runProbe(ctx, def("/", lines), nil)
	if res.Class != results.ClassConfig || !strings.Contains(res.Reason, "secret probe_token cannot be opened") {
		t.Errorf("no key: %+v", res)
	}
	clean("no key", res)
}

// The headers config: names are HTTP tokens the client does not own, values one line, a
// reference a valid name.
func TestHeaderLines(t *testing.T) {
	t.Parallel()
	got, reason := checks.HeaderLines(map[string]any{"X-B": "2", "Authorization": "Bearer secret:Tok"})
	if reason != "" || len(got) != 2 || got[0] != "Authorization: Bearer secret:Tok" || got[1] != "X-B: 2" {
		t.Fatalf("%q %q", got, reason)
	}
	for _, bad := range []any{"x", map[string]any{"Host": "a"}, map[string]any{"X A": "a"}, map[string]any{"X": "a\nB: c"},
		map[string]any{"X": 3}, map[string]any{"X": "Bearer secret:bad/name"}} {
		if _, reason := checks.HeaderLines(bad); reason == "" {
			t.Errorf("%v accepted", bad)
		}
	}
}
