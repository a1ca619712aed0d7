package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyapi"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/secretsapi"
	"github.com/oikos-hq/oikos/api/internal/secretstore"
	"github.com/oikos-hq/oikos/shared/secretbox"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

const testSecretsKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" // 32 bytes 0..31

// secretsAPI serves the secrets and notification routes over a fresh database; keyed says
// whether the api has OIKOS_SECRETS_KEY.
func secretsAPI(t *testing.T, keyed bool) (*pgxpool.Pool, func(stdin string, args ...string) (int, string, string)) {
	t.Helper()
	db := pgtest.New(t)
	tokens := auth.NewStore(db.Pool)
	tok, err := tokens.Create(context.Background(), "op", auth.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	var box *secretbox.Box
	if keyed {
		if box, err = secretbox.Parse(testSecretsKey); err != nil {
			t.Fatal(err)
		}
	}
	svc := secretstore.New(db.Pool, box)
	notifyService := notify.NewService(notify.ServiceOptions{Pool: db.Pool, Secrets: notify.Secrets{Stored: svc.Resolve}})
	e := echo.New()
	routes := append(secretsapi.New(svc).Routes(), notifyapi.New(notifyapi.Deps{Service: notifyService, Logger: zerolog.Nop()}).Routes()...)
	request.Mount(e.Group("/api/v1"), tokens, zerolog.Nop(), routes...)
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	vars := map[string]string{"OIKOS_API_URL": ts.URL, "OIKOS_TOKEN": tok}
	return db.Pool, func(stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		env := &cliEnv{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
			HTTP: &http.Client{Timeout: 20 * time.Second}}
		code := dispatch(context.Background(), env, args)
		return code, out.String(), errOut.String()
	}
}

func TestSecretSetListRm(t *testing.T) {
	pool, run := secretsAPI(t, true)
	const value = "Planted-CLI-Value-7f3a9"
	code, out, errOut := run(value+"\n", "secret", "set", "Grafana_Token")
	if code != 0 || !strings.Contains(out, "secret grafana_token set; reference it as secret:grafana_token") {
		t.Fatalf("set: %d %q %q", code, out, errOut)
	}
	code, out, _ = run("", "secret", "list")
	if code != 0 || !strings.Contains(out, "grafana_token") || !strings.Contains(out, "op") || strings.Contains(out, value) {
		t.Fatalf("list: %d %q", code, out)
	}
	// The table, the audit row and the event hold the name, never the value.
	var leaks int
	if err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM secrets WHERE position($1::bytea in ciphertext) > 0) +
		(SELECT count(*) FROM audit_log WHERE coalesce(after::text, '') LIKE '%' || $2 || '%') +
		(SELECT count(*) FROM events WHERE payload::text LIKE '%' || $2 || '%')`, []byte(value), value).Scan(&leaks); err != nil {
		t.Fatal(err)
	}
	var audited int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'secret.set' AND after->>'name' = 'grafana_token'`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if leaks != 0 || audited != 1 {
		t.Fatalf("leaks %d, audited %d", leaks, audited)
	}

	// A notification URL by reference resolves the stored secret when the channel is added.
	if code, _, errOut := run("ntfy://ntfy.example/topic\n", "secret", "set", "phone_url"); code != 0 {
		t.Fatal(errOut)
	}
	if code, out, errOut := run("", "notify", "add", "phone", "--url", "secret:phone_url"); code != 0 || !strings.Contains(out, "ntfy://ntfy.example") {
		t.Fatalf("notify add: %d %q %q", code, out, errOut)
	}
	var ref string
	if err := pool.QueryRow(context.Background(), `SELECT url_ref FROM notification_channels WHERE name = 'phone'`).Scan(&ref); err != nil || ref != "secret:phone_url" {
		t.Fatalf("url_ref %q %v", ref, err)
	}
	if code, _, errOut := run("", "notify", "add", "nope", "--url", "secret:missing"); code != 2 || !strings.Contains(errOut, `no secret named "missing"`) {
		t.Fatalf("missing secret: %d %q", code, errOut)
	}

	if code, out, _ := run("", "secret", "rm", "grafana_token"); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("rm: %d %q", code, out)
	}
	if code, _, errOut := run("", "secret", "rm", "grafana_token"); code != 1 || !strings.Contains(errOut, `no secret named "grafana_token"`) {
		t.Fatalf("rm again: %d %q", code, errOut)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'secret.remove' AND before->>'name' = 'grafana_token'`).Scan(&audited); err != nil || audited != 1 {
		t.Fatalf("rm audited %d %v", audited, err)
	}
}

func TestSecretErrors(t *testing.T) {
	pool, run := secretsAPI(t, true)
	for _, c := range []struct {
		name, stdin string
		args        []string
		code        int
		want        string
	}{
		{"bad name", "v", []string{"secret", "set", "a/b"}, 2, "invalid secret name"},
		{"dot name", "v", []string{"secret", "set", ".x"}, 2, "must not start with '.'"},
		{"value on argv", "", []string{"secret", "set", "x", "the-value"}, 2, "never from the command line"},
		{"empty stdin", "\n", []string{"secret", "set", "x"}, 2, "the value on stdin is empty"},
		{"no sub", "", []string{"secret"}, 2, "usage:"},
		{"unknown sub", "", []string{"secret", "get", "x"}, 2, "usage:"},
		{"rm bad name", "", []string{"secret", "rm", "a b"}, 2, "invalid secret name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(c.stdin, c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) || strings.Contains(out+errOut, "the-value") && c.name != "value on argv" {
				t.Fatalf("%v: %d %q %q", c.args, code, out, errOut)
			}
		})
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM secrets`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("stored %d %v", n, err)
	}

	_, unkeyed := secretsAPI(t, false)
	code, _, errOut := unkeyed("value", "secret", "set", "x")
	if code == 0 || !strings.Contains(errOut, "OIKOS_SECRETS_KEY") {
		t.Fatalf("no key: %d %q", code, errOut)
	}
	if code, out, _ := unkeyed("", "secret", "list"); code != 0 || !strings.Contains(out, "no secrets stored") {
		t.Fatalf("list without key: %d %q", code, out)
	}
}
