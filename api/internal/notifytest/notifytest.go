// Package notifytest is the notification packages' test support (notifyworker's,
// notifyapi's and notifytarget's tests): a test's database, service, event bus and notifier
// (Env), a loopback endpoint that stands for an ntfy server or a webhook (Receiver), and
// the payloads the daemons write. Only tests import it.
package notifytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/testkit/pgtest"
	"github.com/oikos-hq/oikos/testkit/syncbuf"
)

// Wait bounds every wait of these tests; none takes nearly as long when it passes.
const Wait = 20 * time.Second

// HookSecret is a webhook signing secret long enough to be accepted.
const HookSecret = "s3cret-webhook-key-0123456789"

// Clock is a settable clock; a zero one follows the wall clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		return time.Now()
	}
	return c.t
}

func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Vars is a settable environment for env: references.
type Vars struct {
	mu sync.Mutex
	m  map[string]string
}

func (v *Vars) Get(k string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.m[k]
}

func (v *Vars) Set(k, val string) {
	v.mu.Lock()
	if v.m == nil {
		v.m = map[string]string{}
	}
	v.m[k] = val
	v.mu.Unlock()
}

// Env is one test's database, service, event bus and (once started) notifier, with what the
// worker reports and logs. Its test package's TestMain runs pgtest.Run.
type Env struct {
	t       *testing.T
	Pool    *storage.Pool
	Service *notify.Service
	Bus     *eventbus.Bus
	Clock   *Clock
	Vars    *Vars
	// Log is what the notifier logged (through Logger).
	Log      *syncbuf.Buffer
	Logger   zerolog.Logger
	outcomes chan notifyworker.Outcome
	backlog  []notifyworker.Outcome
	// Retry is the back-off Start's worker uses (nil: Backoff).
	Retry   []time.Duration
	Backoff notifyworker.Backoff
	// FailingAfter is the worker's threshold (0: its default); Timeout bounds an attempt
	// (default 5 s).
	FailingAfter int
	Timeout      time.Duration
}

// NewEnv gives the test its own migrated database, a service on it and a running event bus.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	e := &Env{t: t, Pool: db.Pool, Clock: &Clock{}, Vars: &Vars{}, Log: &syncbuf.Buffer{},
		outcomes: make(chan notifyworker.Outcome, 256), Retry: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond}}
	e.Logger = zerolog.New(e.Log)
	e.Service = notify.NewService(notify.ServiceOptions{Pool: db.Pool, Secrets: e.Secrets(), Now: e.Clock.Now})
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: db.Pool.Config().ConnConfig, Logger: e.Logger})
	e.Bus = eventbus.NewBus(eventbus.BusOptions{Pool: db.Pool, Notifier: notifier, Logger: e.Logger})
	if err := e.Bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		notifier.Stop()
		e.Bus.Stop()
	})
	return e
}

// Secrets resolves env: references in Vars.
func (e *Env) Secrets() notify.Secrets { return notify.Secrets{Getenv: e.Vars.Get} }

// Start runs a notifier over the env's database; it stops at cleanup (or earlier, by the
// test). The polls are long: the tests pass only by the bus's and the worker's wake-ups.
func (e *Env) Start() *notifyworker.Notifier {
	e.t.Helper()
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	n, err := notifyworker.New(notifyworker.Options{Pool: e.Pool, Bus: e.Bus, Logger: e.Logger, PublicURL: "https://oikos.example",
		Secrets: e.Secrets(), Retry: e.Retry, Backoff: e.Backoff, FailingAfter: e.FailingAfter, Now: e.Clock.Now,
		Poll: time.Minute, Rand: func() float64 { return 0.5 },
		Sender:  &notifytarget.Transport{Logger: e.Logger, Now: e.Clock.Now, Timeout: timeout},
		Observe: func(o notifyworker.Outcome) { e.outcomes <- o }})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(n.Stop)
	return n
}

// Op is an operator's request, as the audit rows record it.
var Op = notify.Meta{Actor: "op", Method: "POST", Path: "/test", CorrelationID: "test"}

// Channel creates a channel with one rule for kinds (no kinds: incident.opened and resolved).
func (e *Env) Channel(in notify.ChannelInput, kinds ...string) notify.Channel {
	e.t.Helper()
	if len(kinds) == 0 {
		kinds = []string{notify.KindIncidentOpened, notify.KindIncidentResolved}
	}
	if in.Rules == nil {
		in.Rules = []notify.RuleInput{{Kinds: kinds}}
	}
	c, err := e.Service.CreateChannel(context.Background(), Op, in)
	if err != nil {
		e.t.Fatalf("create channel %s: %v", in.Name, err)
	}
	return c
}

// AppendEvent writes an outbox event as its daemon would.
func (e *Env) AppendEvent(typ, entityID string, payload any) int64 {
	e.t.Helper()
	id, err := eventbus.Append(context.Background(), e.Pool, eventbus.Event{Type: typ, EntityID: entityID, Actor: "scheduler"}, payload)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// Outcome returns the worker's first report that match accepts, waiting for it; reports
// that do not match are kept for later calls (two channels' reports interleave).
func (e *Env) Outcome(match func(notifyworker.Outcome) bool) notifyworker.Outcome {
	e.t.Helper()
	for i, o := range e.backlog {
		if match(o) {
			e.backlog = append(e.backlog[:i], e.backlog[i+1:]...)
			return o
		}
	}
	timeout := time.After(Wait)
	for {
		select {
		case o := <-e.outcomes:
			if match(o) {
				return o
			}
			e.backlog = append(e.backlog, o)
		case <-timeout:
			e.t.Fatalf("timed out waiting for a delivery outcome (unmatched: %+v); log:\n%s", e.backlog, e.Log.String())
		}
	}
}

// Of matches the outcome result of the channel named channel.
func Of(channel, result string) func(notifyworker.Outcome) bool {
	return func(o notifyworker.Outcome) bool { return o.Channel == channel && o.Result == result }
}

// Count runs a test's counting query.
func (e *Env) Count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Incident is an incident event's payload as the scheduler writes it.
func Incident(rootType, name, severity string, tags ...string) (entityID string, payload map[string]any) {
	root := uuid.NewString()
	if tags == nil {
		tags = []string{}
	}
	return root, map[string]any{
		"incident_id": uuid.NewString(), "dedup_key": "incident:" + root, "root_id": root, "root": rootType + ":" + name,
		"root_type": rootType, "severity": severity, "summary": name + " is down", "reason": "ping: no answer",
		"affected_count": 2, "affected": []map[string]any{
			{"entity_id": root, "entity": rootType + ":" + name, "health": "down", "reason": "ping: no answer"},
			{"entity_id": uuid.NewString(), "entity": "service:" + name + "-web", "health": "down", "reason": "behind " + name},
		},
		"tags": tags, "status": "open", "opened_at": time.Now().UTC().Format(time.RFC3339),
	}
}

// Received is one request a receiver got.
type Received struct {
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// Receiver is a loopback endpoint: an ntfy server or a webhook. It answers Status (200 by
// default) with Body; Hold, when set, is waited on before answering.
type Receiver struct {
	Srv    *httptest.Server
	got    chan Received
	Status atomic.Int32
	Body   atomic.Value // string answered
	Hold   atomic.Pointer[chan struct{}]
	Count  atomic.Int32
}

// NewReceiver starts a receiver; it stops at cleanup.
func NewReceiver(t *testing.T) *Receiver {
	t.Helper()
	r := &Receiver{got: make(chan Received, 64)}
	r.Status.Store(http.StatusOK)
	r.Body.Store(`{"id":"m1","event":"message"}`)
	r.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.Count.Add(1)
		r.got <- Received{Path: req.URL.Path, Query: req.URL.RawQuery, Header: req.Header.Clone(), Body: b}
		if h := r.Hold.Load(); h != nil {
			select {
			case <-*h:
			case <-req.Context().Done():
			case <-time.After(Wait):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(r.Status.Load()))
		_, _ = io.WriteString(w, r.Body.Load().(string))
	}))
	t.Cleanup(func() {
		r.Srv.CloseClientConnections()
		r.Srv.Close()
	})
	return r
}

// Ntfy is the receiver as an ntfy shoutrrr URL (plain http, loopback).
func (r *Receiver) Ntfy(topic string) string {
	return fmt.Sprintf("ntfy://%s/%s?scheme=http", r.Srv.Listener.Addr(), topic)
}

// Next is the next request the receiver got, waiting for it.
func (r *Receiver) Next(t *testing.T) Received {
	t.Helper()
	select {
	case g := <-r.got:
		return g
	case <-time.After(Wait):
		t.Fatal("timed out waiting for a request to the receiver")
		return Received{}
	}
}

// Decode unmarshals b into v or fails the test.
func Decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}
