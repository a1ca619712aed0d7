package notify_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/notify"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ntfy://ntfy.sh/alerts":                           "ntfy://ntfy.sh/…",
		"ntfy://user:tk_secret@ntfy.example:8443/alerts":  "ntfy://ntfy.example:8443/…",
		"gotify://gotify.lan/AbCdEf123":                   "gotify://gotify.lan/…",
		"discord://webhooktoken@123456789":                "discord://123456789/…",
		"telegram://110201543:AAHdqTcv@telegram?chats=@x": "telegram://telegram/…",
		"generic+https://hooks.example/in?token=abc":      "generic+https://hooks.example/…",
		"https://hooks.example/":                          "https://hooks.example",
		"https://hooks.example":                           "https://hooks.example",
		"https://hooks.example#frag":                      "https://hooks.example/…",
		"smtp://user:pw@mail.lan:587/?from=a@b&to=c@d":    "smtp://mail.lan:587/…",
		"mailto:ops@example.org":                          "mailto:…",
		"::not a url":                                     "(unparsable URL)",
		"":                                                "(unparsable URL)",
	} {
		if got := notify.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	raw := "ntfy://bob:hunter2-pass@ntfy.example/private-topic?token=tk_0123456789&scheme=http"
	for _, c := range []struct{ msg, want string }{
		{`Post "http://ntfy.example/private-topic?token=tk_0123456789": dial tcp: connection refused`,
			`Post "http://ntfy.example/…": dial tcp: connection refused`},
		{`setting query parameter "token" to "tk_0123456789": not a valid config key`,
			`setting query parameter "token" to "…": not a valid config key`},
		{`server response: unknown topic private-topic (40401)`, `server response: unknown topic … (40401)`},
		{`auth failed for bob with hunter2-pass`, `auth failed for … with …`},
		{`see https://docs.ntfy.sh/publish/#x.`, `see https://docs.ntfy.sh/….`},
		{`got unexpected HTTP status: 500 Internal Server Error`, `got unexpected HTTP status: 500 Internal Server Error`},
	} {
		if got := notify.Redact(c.msg, raw, "webhook-secret-0123456789"); got != c.want {
			t.Errorf("Redact(%q)\n  = %q\nwant %q", c.msg, got, c.want)
		}
	}
	if got := notify.RedactError(errors.New("key webhook-secret-0123456789 refused"), raw, "webhook-secret-0123456789"); got != "key … refused" {
		t.Errorf("the signing secret survives: %q", got)
	}
	if notify.RedactError(nil) != "" {
		t.Error("nil error")
	}
}

// A URL's secret parts reach no table the api shows, no audit row, no event and no log
// line, neither when the channel is created nor when sending to it fails with an error
// that quotes them; only notification_secrets holds the value.
func TestChannelSecretsAreNeverShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.retry = []time.Duration{}
	ctx := context.Background()
	r := newReceiver(t)
	const token, topic = "tk_SuperSecret0123", "secret-topic-xyz"
	r.status.Store(http.StatusForbidden)
	// The server's error quotes what it was sent, as real ones do.
	r.body.Store(fmt.Sprintf(`{"code":40301,"error":"forbidden: topic %s, token %s"}`, topic, token))
	url := fmt.Sprintf("ntfy://ops:%s@%s/%s?scheme=http", token, r.srv.Listener.Addr(), topic)
	c := e.channel(notify.ChannelInput{Name: "phone", URL: url})
	if strings.Contains(c.URL, token) || c.URL != fmt.Sprintf("ntfy://%s/…", r.srv.Listener.Addr()) ||
		!strings.HasPrefix(c.URLRef, "stored:") {
		t.Fatalf("channel shows %q (ref %q)", c.URL, c.URLRef)
	}
	e.start()
	root, p := incident("lxc", "web", "warning")
	e.appendEvent("incident.opened", root, p)
	o := e.outcome(of("phone", notify.ResultFailed))
	if !strings.Contains(o.Error, "forbidden") {
		t.Errorf("error %q", o.Error)
	}
	if got := r.next(t); !strings.HasSuffix(got.Path, topic) || got.Header.Get("Authorization") == "" {
		t.Errorf("the receiver got %s without the credentials", got.Path)
	}
	all, err := e.store.Channels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shown := fmt.Sprintf("%+v", all)
	for _, secret := range []string{token, topic} {
		if strings.Contains(shown, secret) {
			t.Errorf("the channel list shows %q: %s", secret, shown)
		}
		for table, col := range map[string]string{"audit_log": "coalesce(before::text, '') || coalesce(after::text, '')",
			"events": "payload::text", "notification_channels": "to_jsonb(t)::text", "notification_deliveries": "to_jsonb(t)::text",
			"notification_attempts": "to_jsonb(t)::text", "signals": "to_jsonb(t)::text"} {
			if n := e.count(`SELECT count(*) FROM `+table+` t WHERE strpos(`+col+`, $1) > 0`, secret); n != 0 {
				t.Errorf("%d rows of %s contain %q", n, table, secret)
			}
		}
		if strings.Contains(e.log.String(), secret) {
			t.Errorf("the log contains %q:\n%s", secret, e.log.String())
		}
	}
	if n := e.count(`SELECT count(*) FROM signals WHERE kind = 'notification_channel_failing' AND status = 'open'`); n != 1 {
		t.Errorf("%d failing signals", n)
	}
	if n := e.count(`SELECT count(*) FROM notification_secrets WHERE value = $1`, url); n != 1 {
		t.Errorf("the stored value is not kept: %d", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'notification_channel.create' AND actor = 'op'`); n != 1 {
		t.Errorf("%d audit rows of the creation", n)
	}
	// Deleting the channel deletes its stored value and resolves its signal.
	if _, err := e.store.DeleteChannel(ctx, op, "phone"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(`SELECT count(*) FROM notification_secrets`); n != 0 {
		t.Errorf("%d stored values left", n)
	}
	if n := e.count(`SELECT count(*) FROM signals WHERE kind = 'notification_channel_failing' AND status = 'open'`); n != 0 {
		t.Errorf("%d failing signals left open", n)
	}
}

// env: and file: references are read at every send, so a changed value is used without
// touching the channel; one that cannot be read is refused when the channel is created.
func TestReferencesResolveAtSendTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	before, after := newReceiver(t), newReceiver(t)
	e.vars.Set("NTFY_URL", before.ntfy("alerts"))
	c := e.channel(notify.ChannelInput{Name: "phone", URLRef: "env:NTFY_URL"})
	if c.URLRef != "env:NTFY_URL" || c.URL != fmt.Sprintf("ntfy://%s/…", before.srv.Listener.Addr()) {
		t.Errorf("channel %+v", c)
	}
	file := filepath.Join(t.TempDir(), "hook-url")
	if err := os.WriteFile(file, []byte(after.srv.URL+"/one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars.Set("HOOK_SECRET", hookSecret)
	e.channel(notify.ChannelInput{Name: "hook", Kind: notify.ChannelWebhook, URLRef: "file:" + file, SecretRef: "env:HOOK_SECRET"})
	e.vars.Set("NTFY_URL", after.ntfy("rotated"))
	if err := os.WriteFile(file, []byte(after.srv.URL+"/two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start()
	root, p := incident("lxc", "web", "warning")
	e.appendEvent("incident.opened", root, p)
	e.outcome(of("phone", notify.ResultSent))
	e.outcome(of("hook", notify.ResultSent))
	paths := map[string]bool{after.next(t).Path: true, after.next(t).Path: true}
	if !paths["/rotated"] || !paths["/two"] || before.count.Load() != 0 {
		t.Errorf("sent to %v (old URL got %d)", paths, before.count.Load())
	}

	for _, c := range []struct {
		in    notify.ChannelInput
		field string
	}{
		{notify.ChannelInput{Name: "x", URLRef: "env:NOT_SET_ANYWHERE"}, "url_ref"},
		{notify.ChannelInput{Name: "x", URLRef: "file:/nonexistent/oikos-url"}, "url_ref"},
		{notify.ChannelInput{Name: "x", URLRef: "file:relative/path"}, "url_ref"},
		{notify.ChannelInput{Name: "x", URLRef: "stored:0190a000-0000-7000-8000-000000000001"}, "url_ref"},
		{notify.ChannelInput{Name: "x", URL: "ntfy://ntfy.sh/a", URLRef: "env:NTFY_URL"}, "url"},
		{notify.ChannelInput{Name: "x", Kind: notify.ChannelWebhook, URL: "https://h.example/", SecretRef: "env:NOT_SET"}, "secret_ref"},
	} {
		_, err := e.store.CreateChannel(ctx, op, c.in)
		var fe *apierr.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, apierr.ErrInvalid) {
			t.Errorf("%+v: %v, want a field error on %s", c.in, err, c.field)
		}
	}
}
