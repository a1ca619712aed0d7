package notifyworker_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
	"github.com/oikos-hq/oikos/shared/signals"
)

// An incident.opened event reaches every channel whose rule wants it, once: an ntfy URL at
// a loopback server (title and message as ntfy takes them) and an HMAC-signed webhook whose
// signature the receiver can verify with the shared secret.
func TestIncidentReachesEachChannelOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ntfy, hook := newReceiver(t), newReceiver(t)
	e.Vars.Set("HOOK_SECRET", hookSecret)
	phone := e.Channel(notify.ChannelInput{Name: "phone", URL: ntfy.Ntfy("alerts")}, notify.KindIncidentOpened)
	ops := e.Channel(notify.ChannelInput{Name: "ops-hook", Kind: notifytarget.ChannelWebhook, URL: hook.Srv.URL + "/hook",
		SecretRef: "env:HOOK_SECRET"}, notify.KindIncidentOpened)
	// A channel without a rule, and a rule on another kind, get nothing.
	e.Channel(notify.ChannelInput{Name: "norules", URL: ntfy.Ntfy("none"), Rules: []notify.RuleInput{}})
	e.Channel(notify.ChannelInput{Name: "approvals", URL: ntfy.Ntfy("approvals")}, notify.KindApprovalRequested)
	n := e.Start()

	root, p := incident("proxmox-host", "atlas", "critical", "core")
	id := e.AppendEvent("incident.opened", root, p)
	e.Outcome(of("phone", notifyworker.ResultSent))
	e.Outcome(of("ops-hook", notifyworker.ResultSent))

	got := ntfy.Next(t)
	if got.Path != "/alerts" || got.Header.Get("Title") != "Incident: atlas is down" {
		t.Errorf("ntfy got %s with title %q", got.Path, got.Header.Get("Title"))
	}
	for _, want := range []string{"atlas is down", "Root cause: proxmox-host:atlas (critical)", "Reason: ping: no answer",
		"Affected: 2: proxmox-host:atlas (down), service:atlas-web (down)", "https://oikos.example/entities/proxmox-host:atlas"} {
		if !strings.Contains(string(got.Body), want) {
			t.Errorf("ntfy message lacks %q:\n%s", want, got.Body)
		}
	}
	if !strings.EqualFold(got.Header.Get("Priority"), "high") {
		t.Errorf("a critical incident goes out at high priority, got %q", got.Header.Get("Priority"))
	}

	wh := hook.Next(t)
	key := fmt.Sprintf("%d:%s", id, ops.ID)
	ts := wh.Header.Get("X-Oikos-Timestamp")
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(ts + "." + string(wh.Body)))
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); wh.Header.Get("X-Oikos-Signature") != want {
		t.Errorf("signature %q, recomputed %q", wh.Header.Get("X-Oikos-Signature"), want)
	}
	if !notifytarget.Verify([]byte(hookSecret), ts, wh.Body, wh.Header.Get("X-Oikos-Signature")) ||
		notifytarget.Verify([]byte("another-secret-0123456789"), ts, wh.Body, wh.Header.Get("X-Oikos-Signature")) {
		t.Error("Verify does not tell the right secret from a wrong one")
	}
	if wh.Header.Get("Content-Type") != "application/json" || wh.Header.Get("X-Oikos-Event") != "incident.opened" ||
		wh.Header.Get("X-Oikos-Delivery") != key {
		t.Errorf("webhook headers %v", wh.Header)
	}
	if sec, err := time.Parse(time.RFC3339, time.Unix(int64(atoi(t, ts)), 0).UTC().Format(time.RFC3339)); err != nil ||
		time.Since(sec) > time.Minute {
		t.Errorf("timestamp %q", ts)
	}
	var body struct {
		ID, Kind, Severity, Title, Body, Link string
		Event                                 struct {
			ID       int64  `json:"id"`
			Type     string `json:"type"`
			EntityID string `json:"entity_id"`
		}
		Payload map[string]any
	}
	decode(t, wh.Body, &body)
	if body.ID != key || body.Kind != "incident.opened" || body.Severity != "critical" || body.Event.ID != id ||
		body.Event.Type != "incident.opened" || body.Event.EntityID != root || body.Payload["incident_id"] != p["incident_id"] ||
		body.Link != "https://oikos.example/entities/proxmox-host:atlas" || body.Title != "Incident: atlas is down" {
		t.Errorf("webhook body %+v", body)
	}

	// Exactly one delivery per channel, keyed "<event id>:<channel id>", each sent on its
	// first attempt.
	if c := e.Count(`SELECT count(*) FROM notification_deliveries`); c != 2 {
		t.Fatalf("%d deliveries, want 2", c)
	}
	for _, ch := range []string{phone.ID, ops.ID} {
		if c := e.Count(`SELECT count(*) FROM notification_deliveries d JOIN notification_attempts a ON a.delivery_id = d.id
			WHERE d.idempotency_key = $1 AND d.status = 'sent' AND d.attempts = 1 AND a.ok`, fmt.Sprintf("%d:%s", id, ch)); c != 1 {
			t.Errorf("channel %s: %d sent deliveries with a successful attempt", ch, c)
		}
	}
	// Reading the batch again (another api, a crash before the cursor moved) adds nothing.
	if _, err := e.Pool.Exec(context.Background(), `UPDATE notification_cursor SET last_event_id = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Dispatcher.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := e.Count(`SELECT count(*) FROM notification_deliveries`); c != 2 {
		t.Fatalf("a re-read added deliveries: %d", c)
	}
	if ntfy.Count.Load() != 1 || hook.Count.Load() != 1 {
		t.Errorf("requests: ntfy %d, webhook %d", ntfy.Count.Load(), hook.Count.Load())
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// A channel that answers 500 is retried per the back-off, every attempt recorded, then the
// delivery fails and the channel's failing signal opens; the other channel is not held up
// (the failing endpoint does not even answer until the other has been delivered to); when
// the endpoint recovers, the next delivery succeeds and the signal resolves.
func TestFailingChannelIsRetriedReportedAndBlocksNoOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Retry = []time.Duration{30 * time.Millisecond, 60 * time.Millisecond}
	e.FailingAfter = 3
	good, bad := newReceiver(t), newReceiver(t)
	bad.Status.Store(http.StatusInternalServerError)
	bad.Body.Store(`{"error":"down"}`)
	release := make(chan struct{})
	bad.Hold.Store(&release)
	e.Vars.Set("HOOK_SECRET", hookSecret)
	e.Channel(notify.ChannelInput{Name: "good", URL: good.Ntfy("alerts")})
	badCh := e.Channel(notify.ChannelInput{Name: "bad", Kind: notifytarget.ChannelWebhook, URL: bad.Srv.URL + "/hook",
		SecretRef: "env:HOOK_SECRET"})
	e.Start()

	root, p := incident("lxc", "web", "warning")
	e.AppendEvent("incident.opened", root, p)
	// The bad endpoint holds its first request; the good channel is delivered meanwhile.
	bad.Next(t)
	e.Outcome(of("good", notifyworker.ResultSent))
	bad.Hold.Store(nil)
	close(release)
	for i, want := range []string{notifyworker.ResultRetry, notifyworker.ResultRetry, notifyworker.ResultFailed} {
		o := e.Outcome(of("bad", want))
		if o.Attempt != i+1 || !strings.Contains(o.Error, "500") {
			t.Errorf("attempt %d: %+v", i+1, o)
		}
	}
	if n := bad.Count.Load(); n != 3 {
		t.Errorf("the failing endpoint got %d requests, want 3 (1 + len(retry))", n)
	}
	rows, err := e.Pool.Query(context.Background(), `SELECT a.at, a.ok, a.status_code, a.error FROM notification_attempts a
		JOIN notification_deliveries d ON d.id = a.delivery_id WHERE d.channel_id = $1 ORDER BY a.id`, badCh.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ats []time.Time
	for rows.Next() {
		var at time.Time
		var ok bool
		var code *int
		var msg *string
		if err := rows.Scan(&at, &ok, &code, &msg); err != nil {
			t.Fatal(err)
		}
		if ok || code == nil || *code != 500 || msg == nil || !strings.Contains(*msg, "500") {
			t.Errorf("attempt at %s: ok %v code %v error %v", at, ok, code, msg)
		}
		ats = append(ats, at)
	}
	if len(ats) != 3 {
		t.Fatalf("%d attempts recorded, want 3", len(ats))
	}
	for i, min := range e.Retry {
		if gap := ats[i+1].Sub(ats[i]); gap < min {
			t.Errorf("attempt %d came %s after the previous, before its back-off %s", i+2, gap, min)
		}
	}
	if c := e.Count(`SELECT count(*) FROM notification_deliveries WHERE channel_id = $1 AND status = 'failed' AND attempts = 3
		AND last_error LIKE '%500%'`, badCh.ID); c != 1 {
		t.Errorf("%d failed deliveries with 3 attempts", c)
	}
	var status, severity, summary string
	if err := e.Pool.QueryRow(context.Background(), `SELECT status, severity, summary FROM signals WHERE dedup_key = $1`,
		notify.FailingKey(badCh.ID)).Scan(&status, &severity, &summary); err != nil {
		t.Fatalf("no failing signal: %v", err)
	}
	if status != "open" || severity != "warning" || !strings.Contains(summary, "notification channel bad is failing") {
		t.Errorf("signal %s %s %q", status, severity, summary)
	}
	if c := e.Count(`SELECT count(*) FROM notification_channels WHERE id = $1 AND last_error LIKE '%500%'`, badCh.ID); c != 1 {
		t.Error("the channel does not show its last error")
	}

	// Recovery: the next delivery succeeds and resolves the signal.
	bad.Status.Store(http.StatusNoContent)
	root, p = incident("lxc", "web", "warning")
	e.AppendEvent("incident.opened", root, p)
	e.Outcome(of("bad", notifyworker.ResultSent))
	if err := e.Pool.QueryRow(context.Background(), `SELECT status FROM signals WHERE dedup_key = $1`,
		notify.FailingKey(badCh.ID)).Scan(&status); err != nil || status != "resolved" {
		t.Errorf("after a success the signal is %q (%v)", status, err)
	}
	if c := e.Count(`SELECT count(*) FROM notification_channels WHERE id = $1 AND last_error IS NULL AND last_ok_at IS NOT NULL`,
		badCh.ID); c != 1 {
		t.Error("the channel still shows an error after a success")
	}
}

// A muted incident's notifications are recorded as suppressed and not sent; the incident's
// own record (its signal) is left exactly as it was. An unmuted one still goes out.
func TestMutedIncidentIsSuppressed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := newReceiver(t)
	e.Channel(notify.ChannelInput{Name: "phone", URL: r.Ntfy("alerts")})
	st := signals.New(nil)
	raised, err := st.Raise(ctx, e.Pool, signals.Signal{Kind: "incident", DedupKey: "incident:test", Severity: "critical",
		Summary: "atlas is down"})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := signals.Decide(ctx, e.Pool, raised.ID, signals.DecisionMute, &until, signals.By{Name: "op"}); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var s string
		if err := e.Pool.QueryRow(ctx, `SELECT to_jsonb(s)::text FROM signals s WHERE id = $1`, raised.ID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()
	e.Start()

	root, p := incident("proxmox-host", "atlas", "critical")
	p["incident_id"], p["status"] = raised.ID, "resolved"
	e.AppendEvent("incident.resolved", root, p)
	o := e.Outcome(of("phone", notifyworker.ResultSuppressed))
	if !strings.Contains(o.Error, "muted until "+until.Format(time.RFC3339)) {
		t.Errorf("reason %q", o.Error)
	}
	if c := e.Count(`SELECT count(*) FROM notification_deliveries WHERE status = 'suppressed' AND attempts = 0
		AND last_error LIKE 'the incident is muted until %'`); c != 1 {
		t.Errorf("%d suppressed deliveries", c)
	}
	if c := e.Count(`SELECT count(*) FROM notification_attempts`); c != 0 {
		t.Errorf("%d attempts for a suppressed delivery", c)
	}
	if after := snapshot(); after != before {
		t.Errorf("the incident changed:\nbefore %s\nafter  %s", before, after)
	}
	// Another, unmuted incident is sent; it is the only request the receiver ever got.
	root, p = incident("lxc", "db", "warning")
	e.AppendEvent("incident.opened", root, p)
	e.Outcome(of("phone", notifyworker.ResultSent))
	if got := r.Next(t); r.Count.Load() != 1 || !strings.Contains(string(got.Body), "db is down") {
		t.Errorf("receiver got %d requests, last %s", r.Count.Load(), got.Body)
	}
}

// A notifier stopped in the middle of a send (and while events keep coming) and a new one
// started on the same database: every event is delivered, none gets a second delivery, and
// the attempt cut short is neither counted nor lost.
func TestRestartLosesAndDuplicatesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t)
	e.Vars.Set("HOOK_SECRET", hookSecret)
	ch := e.Channel(notify.ChannelInput{Name: "hook", Kind: notifytarget.ChannelWebhook, URL: r.Srv.URL, SecretRef: "env:HOOK_SECRET"})
	first := e.Start()

	root, p := incident("lxc", "a", "warning")
	e1 := e.AppendEvent("incident.opened", root, p)
	e.Outcome(of("hook", notifyworker.ResultSent))
	r.Next(t)

	// The second delivery's request is in the receiver's hands when the api stops.
	release := make(chan struct{})
	r.Hold.Store(&release)
	root, p = incident("lxc", "b", "warning")
	e2 := e.AppendEvent("incident.opened", root, p)
	r.Next(t)
	first.Stop()
	e.Outcome(of("hook", notifyworker.ResultReleased))
	r.Hold.Store(nil)
	close(release)
	root, p = incident("lxc", "c", "warning")
	e3 := e.AppendEvent("incident.opened", root, p)

	second := e.Start()
	seen := map[string]bool{}
	for range 2 {
		e.Outcome(of("hook", notifyworker.ResultSent))
	}
	if err := second.Dispatcher.WaitCursor(context.Background(), e3); err != nil {
		t.Fatal(err)
	}
	// The receiver saw the cut-short request and the two after the restart; by delivery id
	// (X-Oikos-Delivery), each event once.
	for range 2 {
		seen[r.Next(t).Header.Get("X-Oikos-Delivery")] = true
	}
	for _, id := range []int64{e2, e3} {
		if !seen[fmt.Sprintf("%d:%s", id, ch.ID)] {
			t.Errorf("event %d not delivered after the restart (saw %v)", id, seen)
		}
	}
	if c := e.Count(`SELECT count(*) FROM notification_deliveries`); c != 3 {
		t.Errorf("%d deliveries for 3 events", c)
	}
	if c := e.Count(`SELECT count(DISTINCT event_id) FROM notification_deliveries WHERE status = 'sent' AND attempts = 1
		AND event_id = ANY($1)`, []int64{e1, e2, e3}); c != 3 {
		t.Errorf("%d of 3 events sent on their first counted attempt", c)
	}
	if c := e.Count(`SELECT count(*) FROM notification_attempts`); c != 3 {
		t.Errorf("%d attempts recorded, want 3 (the cut-short one is not an attempt)", c)
	}
	if c := e.Count(`SELECT last_event_id FROM notification_cursor`); int64(c) != e3 {
		t.Errorf("cursor at %d, want %d", c, e3)
	}
}

// What falls due in a channel's quiet hours (local to its time zone, across midnight) is
// deferred to their end, not dropped, and sent then.
func TestQuietHoursDefer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Set(time.Date(2026, 3, 10, 23, 30, 0, 0, berlin))
	r := newReceiver(t)
	e.Channel(notify.ChannelInput{Name: "phone", URL: r.Ntfy("alerts"), QuietStart: "22:00", QuietEnd: "07:00",
		Timezone: "Europe/Berlin"})
	loud := e.Channel(notify.ChannelInput{Name: "pager", URL: r.Ntfy("pager")})
	n := e.Start()

	root, p := incident("lxc", "web", "critical")
	e.AppendEvent("incident.opened", root, p)
	e.Outcome(of("phone", notifyworker.ResultDeferred))
	// A channel without quiet hours is not deferred.
	e.Outcome(of("pager", notifyworker.ResultSent))
	if got := r.Next(t); got.Path != "/pager" {
		t.Fatalf("sent to %s during quiet hours", got.Path)
	}
	var due time.Time
	if err := e.Pool.QueryRow(context.Background(), `SELECT next_attempt_at FROM notification_deliveries
		WHERE status = 'pending' AND channel_id <> $1`, loud.ID).Scan(&due); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 3, 11, 7, 0, 0, 0, berlin); !due.Equal(want) {
		t.Fatalf("deferred to %s, want %s", due.In(berlin), want)
	}
	e.Clock.Set(time.Date(2026, 3, 11, 7, 0, 1, 0, berlin))
	n.Wake()
	e.Outcome(of("phone", notifyworker.ResultSent))
	if got := r.Next(t); got.Path != "/alerts" {
		t.Errorf("sent to %s", got.Path)
	}
	var sent time.Time
	if err := e.Pool.QueryRow(context.Background(), `SELECT sent_at FROM notification_deliveries WHERE channel_id <> $1`,
		loud.ID).Scan(&sent); err != nil || !sent.Equal(e.Clock.Now()) {
		t.Errorf("sent at %s (%v)", sent, err)
	}
}
