package notifyworker_test

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
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
)

// A URL's secret parts reach no table the api shows, no audit row, no event and no log
// line, neither when the channel is created nor when sending to it fails with an error
// that quotes them; only notification_secrets holds the value.
func TestChannelSecretsAreNeverShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Retry = []time.Duration{}
	e.FailingAfter = 1
	ctx := context.Background()
	r := newReceiver(t)
	const token, topic = "tk_SuperSecret0123", "secret-topic-xyz"
	r.Status.Store(http.StatusForbidden)
	// The server's error quotes what it was sent, as real ones do.
	r.Body.Store(fmt.Sprintf(`{"code":40301,"error":"forbidden: topic %s, token %s"}`, topic, token))
	url := fmt.Sprintf("ntfy://ops:%s@%s/%s?scheme=http", token, r.Srv.Listener.Addr(), topic)
	c := e.Channel(notify.ChannelInput{Name: "phone", URL: url})
	if strings.Contains(c.URL, token) || c.URL != fmt.Sprintf("ntfy://%s/…", r.Srv.Listener.Addr()) ||
		!strings.HasPrefix(c.URLRef, "stored:") {
		t.Fatalf("channel shows %q (ref %q)", c.URL, c.URLRef)
	}
	e.Start()
	root, p := incident("lxc", "web", "warning")
	e.AppendEvent("incident.opened", root, p)
	o := e.Outcome(of("phone", notifyworker.ResultFailed))
	if !strings.Contains(o.Error, "forbidden") {
		t.Errorf("error %q", o.Error)
	}
	if got := r.Next(t); !strings.HasSuffix(got.Path, topic) || got.Header.Get("Authorization") == "" {
		t.Errorf("the receiver got %s without the credentials", got.Path)
	}
	all, err := e.Service.Channels(ctx)
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
			if n := e.Count(`SELECT count(*) FROM `+table+` t WHERE strpos(`+col+`, $1) > 0`, secret); n != 0 {
				t.Errorf("%d rows of %s contain %q", n, table, secret)
			}
		}
		if strings.Contains(e.Log.String(), secret) {
			t.Errorf("the log contains %q:\n%s", secret, e.Log.String())
		}
	}
	if n := e.Count(`SELECT count(*) FROM signals WHERE kind = 'notification_channel_failing' AND status = 'open'`); n != 1 {
		t.Errorf("%d failing signals", n)
	}
	if n := e.Count(`SELECT count(*) FROM notification_secrets WHERE value = $1`, url); n != 1 {
		t.Errorf("the stored value is not kept: %d", n)
	}
	if n := e.Count(`SELECT count(*) FROM audit_log WHERE action = 'notification_channel.create' AND actor = 'op'`); n != 1 {
		t.Errorf("%d audit rows of the creation", n)
	}
	// Deleting the channel deletes its stored value and resolves its signal.
	if _, err := e.Service.DeleteChannel(ctx, op, "phone"); err != nil {
		t.Fatal(err)
	}
	if n := e.Count(`SELECT count(*) FROM notification_secrets`); n != 0 {
		t.Errorf("%d stored values left", n)
	}
	if n := e.Count(`SELECT count(*) FROM signals WHERE kind = 'notification_channel_failing' AND status = 'open'`); n != 0 {
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
	e.Vars.Set("NTFY_URL", before.Ntfy("alerts"))
	c := e.Channel(notify.ChannelInput{Name: "phone", URLRef: "env:NTFY_URL"})
	if c.URLRef != "env:NTFY_URL" || c.URL != fmt.Sprintf("ntfy://%s/…", before.Srv.Listener.Addr()) {
		t.Errorf("channel %+v", c)
	}
	file := filepath.Join(t.TempDir(), "hook-url")
	if err := os.WriteFile(file, []byte(after.Srv.URL+"/one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Vars.Set("HOOK_SECRET", hookSecret)
	e.Channel(notify.ChannelInput{Name: "hook", Kind: notifytarget.ChannelWebhook, URLRef: "file:" + file, SecretRef: "env:HOOK_SECRET"})
	e.Vars.Set("NTFY_URL", after.Ntfy("rotated"))
	if err := os.WriteFile(file, []byte(after.Srv.URL+"/two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Start()
	root, p := incident("lxc", "web", "warning")
	e.AppendEvent("incident.opened", root, p)
	e.Outcome(of("phone", notifyworker.ResultSent))
	e.Outcome(of("hook", notifyworker.ResultSent))
	paths := map[string]bool{after.Next(t).Path: true, after.Next(t).Path: true}
	if !paths["/rotated"] || !paths["/two"] || before.Count.Load() != 0 {
		t.Errorf("sent to %v (old URL got %d)", paths, before.Count.Load())
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
		{notify.ChannelInput{Name: "x", Kind: notifytarget.ChannelWebhook, URL: "https://h.example/", SecretRef: "env:NOT_SET"}, "secret_ref"},
	} {
		_, err := e.Service.CreateChannel(ctx, op, c.in)
		var fe *apierr.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, apierr.ErrInvalid) {
			t.Errorf("%+v: %v, want a field error on %s", c.in, err, c.field)
		}
	}
}
