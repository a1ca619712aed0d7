// Package placement_test moves guests between the nodes of the demo fleet's cluster end to
// end and watches the graph follow: the api (with its placement follower), the lab simulator,
// and the scheduler's executor and drift wired as the daemon wires them (a completed
// migration triggers a placement sweep). The package shares one stack, built on first use.
package placement_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	schedapp "github.com/oikos-hq/oikos/scheduler/app"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { e2estack.Main(m, shared.TB) }

var shared = e2estack.NewShared("e2e-placement", "placement stack", build)

// stack is the api, the lab and one scheduler's executor and drift over one database.
type stack struct {
	db       *pgtest.DB
	client   *e2estack.Client
	operator string
	sim      *labsim.Sim
	pool     *remote.Pool
	fleet    *schedapp.Fleet
	notifier *eventbus.Notifier
	drift    *schedapp.Drift
}

// The shared scheduler's placement interval is out of reach of a test: what moves the graph
// there is a migration run through Oikos (PlacementNow). TestControlMigrationFollowed runs a
// drift of its own with a short interval.
const sharedPlacementEvery = time.Hour

func build(t *e2estack.PackageTB) (s *stack, err error) {
	defer e2estack.Recover(&err)
	ctx := context.Background()
	log := zerolog.Nop()
	s = &stack{db: pgtest.New(t)}
	api, apiURL, err := e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: s.db.URL, SeedOnStart: true, Demo: true}, log)
	if err != nil {
		return nil, err
	}
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "operator", Role: "operator", Into: &s.operator}); err != nil {
		return nil, err
	}
	s.client = &e2estack.Client{URL: apiURL, HTTP: http.DefaultClient}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	fl, err := labsim.FleetFromInventory(seeds.Inventory())
	if err != nil {
		return nil, err
	}
	if s.sim, err = labsim.New(fl, labsim.Options{StateDir: t.TempDir(), Listen: func(string) string { return "127.0.0.1:0" },
		AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}, ControlAddr: "127.0.0.1:0", Logger: log}); err != nil {
		return nil, err
	}
	if err := s.sim.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(s.sim.Stop)
	s.pool = remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: schedapp.NewHostKeys(s.db.Pool, log),
		DialTimeout: 10 * time.Second, Logger: log, Dial: s.sim.DialContext})
	t.Cleanup(s.pool.Close)
	connCfg, err := pgx.ParseConfig(s.db.URL)
	if err != nil {
		return nil, err
	}
	s.notifier = eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: log})
	s.fleet = schedapp.NewFleet(s.db.Pool, schedapp.FleetOptions{Logger: log})
	// As scheduler/app wires them: a completed migration asks drift for a placement sweep.
	var drift *schedapp.Drift
	ex := schedapp.NewExecutor(schedapp.ExecutorOptions{Pool: s.db.Pool, SSH: s.pool, Fleet: s.fleet, Notifier: s.notifier,
		Logger: log, SchedulerID: "e2e-placement", OnEnd: func(x schedapp.ExecutorEnded) {
			if x.Status == schedapp.ExecCompleted && schedapp.IsMigration(x.Command) && drift != nil {
				drift.PlacementNow()
			}
		}})
	if drift, err = schedapp.NewDrift(schedapp.DriftOptions{Pool: s.db.Pool, SSH: s.pool, Fleet: s.fleet, Notifier: s.notifier,
		Logger: log, Metrics: metrics.NewRegistry(), SchedulerID: "e2e-placement", PlacementEvery: sharedPlacementEvery}); err != nil {
		return nil, err
	}
	if err := s.notifier.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(s.notifier.Stop)
	s.drift = drift
	for _, part := range []interface {
		Start(context.Context) error
		Stop()
	}{ex, drift} {
		if err := part.Start(ctx); err != nil {
			return nil, err
		}
		t.Cleanup(part.Stop)
	}
	return s, nil
}

// hostsOf is the sources of guest's current hosts edges and its host attribute.
func (s *stack) hostsOf(t testing.TB, guest string) (string, string) {
	t.Helper()
	var hosts, attr string
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(h.slug, ',' ORDER BY h.slug), ''),
coalesce(min(g.attributes->>'host'), '')
FROM entities g LEFT JOIN relationships r ON r.target_id = g.id AND r.type = 'hosts' AND r.valid_to IS NULL
LEFT JOIN entities h ON h.id = r.source_id WHERE g.slug = $1`, guest).Scan(&hosts, &attr); err != nil {
		t.Fatal(err)
	}
	return hosts, attr
}

// waitMoved waits for the guest.moved event of guest (re-checked on every outbox
// notification) and returns when it was appended.
func (s *stack) waitMoved(t testing.TB, guest string, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	e2estack.Eventually(t, s.db.URL, within, 200*time.Millisecond, "guest.moved for "+guest, func() (bool, string) {
		err := s.db.Pool.QueryRow(context.Background(), `SELECT at FROM events WHERE type = 'guest.moved' AND payload->>'slug' = $1
ORDER BY id DESC LIMIT 1`, guest).Scan(&at)
		return err == nil, fmt.Sprint(err)
	})
	return at
}

func (s *stack) movedEvents(t testing.TB, guest string) int {
	t.Helper()
	var n int
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE type = 'guest.moved' AND payload->>'slug' = $1`,
		guest).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A guest migrated behind Oikos's back (the lab's control endpoint, as `qm migrate` by hand
// would) is followed within one placement interval: its hosts edge moves to the new node,
// its host attribute too, with one guest.moved event.
func TestControlMigrationFollowed(t *testing.T) {
	s := shared.Get(t)
	ctx := context.Background()
	const every = 500 * time.Millisecond
	d, err := schedapp.NewDrift(schedapp.DriftOptions{Pool: s.db.Pool, SSH: s.pool, Fleet: s.fleet, Logger: zerolog.Nop(),
		Metrics: metrics.NewRegistry(), SchedulerID: "e2e-placement-fast", PlacementEvery: every, Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Stop()

	if h, attr := s.hostsOf(t, "lxc:redis"); h != "proxmox-host:boreas" || attr != "boreas" {
		t.Fatalf("redis starts on %q (host %q), want boreas", h, attr)
	}
	body, _ := json.Marshal(map[string]string{"target": "ceres"})
	resp, err := http.Post("http://"+s.sim.ControlAddr()+"/guests/boreas/203/migrate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("migrate: %d", resp.StatusCode)
	}
	migrated := time.Now()
	at := s.waitMoved(t, "lxc:redis", 2*every+10*time.Second)
	t.Logf("migration → guest.moved: %s (placement interval %s)", at.Sub(migrated).Round(time.Millisecond), every)
	if h, attr := s.hostsOf(t, "lxc:redis"); h != "proxmox-host:ceres" || attr != "ceres" {
		t.Errorf("redis now on %q (host %q), want ceres", h, attr)
	}
	if n := s.movedEvents(t, "lxc:redis"); n != 1 {
		t.Errorf("%d guest.moved events for redis, want 1", n)
	}
}

// An approved `pct migrate` run through Oikos is gated as a configuration change and, once
// it succeeded, followed at once (no wait for the placement interval, an hour here).
func TestApprovedPctMigrateFollowed(t *testing.T) {
	s := shared.Get(t)
	ctx := context.Background()
	op := s.client.API(t, s.operator)
	var ex apiclient.Execution
	e2estack.OK(t, &ex)(op.RequestExecution(ctx, apiclient.RunRequest{Target: "proxmox-host:atlas",
		Command: "pct migrate 104 boreas --restart", Purpose: "move prowlarr to boreas"}))
	if ex.Status != "pending_approval" || ex.ApprovalId == nil || string(ex.RiskClass) != "config_mutation" {
		t.Fatalf("pct migrate answered %s (%s), want pending_approval as a config_mutation", ex.Status, ex.RiskClass)
	}
	e2estack.OK(t, nil)(op.DecideApproval(ctx, ex.ApprovalId.String(), apiclient.DecisionRequest{Decision: "approve", Via: "button",
		Reason: apiclient.Ptr("e2e")}))
	var finished time.Time
	e2estack.Eventually(t, s.db.URL, 30*time.Second, 200*time.Millisecond, "the migration completed", func() (bool, string) {
		var st string
		var fin *time.Time
		_ = s.db.Pool.QueryRow(ctx, `SELECT status, finished_at FROM executions WHERE id = $1`, ex.Id.String()).Scan(&st, &fin)
		if fin != nil {
			finished = *fin
		}
		return st == "completed", st
	})
	at := s.waitMoved(t, "lxc:prowlarr", 20*time.Second)
	t.Logf("migration completed → guest.moved: %s (placement interval %s)", at.Sub(finished).Round(time.Millisecond), sharedPlacementEvery)
	if h, attr := s.hostsOf(t, "lxc:prowlarr"); h != "proxmox-host:boreas" || attr != "boreas" {
		t.Errorf("prowlarr now on %q (host %q), want boreas", h, attr)
	}
	var actor string
	if err := s.db.Pool.QueryRow(ctx, `SELECT actor FROM audit_log WHERE action = 'guest.move' ORDER BY id DESC LIMIT 1`).Scan(&actor); err != nil ||
		actor != "drift" {
		t.Errorf("guest.move audited by %q (%v)", actor, err)
	}
	if n := s.movedEvents(t, "lxc:prowlarr"); n != 1 {
		t.Errorf("%d guest.moved events for prowlarr, want 1", n)
	}
}

// BenchmarkMigrationFollowed is the time from a migration (the lab's control endpoint) to the
// graph following it (the guest.moved event), when a placement sweep starts at once, as it
// does after a migration run through Oikos: the sweep (one pvesh call), the report stored,
// the api's follower moving the hosts edge. A migration behind Oikos's back adds up to one
// OIKOS_PLACEMENT_INTERVAL to this.
func BenchmarkMigrationFollowed(b *testing.B) {
	s := shared.Get(b)
	const guest, vmid = "lxc:grafana", 209
	nodes := []string{"atlas", "boreas", "ceres"}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		h, _ := s.hostsOf(b, guest)
		from := strings.TrimPrefix(h, "proxmox-host:")
		to := nodes[0]
		for _, n := range nodes {
			if n != from {
				to = n
				break
			}
		}
		before := s.movedEvents(b, guest)
		body, _ := json.Marshal(map[string]string{"target": to})
		start := time.Now()
		resp, err := http.Post("http://"+s.sim.ControlAddr()+fmt.Sprintf("/guests/%s/%d/migrate", from, vmid), "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("migrate %s/%d to %s: %d", from, vmid, to, resp.StatusCode)
		}
		s.drift.PlacementNow()
		e2estack.Eventually(b, s.db.URL, 20*time.Second, 200*time.Millisecond, "guest.moved for "+guest, func() (bool, string) {
			n := s.movedEvents(b, guest)
			return n > before, fmt.Sprint(n)
		})
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-graph")
}
