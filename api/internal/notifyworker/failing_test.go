package notifyworker_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
)

// flaky is a webhook that fails its first requests as a script says (time out after reading
// the request, answer 503, drop the connection as a host that is down) and answers 200 once
// back is set. It keeps the Idempotency-Key of every request and of every request it
// answered 200.
type flaky struct {
	mu       sync.Mutex
	script   []string // "timeout", "503", "down"
	back     bool
	keys     []string // every request's key, in order
	accepted []string // the keys answered 200, in order
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Read the body first: the server notices the client giving up only after that.
	_, _ = io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	key := r.Header.Get(notifytarget.HeaderIdempotencyKey)
	f.keys = append(f.keys, key)
	step := "down"
	if len(f.script) > 0 {
		step, f.script = f.script[0], f.script[1:]
	} else if f.back {
		step = "ok"
		f.accepted = append(f.accepted, key)
	}
	f.mu.Unlock()
	switch step {
	case "timeout":
		// The receiver got the message; its answer never reaches the api in time.
		<-r.Context().Done()
	case "503":
		w.WriteHeader(http.StatusServiceUnavailable)
	case "down":
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = c.Close()
		}
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *flaky) snapshot() (keys, accepted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...), append([]string(nil), f.accepted...)
}

// A target that times out (after it got the message), answers 503 and is down for a while,
// while an incident opens, updates and resolves: every attempt of a transition carries the
// same key, the target counts as failing after FailingAfter attempts (signal, event, audit
// row and one notification to the healthy channel, once), and when it is back it gets each
// transition exactly once, in order, and recovers (once). Counts compared exactly.
func TestTargetThatFailsGetsEachTransitionOnceWhenBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.Retry = nil
	e.Backoff = notifyworker.Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, GiveUpAfter: time.Hour}
	e.FailingAfter = 3
	e.Timeout = 300 * time.Millisecond
	hook := &flaky{script: []string{"timeout", "503", "down"}}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	pager := newReceiver(t)
	e.Vars.Set("HOOK_SECRET", hookSecret)
	kinds := []string{notify.KindIncidentOpened, notify.KindIncidentUpdated, notify.KindIncidentResolved}
	hc := e.Channel(notify.ChannelInput{Name: "hook", Kind: notifytarget.ChannelWebhook, URL: srv.URL + "/hook",
		SecretRef: "env:HOOK_SECRET"}, kinds...)
	e.Channel(notify.ChannelInput{Name: "pager", URL: pager.Ntfy("alerts")}, notify.KindDriftFound)
	count := func(sql string, args ...any) int { return e.Count(sql, args...) }
	eventsBefore := count(`SELECT count(*) FROM events WHERE type LIKE 'notification_target.%'`)
	e.Start()

	root, p := incident("lxc", "web", "warning")
	var transitions []int64
	for _, typ := range kinds {
		transitions = append(transitions, e.AppendEvent(typ, root, p))
	}
	// Three failed attempts of the first transition; the third makes the channel failing.
	for i := 1; i <= 3; i++ {
		if o := e.Outcome(of("hook", notifyworker.ResultRetry)); o.Attempt != i {
			t.Fatalf("failure %d: %+v", i, o)
		}
	}
	c, err := e.Service.Channel(ctx, "hook")
	if err != nil || c.State != "failing" || c.ConsecutiveFailures < 3 || c.LastError == nil || c.FailingSince == nil {
		t.Fatalf("after 3 failures the channel is %+v (%v)", c, err)
	}
	// The healthy channel hears of it, whatever its rules.
	got := pager.Next(t)
	if !strings.Contains(string(got.Body), "in a row failed") {
		t.Errorf("the healthy channel got %s", got.Body)
	}
	e.Outcome(of("pager", notifyworker.ResultSent))

	hook.mu.Lock()
	hook.back = true
	hook.mu.Unlock()
	for range kinds {
		e.Outcome(of("hook", notifyworker.ResultSent))
	}
	got = pager.Next(t)
	if !strings.Contains(string(got.Body), "delivery succeeded") {
		t.Errorf("the healthy channel got %s", got.Body)
	}
	e.Outcome(of("pager", notifyworker.ResultSent))

	keys, accepted := hook.snapshot()
	var want []string
	for _, id := range transitions {
		want = append(want, strings.Join([]string{itoa(id), hc.ID}, ":"))
	}
	if strings.Join(accepted, " ") != strings.Join(want, " ") {
		t.Errorf("accepted %v, want each transition once in order %v", accepted, want)
	}
	distinct := map[string]int{}
	for _, k := range keys {
		distinct[k]++
	}
	if len(distinct) != len(kinds) {
		t.Errorf("%d distinct keys over %d requests, want %d (one per transition): %v", len(distinct), len(keys), len(kinds), keys)
	}
	// Every failed attempt was the first transition's, with its key.
	if n := distinct[want[0]]; n != len(keys)-2 {
		t.Errorf("the first transition was tried %d times of %d requests", n, len(keys))
	}
	if n := count(`SELECT count(*) FROM notification_attempts a JOIN notification_deliveries d ON d.id = a.delivery_id
		WHERE d.channel_id = $1`, hc.ID); n > len(keys) || n < 5 {
		// Go's transport itself resends a request carrying Idempotency-Key once on a reused
		// connection that died before answering (the "down" step), with the same key: so a
		// receiver may see more requests than attempts, never fewer.
		t.Errorf("%d attempts recorded, the receiver got %d requests", n, len(keys))
	}
	if n := count(`SELECT count(*) FROM notification_deliveries WHERE channel_id = $1 AND status = 'sent'`, hc.ID); n != 3 {
		t.Errorf("%d deliveries sent to hook, want 3", n)
	}
	if n := count(`SELECT count(*) FROM notification_deliveries WHERE channel_id = $1`, hc.ID); n != 3 {
		t.Errorf("%d deliveries to hook, want 3", n)
	}
	for typ, want := range map[string]int{notify.EventTargetFailing: 1, notify.EventTargetRecovered: 1} {
		if n := count(`SELECT count(*) FROM events WHERE type = $1`, typ); n != want {
			t.Errorf("%d %s events, want %d", n, typ, want)
		}
		if n := count(`SELECT count(*) FROM audit_log WHERE action = $1 AND actor = 'api'`, typ); n != want {
			t.Errorf("%d %s audit rows, want %d", n, typ, want)
		}
	}
	if n := count(`SELECT count(*) FROM events WHERE type LIKE 'notification_target.%'`); n != eventsBefore+2 {
		t.Errorf("%d health events, want %d", n, eventsBefore+2)
	}
	if n := count(`SELECT count(*) FROM signals WHERE dedup_key = $1 AND status = 'resolved'`, notify.FailingKey(hc.ID)); n != 1 {
		t.Errorf("%d resolved failing signals, want 1", n)
	}
	c, err = e.Service.Channel(ctx, "hook")
	if err != nil || c.State != "ok" || c.ConsecutiveFailures != 0 || c.LastError != nil || c.FailingSince != nil || c.LastOKAt == nil {
		t.Errorf("after the recovery the channel is %+v (%v)", c, err)
	}
	if n := pager.Count.Load(); n != 2 {
		t.Errorf("the healthy channel got %d messages, want 2 (failing, recovered)", n)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A 4xx other than 408 and 429 fails a delivery at once with the reason; 429 is retried.
func TestPermanentRefusalIsNotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Retry = nil
	e.Backoff = notifyworker.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}
	r := newReceiver(t)
	r.Status.Store(http.StatusNotFound)
	e.Vars.Set("HOOK_SECRET", hookSecret)
	c := e.Channel(notify.ChannelInput{Name: "gone", Kind: notifytarget.ChannelWebhook, URL: r.Srv.URL + "/hook",
		SecretRef: "env:HOOK_SECRET"})
	e.Start()
	root, p := incident("lxc", "web", "warning")
	e.AppendEvent("incident.opened", root, p)
	o := e.Outcome(of("gone", notifyworker.ResultFailed))
	if o.Attempt != 1 || !strings.Contains(o.Error, "404") || !strings.Contains(o.Error, "not retried") {
		t.Errorf("a 404: %+v", o)
	}
	r.Status.Store(http.StatusTooManyRequests)
	root, p = incident("lxc", "db", "warning")
	e.AppendEvent("incident.opened", root, p)
	e.Outcome(of("gone", notifyworker.ResultRetry))
	r.Status.Store(http.StatusOK)
	e.Outcome(of("gone", notifyworker.ResultSent))
	if n := e.Count(`SELECT count(*) FROM notification_attempts a JOIN notification_deliveries d ON d.id = a.delivery_id
		WHERE d.channel_id = $1`, c.ID); n != 3 {
		t.Errorf("%d attempts, want 3 (404 once, 429, 200)", n)
	}
}

// The back-off doubles from Initial, is capped at Max, and jitter spreads it within ±Jitter
// but never past Max.
func TestBackoffIsCappedExponential(t *testing.T) {
	b := notifyworker.Backoff{Initial: 5 * time.Second, Max: 5 * time.Minute}
	var got []time.Duration
	for i := 1; i <= 9; i++ {
		got = append(got, b.Delay(i, 0.5))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	b.Jitter = 0.2
	if lo, hi := b.Delay(2, 0), b.Delay(2, 0.999); lo != 8*time.Second || hi < 11*time.Second || hi > 12*time.Second {
		t.Errorf("jitter of 10s: %s .. %s", lo, hi)
	}
	if d := b.Delay(20, 0.999); d != 5*time.Minute {
		t.Errorf("capped with jitter: %s", d)
	}
}
