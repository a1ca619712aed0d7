package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/app"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// OIKOS_PUBLIC_URL, OIKOS_NOTIFY_ENABLED and OIKOS_NOTIFY_RETRY: defaults, values, and bad
// values refused naming the variable.
func TestLoadConfigNotifications(t *testing.T) {
	t.Parallel()
	base := map[string]string{"OIKOS_DATABASE_URL": "postgres://x"}
	c, err := app.LoadConfig(envOf(base))
	if err != nil || c.PublicURL != "http://127.0.0.1:8080" || !c.NotifyEnabled || c.NotifyRetry != nil ||
		c.NotifyBackoff.Initial != 5*time.Second || c.NotifyBackoff.Max != 5*time.Minute || c.NotifyFailingAfter != 5 ||
		c.NotifyTimeout != 10*time.Second {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x", "OIKOS_PUBLIC_URL": "https://oikos.lan/",
		"OIKOS_NOTIFY_ENABLED": "false", "OIKOS_NOTIFY_RETRY": "500ms, 30s,2m"}))
	if err != nil || c.PublicURL != "https://oikos.lan" || c.NotifyEnabled ||
		!reflect.DeepEqual(c.NotifyRetry, []time.Duration{500 * time.Millisecond, 30 * time.Second, 2 * time.Minute}) {
		t.Fatalf("set: %+v, %v", c, err)
	}
	for name, bad := range map[string]string{"OIKOS_PUBLIC_URL": "oikos.lan", "OIKOS_NOTIFY_RETRY": "10s,soon",
		"OIKOS_NOTIFY_ENABLED": "maybe", "OIKOS_NOTIFY_FAILING_AFTER": "0", "OIKOS_NOTIFY_BACKOFF_MAX": "1ms"} {
		env := map[string]string{"OIKOS_DATABASE_URL": "postgres://x", name: bad}
		if _, err := app.LoadConfig(envOf(env)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: want an error naming it, got %v", name, bad, err)
		}
	}
}

// The api delivers notifications as composed: a channel created over HTTP gets the event a
// daemon appends, woken by the outbox, with the link at the public URL.
func TestNotificationsAreWired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	got := make(chan []byte, 4)
	ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		_, _ = io.WriteString(w, `{"id":"m1","event":"message"}`)
	}))
	t.Cleanup(ntfy.Close)
	srv, err := app.Start(ctx, app.Config{DatabaseURL: db.URL, Addr: "127.0.0.1:0", PublicURL: "https://oikos.lan",
		NotifyEnabled: true, NotifyRetry: []time.Duration{10 * time.Millisecond}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	tok, err := srv.Auth.Create(ctx, "op", auth.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"name": "phone", "url": fmt.Sprintf("ntfy://%s/alerts?scheme=http", ntfy.Listener.Addr()),
		"rules": []map[string]any{{"kinds": []string{"incident.opened"}, "entity_types": []string{"guest"}}}})
	req, _ := http.NewRequest("POST", "http://"+srv.Addr().String()+"/api/v1/notifications/channels", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create channel: %s", resp.Status)
	}
	if _, err := eventbus.Append(ctx, db.Pool, eventbus.Event{Type: "incident.opened", Actor: "scheduler"}, map[string]any{
		"incident_id": "0190a000-0000-7000-8000-000000000001", "root": "lxc:web", "root_type": "lxc", "severity": "warning",
		"summary": "web is down", "tags": []string{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !strings.Contains(string(b), "https://oikos.lan/entities/lxc:web") {
			t.Errorf("message %s", b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the notification never arrived")
	}
}
