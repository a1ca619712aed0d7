package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/testkit/pgtest"
	"github.com/oikos-hq/oikos/testkit/syncbuf"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// wait bounds every wait of these tests; none takes nearly as long when it passes.
const wait = 20 * time.Second

// clock is a settable clock; a zero one follows the wall clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		return time.Now()
	}
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// vars is a settable environment for env: references.
type vars struct {
	mu sync.Mutex
	m  map[string]string
}

func (v *vars) Get(k string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.m[k]
}

func (v *vars) Set(k, val string) {
	v.mu.Lock()
	if v.m == nil {
		v.m = map[string]string{}
	}
	v.m[k] = val
	v.mu.Unlock()
}

// env is one test's database, store, event bus and (once started) notifier, with what the
// worker reports and logs.
type env struct {
	t        *testing.T
	pool     *pgxpool.Pool
	url      string
	store    *notify.Store
	bus      *eventbus.Bus
	clock    *clock
	vars     *vars
	log      *syncbuf.Buffer
	logger   zerolog.Logger
	outcomes chan notify.Outcome
	backlog  []notify.Outcome
	retry    []time.Duration
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	e := &env{t: t, pool: db.Pool, url: db.URL, clock: &clock{}, vars: &vars{}, log: &syncbuf.Buffer{},
		outcomes: make(chan notify.Outcome, 256), retry: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond}}
	e.logger = zerolog.New(e.log)
	e.store = notify.NewStore(notify.StoreOptions{Pool: db.Pool, Secrets: e.secrets(), Now: e.clock.Now})
	cfg, err := pgx.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: e.logger})
	e.bus = eventbus.NewBus(eventbus.BusOptions{Pool: db.Pool, Notifier: notifier, Logger: e.logger})
	if err := e.bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		notifier.Stop()
		e.bus.Stop()
	})
	return e
}

func (e *env) secrets() notify.Secrets { return notify.Secrets{Getenv: e.vars.Get} }

// start runs a notifier over the env's database; it stops at cleanup (or earlier, by the
// test). The polls are long: the tests pass only by the bus's and the worker's wake-ups.
func (e *env) start() *notify.Notifier {
	e.t.Helper()
	n, err := notify.New(notify.Options{Pool: e.pool, Bus: e.bus, Logger: e.logger, PublicURL: "https://oikos.example",
		Secrets: e.secrets(), Retry: e.retry, Now: e.clock.Now, Poll: time.Minute,
		Sender:  &notify.Transport{Logger: e.logger, Now: e.clock.Now, Timeout: 5 * time.Second},
		Observe: func(o notify.Outcome) { e.outcomes <- o }})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(n.Stop)
	return n
}

var op = notify.Meta{Actor: "op", Method: "POST", Path: "/test", CorrelationID: "test"}

// channel creates a channel with one rule for kinds (no kinds: incident.opened and resolved).
func (e *env) channel(in notify.ChannelInput, kinds ...string) notify.Channel {
	e.t.Helper()
	if len(kinds) == 0 {
		kinds = []string{notify.KindIncidentOpened, notify.KindIncidentResolved}
	}
	if in.Rules == nil {
		in.Rules = []notify.RuleInput{{Kinds: kinds}}
	}
	c, err := e.store.CreateChannel(context.Background(), op, in)
	if err != nil {
		e.t.Fatalf("create channel %s: %v", in.Name, err)
	}
	return c
}

// appendEvent writes an outbox event as its daemon would.
func (e *env) appendEvent(typ, entityID string, payload any) int64 {
	e.t.Helper()
	id, err := eventbus.Append(context.Background(), e.pool, eventbus.Event{Type: typ, EntityID: entityID, Actor: "scheduler"}, payload)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// outcome returns the worker's first report that match accepts, waiting for it; reports
// that do not match are kept for later calls (two channels' reports interleave).
func (e *env) outcome(match func(notify.Outcome) bool) notify.Outcome {
	e.t.Helper()
	for i, o := range e.backlog {
		if match(o) {
			e.backlog = append(e.backlog[:i], e.backlog[i+1:]...)
			return o
		}
	}
	timeout := time.After(wait)
	for {
		select {
		case o := <-e.outcomes:
			if match(o) {
				return o
			}
			e.backlog = append(e.backlog, o)
		case <-timeout:
			e.t.Fatalf("timed out waiting for a delivery outcome (unmatched: %+v); log:\n%s", e.backlog, e.log.String())
		}
	}
}

func of(channel, result string) func(notify.Outcome) bool {
	return func(o notify.Outcome) bool { return o.Channel == channel && o.Result == result }
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// incident is an incident event's payload as the scheduler writes it.
func incident(rootType, name, severity string, tags ...string) (entityID string, payload map[string]any) {
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

// received is one request a receiver got.
type received struct {
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// receiver is a loopback endpoint: an ntfy server or a webhook. It answers status (200 by
// default); hold, when set, is waited on before answering.
type receiver struct {
	srv    *httptest.Server
	got    chan received
	status atomic.Int32
	body   atomic.Value // string answered
	hold   atomic.Pointer[chan struct{}]
	count  atomic.Int32
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{got: make(chan received, 64)}
	r.status.Store(http.StatusOK)
	r.body.Store(`{"id":"m1","event":"message"}`)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.count.Add(1)
		r.got <- received{Path: req.URL.Path, Query: req.URL.RawQuery, Header: req.Header.Clone(), Body: b}
		if h := r.hold.Load(); h != nil {
			select {
			case <-*h:
			case <-req.Context().Done():
			case <-time.After(wait):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(r.status.Load()))
		_, _ = io.WriteString(w, r.body.Load().(string))
	}))
	t.Cleanup(func() {
		r.srv.CloseClientConnections()
		r.srv.Close()
	})
	return r
}

// ntfy is the receiver as an ntfy shoutrrr URL (plain http, loopback).
func (r *receiver) ntfy(topic string) string {
	return fmt.Sprintf("ntfy://%s/%s?scheme=http", r.srv.Listener.Addr(), topic)
}

func (r *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case g := <-r.got:
		return g
	case <-time.After(wait):
		t.Fatal("timed out waiting for a request to the receiver")
		return received{}
	}
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

func mustDispatcher(t *testing.T, o notify.DispatcherOptions) *notify.Dispatcher {
	t.Helper()
	d, err := notify.NewDispatcher(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
