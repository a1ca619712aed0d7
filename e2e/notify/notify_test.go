// Package notify_test runs a notification target that is down end to end: the real api (its
// notifier reading the outbox) on a private Postgres, a webhook on a loopback server that
// answers 503 for a compressed "ten minutes" (a back-off of milliseconds) while an incident
// opens, updates and resolves, and then comes back. Each transition reaches it exactly once
// (one Idempotency-Key per transition), the api shows the channel failing during the outage,
// and the failing and recovered events happen once each.
package notify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { e2estack.Main(m) }

// hook is a webhook target: while down it answers 503 (and keeps the attempt's key); up, it
// accepts and keeps each delivery.
type hook struct {
	down     atomic.Bool
	mu       sync.Mutex
	attempts []string // every request's Idempotency-Key
	got      []got    // the requests answered 2xx
}

type got struct{ Key, Kind, Delivery string }

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	h.attempts = append(h.attempts, key)
	if h.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.got = append(h.got, got{Key: key, Kind: r.Header.Get("X-Oikos-Event"), Delivery: r.Header.Get("X-Oikos-Delivery")})
	w.WriteHeader(http.StatusNoContent)
}

func (h *hook) snapshot() (attempts int, g []got) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.attempts), slices.Clone(h.got)
}

func TestTargetDownGetsEachTransitionOnceWhenBack(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	cfg := apiapp.Config{DatabaseURL: db.URL, PublicURL: "http://127.0.0.1:8080", NotifyEnabled: true,
		NotifyFailingAfter: 3, NotifyTimeout: 2 * time.Second}
	// Ten minutes of a production back-off (5 s … 5 min) compressed to milliseconds.
	cfg.NotifyBackoff.Initial = 20 * time.Millisecond
	cfg.NotifyBackoff.Max = 100 * time.Millisecond
	cfg.NotifyBackoff.Jitter = 0.2
	cfg.NotifyBackoff.GiveUpAfter = time.Hour
	api, apiURL, err := e2estack.StartAPI(ctx, t, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var operator string
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "operator", Role: "operator", Into: &operator}); err != nil {
		t.Fatal(err)
	}
	op := (&e2estack.Client{URL: apiURL, HTTP: http.DefaultClient}).API(t, operator)

	target := &hook{}
	target.down.Store(true)
	srv := httptest.NewServer(target)
	defer srv.Close()
	pager := &hook{} // a healthy channel: it hears of the failing one, whatever its rules
	psrv := httptest.NewServer(pager)
	defer psrv.Close()
	secret := "a-webhook-secret-of-some-length"
	var hc, pc apiclient.NotificationChannel
	e2estack.OK(t, &hc)(op.CreateNotificationChannel(ctx, apiclient.CreateNotificationChannel{
		Name: "hook", Kind: apiclient.Ptr(apiclient.CreateNotificationChannelKind("webhook")), Url: apiclient.Ptr(srv.URL + "/oikos"),
		Secret: &secret, Rules: &[]apiclient.NotificationRuleOfChannel{{Kinds: []string{"incident.opened", "incident.updated", "incident.resolved"}}},
	}))
	e2estack.OK(t, &pc)(op.CreateNotificationChannel(ctx, apiclient.CreateNotificationChannel{
		Name: "pager", Kind: apiclient.Ptr(apiclient.CreateNotificationChannelKind("webhook")), Url: apiclient.Ptr(psrv.URL + "/oikos"),
		Secret: &secret, Rules: &[]apiclient.NotificationRuleOfChannel{{Kinds: []string{"drift.found"}}},
	}))

	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	deliveriesBefore := count(`SELECT count(*) FROM notification_deliveries`)
	eventsBefore := map[string]int{}
	for _, typ := range []string{"notification_target.failing", "notification_target.recovered"} {
		eventsBefore[typ] = count(`SELECT count(*) FROM events WHERE type = $1`, typ)
	}
	channel := func() apiclient.NotificationChannel {
		var c apiclient.NotificationChannel
		e2estack.OK(t, &c)(op.GetNotificationChannel(ctx, hc.Id))
		return c
	}

	// The incident's transitions, written to the outbox as the scheduler's engine does.
	root := uuid.NewString()
	transition := func(typ, status string) int64 {
		t.Helper()
		id, err := eventbus.Append(ctx, db.Pool, eventbus.Event{Type: typ, EntityID: root, Actor: "scheduler"}, map[string]any{
			"incident_id": root, "dedup_key": "incident:" + root, "root_id": root, "root": "lxc:web", "root_type": "lxc",
			"severity": "warning", "summary": "web is down", "reason": "ping: no answer", "affected_count": 1,
			"affected": []map[string]any{{"entity_id": root, "entity": "lxc:web", "health": "down", "reason": "ping: no answer"}},
			"tags":     []string{}, "status": status, "opened_at": time.Now().UTC().Format(time.RFC3339),
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	var events []int64
	events = append(events, transition("incident.opened", "open"), transition("incident.updated", "open"))

	// The outage: the api shows the channel failing after three attempts in a row.
	var failing apiclient.NotificationChannel
	e2estack.Eventually(t, db.URL, 30*time.Second, 50*time.Millisecond, "the channel failing through the api", func() (bool, string) {
		failing = channel()
		return failing.State == apiclient.NotificationChannelStateFailing, fmt.Sprintf("%+v", failing)
	})
	if failing.ConsecutiveFailures < 3 || failing.FailingSince == nil || failing.LastFailureAt == nil || failing.LastError == nil {
		t.Fatalf("the failing channel reads %+v", failing)
	}
	// More transitions while it is down, and more failed attempts after it counts as failing.
	events = append(events, transition("incident.updated", "open"), transition("incident.resolved", "resolved"))
	attemptsAtFailing, _ := target.snapshot()
	e2estack.Eventually(t, db.URL, 30*time.Second, 50*time.Millisecond, "failed attempts while failing", func() (bool, string) {
		n, _ := target.snapshot()
		return n >= attemptsAtFailing+3, fmt.Sprint(n)
	})
	if c := channel(); c.State != apiclient.NotificationChannelStateFailing || !c.FailingSince.Equal(*failing.FailingSince) {
		t.Fatalf("still down, the channel reads %+v (failing since %v before)", c, failing.FailingSince)
	}

	// Back: each transition exactly once, in order, and the channel recovers.
	target.down.Store(false)
	e2estack.Eventually(t, db.URL, 30*time.Second, 50*time.Millisecond, "every transition delivered and the channel ok", func() (bool, string) {
		_, g := target.snapshot()
		_, pg := pager.snapshot()
		c := channel()
		return len(g) >= len(events) && len(pg) >= 2 && c.State == apiclient.NotificationChannelStateOk,
			fmt.Sprintf("%d delivered, pager %d, channel %s", len(g), len(pg), c.State)
	})
	attempts, g := target.snapshot()
	var keys []string
	for _, d := range g {
		keys = append(keys, d.Key)
		if d.Delivery != d.Key {
			t.Errorf("X-Oikos-Delivery %q and Idempotency-Key %q differ", d.Delivery, d.Key)
		}
	}
	var want []string
	for _, id := range events {
		want = append(want, fmt.Sprintf("%d:%s", id, hc.Id))
	}
	if !slices.Equal(keys, want) {
		t.Errorf("delivered keys %v, want each transition once, in order: %v", keys, want)
	}
	t.Logf("%d transitions, %d attempts, %d delivered", len(events), attempts, len(g))
	if _, pg := pager.snapshot(); len(pg) != 2 || pg[0].Kind != "notification_target.failing" || pg[1].Kind != "notification_target.recovered" {
		t.Errorf("the healthy channel got %+v, want failing then recovered", pg)
	}
	if c := channel(); c.ConsecutiveFailures != 0 || c.FailingSince != nil || c.LastOkAt == nil {
		t.Errorf("recovered, the channel reads %+v", c)
	}

	// Rows: one delivery per transition to the hook, one per health change to the pager;
	// one failing and one recovered event, each audited.
	if n := count(`SELECT count(*) FROM notification_deliveries`) - deliveriesBefore; n != len(events)+2 {
		t.Errorf("%d deliveries made, want %d", n, len(events)+2)
	}
	if n := count(`SELECT count(*) FROM notification_deliveries WHERE channel_id = $1 AND status = 'sent'`, hc.Id); n != len(events) {
		t.Errorf("%d deliveries to the hook sent, want %d", n, len(events))
	}
	if n := count(`SELECT count(*) FROM notification_deliveries WHERE channel_id = $1 AND status = 'sent'`, pc.Id); n != 2 {
		t.Errorf("%d deliveries to the pager sent, want 2", n)
	}
	for typ, before := range eventsBefore {
		if n := count(`SELECT count(*) FROM events WHERE type = $1`, typ) - before; n != 1 {
			t.Errorf("%d %s events, want 1", n, typ)
		}
		if n := count(`SELECT count(*) FROM audit_log WHERE action = $1`, typ); n != 1 {
			t.Errorf("%d %s audit rows, want 1", n, typ)
		}
	}
}
