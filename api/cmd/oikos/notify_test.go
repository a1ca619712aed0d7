package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyapi"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// notifyAPI is an api serving the notification routes over a fresh database, and the
// environment of a CLI pointed at it with an operator token.
type notifyAPI struct {
	pool *pgxpool.Pool
	env  map[string]string
}

func newNotifyAPI(t *testing.T, apiEnv map[string]string) *notifyAPI {
	t.Helper()
	db := pgtest.New(t)
	tokens := auth.NewStore(db.Pool)
	tok, err := tokens.Create(context.Background(), "op", auth.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	service := notify.NewService(notify.ServiceOptions{Pool: db.Pool, Secrets: notify.Secrets{Getenv: func(k string) string { return apiEnv[k] }}})
	e := echo.New()
	request.Mount(e.Group("/api/v1"), tokens, zerolog.Nop(), notifyapi.New(notifyapi.Deps{Service: service, Logger: zerolog.Nop(),
		PublicURL: "https://oikos.example"}).Routes()...)
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return &notifyAPI{pool: db.Pool, env: map[string]string{"OIKOS_API_URL": ts.URL, "OIKOS_TOKEN": tok}}
}

func (a *notifyAPI) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cliEnv{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return a.env[k] },
		HTTP: &http.Client{Timeout: 20 * time.Second}}
	code = dispatch(context.Background(), env, append([]string{"notify"}, args...))
	return code, out.String(), errOut.String()
}

func (a *notifyAPI) channels(t *testing.T) int {
	t.Helper()
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM notification_channels`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// loopback is an ntfy (or webhook) endpoint on loopback that counts what it gets.
func loopback(t *testing.T, status int) (*httptest.Server, *atomic.Int32, chan http.Header) {
	t.Helper()
	var n atomic.Int32
	headers := make(chan http.Header, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n.Add(1)
		headers <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "m1", "event": "message"})
	}))
	t.Cleanup(srv.Close)
	return srv, &n, headers
}

func TestNotifyTestCommand(t *testing.T) {
	t.Parallel()
	secret := "cli-webhook-secret-0123456789"
	api := newNotifyAPI(t, map[string]string{"HOOK_SECRET": secret})
	ntfy, got, _ := loopback(t, http.StatusOK)
	u := fmt.Sprintf("ntfy://%s/cli-topic?scheme=http", ntfy.Listener.Addr())
	code, out, errOut := api.run(t, "test", u)
	if code != 0 || !strings.Contains(out, "sent") || got.Load() != 1 {
		t.Fatalf("notify test: exit %d, %q %q, %d requests", code, out, errOut, got.Load())
	}
	if strings.Contains(out, "cli-topic") {
		t.Errorf("the command prints the URL's path: %q", out)
	}

	hook, hookGot, headers := loopback(t, http.StatusOK)
	if code, out, errOut := api.run(t, "test", "--webhook", "--secret-env", "HOOK_SECRET", hook.URL+"/in"); code != 0 ||
		!strings.Contains(out, "sent") || hookGot.Load() != 1 {
		t.Fatalf("webhook test: exit %d %q %q", code, out, errOut)
	}
	if h := <-headers; h.Get("X-Oikos-Signature") == "" || h.Get("X-Oikos-Event") != "test" {
		t.Errorf("webhook headers %v", h)
	}

	// A bad URL: a clear message naming what is wrong, exit 2, nothing sent.
	code, _, errOut = api.run(t, "test", "ntfyy://ntfy.sh/topic")
	if code != 2 || !strings.Contains(errOut, `"ntfyy" is not a shoutrrr service`) || !strings.Contains(errOut, "field url") {
		t.Errorf("bad URL: exit %d, %q", code, errOut)
	}
	// An endpoint that fails: exit 1 with its error.
	down, _, _ := loopback(t, http.StatusInternalServerError)
	code, _, errOut = api.run(t, "test", "--webhook", "--secret-env", "HOOK_SECRET", down.URL+"/in?token=dont-print-me")
	if code != 1 || !strings.Contains(errOut, "500") || strings.Contains(errOut, "dont-print-me") {
		t.Errorf("failing endpoint: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{{}, {"--webhook", hook.URL}, {"--secret-env", "X", u}, {u, "extra"}} {
		if code, _, errOut := api.run(t, append([]string{"test"}, args...)...); code != 2 || errOut == "" {
			t.Errorf("notify test %v: exit %d %q", args, code, errOut)
		}
	}
	if code, _, _ := api.run(t, "frobnicate"); code != 2 {
		t.Errorf("unknown subcommand: exit %d", code)
	}
}

func TestNotifyChannelCommands(t *testing.T) {
	t.Parallel()
	api := newNotifyAPI(t, map[string]string{"NTFY_URL": "ntfy://ntfy.example/from-env"})
	ntfy, got, _ := loopback(t, http.StatusOK)
	u := fmt.Sprintf("ntfy://%s/phone?scheme=http", ntfy.Listener.Addr())

	// Bad input: a clear message, exit 2, nothing added.
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"phone"}, "exactly one of --url"},
		{[]string{"phone", "--url", u, "--url-env", "NTFY_URL"}, "exactly one of --url"},
		{[]string{"phone", "--url", u, "--on", "incident.opened,bogus"}, `--on "bogus" is not one of`},
		{[]string{"phone", "--url", u, "--min-severity", "loud"}, "--min-severity"},
		{[]string{"phone", "--url", u, "--quiet", "25:00-07:00"}, "not a time of day"},
		{[]string{"phone", "--url", u, "--quiet", "22:00"}, "HH:MM-HH:MM"},
		{[]string{"phone", "--url", u, "--quiet", "22:00-07:00", "--tz", "Mars/Olympus"}, "not a time zone"},
		{[]string{"phone", "--url", u, "--secret-env", "X"}, "go with --webhook"},
		{[]string{"phone", "--url", "https://h.example/", "--webhook"}, "a webhook is signed"},
		{[]string{"phone", "--url", "ntfyy://x/y"}, "not a shoutrrr service"},
		{[]string{"phone", "--url-env", "NOT_SET"}, "not set in the api's environment"},
		{[]string{"bad name", "--url", u}, "field name"},
		{[]string{"phone", "--url", u, "--type", "toaster"}, ""},
	} {
		code, _, errOut := api.run(t, append([]string{"add"}, c.args...)...)
		if c.says == "" {
			// An unknown type is not the CLI's to know; this api has no ontology, so it is added.
			if code != 0 {
				t.Errorf("add %v: exit %d %q", c.args, code, errOut)
			}
			if code, _, errOut := api.run(t, "rm", "phone"); code != 0 {
				t.Fatalf("rm: %d %q", code, errOut)
			}
			continue
		}
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("add %v: exit %d, %q (want it to say %q)", c.args, code, errOut, c.says)
		}
	}
	if n := api.channels(t); n != 0 {
		t.Fatalf("refused adds left %d channels", n)
	}

	code, out, errOut := api.run(t, "add", "phone", "--url", u, "--on", "incident.opened,approval.requested",
		"--min-severity", "warning", "--tag", "media", "--tag", "backup", "--quiet", "22:00-07:00", "--tz", "Europe/Berlin")
	if code != 0 || !strings.Contains(out, "channel phone added") || !strings.Contains(out, "incident.opened,approval.requested ≥warning tag media|backup") ||
		strings.Contains(out, "/phone") {
		t.Fatalf("add: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut = api.run(t, "add", "envy", "--url-env", "NTFY_URL"); code != 0 {
		t.Fatalf("add --url-env: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut = api.run(t, "add", "phone", "--url", u); code != 1 || !strings.Contains(errOut, "exists already") {
		t.Errorf("duplicate: exit %d %q", code, errOut)
	}

	code, out, _ = api.run(t, "list")
	for _, want := range []string{"phone", fmt.Sprintf("ntfy://%s/…", ntfy.Listener.Addr()), "22:00-07:00 Europe/Berlin", "stored",
		"envy", "env:NTFY_URL", "nothing sent yet"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("list lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	if strings.Contains(out, "/phone") || strings.Contains(out, "from-env") {
		t.Errorf("list shows a URL's path:\n%s", out)
	}
	if code, out, _ = api.run(t, "test", "phone"); code != 0 || !strings.Contains(out, "sent to channel phone") || got.Load() != 1 {
		t.Errorf("test by name: exit %d %q (%d requests)", code, out, got.Load())
	}
	if code, out, _ = api.run(t, "deliveries", "--channel", "phone"); code != 0 || !strings.Contains(out, "no deliveries") {
		t.Errorf("deliveries: exit %d %q", code, out)
	}
	if code, _, errOut = api.run(t, "deliveries", "--status", "lost"); code != 2 || !strings.Contains(errOut, "--status") {
		t.Errorf("deliveries --status lost: exit %d %q", code, errOut)
	}
	if code, out, _ = api.run(t, "rm", "phone"); code != 0 || !strings.Contains(out, "channel phone removed") {
		t.Errorf("rm: exit %d %q", code, out)
	}
	if code, _, errOut = api.run(t, "rm", "phone"); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("rm again: exit %d %q", code, errOut)
	}
	if n := api.channels(t); n != 1 {
		t.Errorf("%d channels left, want 1", n)
	}
}
