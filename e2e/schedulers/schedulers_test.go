// Package schedulers_test runs several schedulers against one labsim fleet, wired as the
// daemon wires them (lease manager, SSH pool, check runner fenced by lease, executor that
// claims only its units), and checks that they share the work without doing any of it twice
// and take over from one that dies.
package schedulers_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	schedapp "github.com/oikos-hq/oikos/scheduler/app"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { e2estack.Main(m) }

// Lease timings of the tests: short enough for failover in seconds, long enough that a tick
// delayed by a loaded machine (the race detector, suites in parallel on 2 cores) does not
// lapse a live scheduler's membership and move its units.
const (
	renew  = 250 * time.Millisecond
	expiry = 2 * time.Second
)

// scheduler is one scheduler's parts.
type scheduler struct {
	id     string
	db     *pgxpool.Pool // its own, as each daemon has
	fleet  *schedapp.Fleet
	leases *schedapp.Leases
	pool   *remote.Pool
	runner *schedapp.CheckRunner
	exec   *schedapp.Executor
	notif  *eventbus.Notifier
	dead   bool
}

func (s *scheduler) kill() {
	// What kill -9 leaves behind: nothing renews, nothing is handed back, and the process's
	// connections close (Postgres releases its session lock).
	s.leases.Halt()
	s.runner.Stop()
	s.exec.Stop()
	s.notif.Stop()
	s.pool.Close()
	s.leases.DropSession()
	s.db.Close()
	s.dead = true
}

type lab struct {
	db       *pgtest.DB
	client   *e2estack.Client
	operator string
	sim      *labsim.Sim
	signer   ssh.Signer
	scheds   []*scheduler
	// spread is the runners' InitialSpread (default 500 ms): a benchmark spreads the first
	// runs over the whole interval so the rate is steady.
	spread time.Duration
	// flushEvery is the results writers' FlushEvery (0: the daemon's 1 s, and 30 s for a
	// healthy repetition); startLab sets 250 ms.
	flushEvery time.Duration

	// changes logs every lease change, shown when a test fails: which hand-over explains a
	// double or a gap.
	changesMu sync.Mutex
	changes   []string
	began     time.Time

	// runs records every run of every check, by the scheduler that ran it, stamped with the
	// run's start as its result is (checkrun Options.Ran): what the doubles and the failover
	// are judged by, rather than the test's own clock.
	runsMu sync.Mutex
	runs   []checkRun
	ranC   chan struct{} // a run was recorded
}

// checkRun is one run of a check.
type checkRun struct {
	by, check, unit string
	at              time.Time
}

func (l *lab) recordRun(by, check, unit string, at time.Time) {
	l.runsMu.Lock()
	l.runs = append(l.runs, checkRun{by: by, check: check, unit: unit, at: at})
	l.runsMu.Unlock()
	select {
	case l.ranC <- struct{}{}:
	default:
	}
}

// runsIn lists the runs that started in [from, to), by start.
func (l *lab) runsIn(from, to time.Time) []checkRun {
	l.runsMu.Lock()
	defer l.runsMu.Unlock()
	var out []checkRun
	for _, r := range l.runs {
		if !r.at.Before(from) && r.at.Before(to) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// waitRuns waits (up to within, a bound on the wait and not what is asserted) until done
// is true of the runs recorded, re-evaluating at each run.
func (l *lab) waitRuns(t *testing.T, within time.Duration, what string, done func([]checkRun) (bool, string)) {
	t.Helper()
	deadline := time.After(within)
	for {
		l.runsMu.Lock()
		ok, why := done(l.runs)
		l.runsMu.Unlock()
		if ok {
			return
		}
		select {
		case <-l.ranC:
		case <-time.After(time.Second): // re-evaluate now and then: done may depend on more than runs
		case <-deadline:
			t.Fatalf("waiting %s for %s: %s", within, what, why)
		}
	}
}

// recordChange logs one scheduler's lease change.
func (l *lab) recordChange(id string, c schedapp.LeaseChange) {
	l.changesMu.Lock()
	defer l.changesMu.Unlock()
	if len(c.Acquired)+len(c.Releasing)+len(c.Released) == 0 {
		return
	}
	l.changes = append(l.changes, fmt.Sprintf("%8.3fs %s: holds %d; took %v; handing over %v; released %v",
		time.Since(l.began).Seconds(), id, len(c.Held), c.Acquired, c.Releasing, c.Released))
}

func startLab(t *testing.T) *lab { return startLabWith(t, "") }

// startLabWith seeds the inventory file (the demo fleet when "") and serves it from labsim.
func startLabWith(t *testing.T, inventory string) *lab {
	t.Helper()
	ctx := context.Background()
	l := &lab{db: pgtest.New(t), flushEvery: 250 * time.Millisecond, began: time.Now(), ranC: make(chan struct{}, 1)}
	t.Cleanup(func() {
		if t.Failed() {
			l.changesMu.Lock()
			t.Logf("lease changes:\n%s", strings.Join(l.changes, "\n"))
			l.changesMu.Unlock()
		}
	})
	cfg := apiapp.Config{DatabaseURL: l.db.URL, SeedOnStart: true, Demo: inventory == "", InventoryFile: inventory}
	api, apiURL, err := e2estack.StartAPI(ctx, t, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "operator", Role: "operator", Into: &l.operator}); err != nil {
		t.Fatal(err)
	}
	l.client = &e2estack.Client{URL: apiURL, HTTP: http.DefaultClient}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	l.signer, _ = ssh.NewSignerFromKey(priv)
	invBytes := seeds.Inventory()
	if inventory != "" {
		if invBytes, err = os.ReadFile(inventory); err != nil {
			t.Fatal(err)
		}
	}
	fleet, err := labsim.FleetFromInventory(invBytes)
	if err != nil {
		t.Fatal(err)
	}
	if l.sim, err = labsim.New(fleet, labsim.Options{StateDir: t.TempDir(), Listen: func(string) string { return "127.0.0.1:0" },
		AuthorizedKeys: []ssh.PublicKey{l.signer.PublicKey()}, FreshBackups: true, Logger: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	if err := l.sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.sim.Stop)
	// Every check every second: a window of a few seconds holds several runs of each.
	if _, err := l.db.Pool.Exec(ctx, `UPDATE check_defs SET interval_seconds = 1, timeout_seconds = 1`); err != nil {
		t.Fatal(err)
	}
	return l
}

// add builds a scheduler and joins it (its first lease tick), without starting its work.
func (l *lab) add(t *testing.T, id string) *scheduler { return l.addWith(t, id, renew, expiry) }

// addWith is add with lease timings of its own.
func (l *lab) addWith(t *testing.T, id string, renew, expiry time.Duration) *scheduler {
	t.Helper()
	log := zerolog.Nop()
	s := &scheduler{id: id}
	spread := l.spread
	if spread == 0 {
		spread = 500 * time.Millisecond
	}
	var err error
	if s.db, err = pg.Connect(context.Background(), l.db.URL, 30, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.db.Close)
	session, err := pgx.ParseConfig(l.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon's wiring of a lease change (scheduler/app LeaseWork), filled in below.
	work := &schedapp.LeaseWork{Log: log}
	if s.leases, err = schedapp.NewLeases(schedapp.LeasesOptions{Pool: s.db, ID: id, Logger: log, Renew: renew, Expiry: expiry,
		Session: session, Busy: work.Busy,
		OnChange: func(c schedapp.LeaseChange) {
			l.recordChange(id, c)
			work.OnChange(context.Background(), c)
		}}); err != nil {
		t.Fatal(err)
	}
	s.pool = remote.NewPool(remote.PoolOptions{Signer: l.signer, HostKeys: schedapp.NewHostKeys(s.db, log),
		DialTimeout: 5 * time.Second, Logger: log, Dial: l.sim.DialContext})
	connCfg, err := pgx.ParseConfig(l.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	s.notif = eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: log})
	fleet := schedapp.NewFleet(s.db, schedapp.FleetOptions{Logger: log})
	s.fleet = fleet
	s.exec = schedapp.NewExecutor(schedapp.ExecutorOptions{Pool: s.db, SSH: s.pool, Fleet: fleet, Notifier: s.notif,
		Logger: log, SchedulerID: id, Owned: s.leases.Owned, SweepEvery: expiry})
	if s.runner, err = schedapp.NewCheckRunner(schedapp.CheckRunnerOptions{Pool: s.db, SSH: s.pool, Fleet: fleet,
		Notifier: s.notif, Logger: log, Metrics: metrics.NewRegistry(), InitialSpread: spread,
		// Healthy repetitions are written within a second too, so a window can be counted
		// right after it closes (the daemon's defaults with defaultFlush).
		FlushEvery: l.flushEvery, UnchangedFlushEvery: 2 * l.flushEvery,
		Lease: s.leases.Lease, Holder: id,
		Ran: func(check, unit string, at time.Time) { l.recordRun(id, check, unit, at) }}); err != nil {
		t.Fatal(err)
	}
	work.Executor, work.Runner, work.Fleet, work.SSH = s.exec, s.runner, fleet, s.pool
	if err := s.leases.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.scheds = append(l.scheds, s)
	t.Cleanup(func() {
		if !s.dead {
			s.runner.Stop()
			s.exec.Stop()
			s.leases.Stop()
			s.notif.Stop()
			s.pool.Close()
		}
	})
	return s
}

func (s *scheduler) start(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := s.notif.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []interface{ Start(context.Context) error }{s.leases, s.exec, s.runner} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// settle ticks every live scheduler's leases until the assignment is stable: two rounds in a
// row change nothing, nothing is being handed over, and every live scheduler owns a share.
func (l *lab) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for stable := 0; stable < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the leases did not settle within 30 s: %s", last)
		}
		var view []string
		for _, s := range l.scheds {
			if s.dead {
				continue
			}
			if err := s.leases.Tick(context.Background()); err != nil {
				t.Fatal(err)
			}
			var held []string
			for _, x := range s.leases.Held() {
				held = append(held, fmt.Sprintf("%s@%d/%v", x.Unit, x.Generation, x.Releasing))
			}
			if len(s.leases.Owned()) == 0 || len(s.leases.Owned()) != len(held) {
				held = append(held, "unsettled")
			}
			view = append(view, s.id+": "+strings.Join(held, " "))
		}
		now := strings.Join(view, "; ")
		if now == last && !strings.Contains(now, "unsettled") {
			stable++
		} else {
			stable = 0
		}
		last = now
	}
}

// samples counts, per check and metric, the samples written in [from, to): one per run.
func (l *lab) samples(t *testing.T, from, to time.Time) map[string]int {
	t.Helper()
	rows, err := l.db.Pool.Query(context.Background(), `SELECT cd.slug || ' ' || s.name, count(*) FROM metric_samples s
JOIN check_defs cd ON cd.id = s.check_id WHERE s.at >= $1 AND s.at < $2 GROUP BY 1`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var k string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { out[k] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// assertOncePerInterval fails when any check ran twice in the window: two schedulers ran it.
// It judges by the runs the schedulers recorded, not by counts against the window's length,
// so a machine that starts runs late (the race detector, suites on 2 cores) changes nothing:
//   - per check, the runs in the window come from one scheduler, or — when its unit changed
//     hands in the window — from one and then the other, never back and forth;
//   - at such a hand-over the new holder's first run starts at least one interval, less the
//     jitter on both runs, after the old holder's last (it continues from the stored run; a
//     late start only widens the gap);
//   - every check with stored samples in the window ran in it (counts, from the database).
func assertOncePerInterval(t *testing.T, l *lab, counts map[string]int, from, to time.Time) {
	t.Helper()
	const interval = time.Second
	const early = interval/10 + interval/20 // two jitters (±interval/20) and the slack a run may start early by
	byCheck := map[string][]checkRun{}
	for _, r := range l.runsIn(from, to) {
		byCheck[r.check] = append(byCheck[r.check], r)
	}
	var bad []string
	for c, rs := range byCheck {
		switches := 0
		for i := 1; i < len(rs); i++ {
			if rs[i].by == rs[i-1].by {
				continue
			}
			switches++
			if gap := rs[i].at.Sub(rs[i-1].at); gap < interval-early {
				bad = append(bad, fmt.Sprintf("%s: %s ran it %s after %s did", c, rs[i].by, gap.Round(time.Millisecond), rs[i-1].by))
			}
		}
		if switches > 1 {
			bad = append(bad, fmt.Sprintf("%s: run by schedulers in turn (%d switches of %d runs)", c, switches, len(rs)))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("a check ran twice (two schedulers) in the window of %s: %s", to.Sub(from).Round(time.Millisecond), strings.Join(bad, "; "))
	}
	if len(counts) < 20 {
		t.Fatalf("only %d checks wrote samples in the window", len(counts))
	}
}

// hostAddrs are the declared SSH addresses of the labsim hosts.
func (l *lab) hostAddrs() []string {
	var out []string
	for _, h := range l.sim.Snapshot().Hosts {
		out = append(out, h.Addr)
	}
	return out
}

func testShare(t *testing.T, n int) {
	l := startLab(t)
	for i := range n {
		l.add(t, fmt.Sprintf("s%d", i))
	}
	l.settle(t)
	for _, s := range l.scheds {
		if len(s.leases.Owned()) == 0 {
			t.Fatalf("%s owns nothing", s.id)
		}
		s.start(t)
	}
	time.Sleep(3 * time.Second) // first runs spread, connections made
	from := time.Now()
	time.Sleep(5 * time.Second)
	to := time.Now()
	time.Sleep(1500 * time.Millisecond) // the window's last results written
	var runs []string
	for _, s := range l.scheds {
		st := s.runner.Status()
		runs = append(runs, fmt.Sprintf("%s: %d units, %d runs", s.id, len(s.leases.Owned()), st.RunsTotal))
	}
	t.Log(strings.Join(runs, "; "))
	assertOncePerInterval(t, l, l.samples(t, from, to), from, to)

	// One SSH connection per host, fleet-wide.
	for _, addr := range l.hostAddrs() {
		dials := 0
		for _, s := range l.scheds {
			dials += s.pool.DialCount(addr)
		}
		if dials > 1 {
			t.Errorf("%s dialled %d times across %d schedulers, want at most 1", addr, dials, n)
		}
	}
	for _, s := range l.scheds {
		if s.runner.Status().RunsTotal == 0 {
			t.Errorf("%s ran nothing", s.id)
		}
	}
}

// Two and three schedulers: every check once per interval, one connection per host.
func TestTwoSchedulersShareTheFleet(t *testing.T)   { testShare(t, 2) }
func TestThreeSchedulersShareTheFleet(t *testing.T) { testShare(t, 3) }

// kill -9 of one of two: its units move at once (its Postgres session closed) and their checks resume; its
// running execution becomes interrupted and is never re-run; a joining scheduler then takes
// its share without a gap or a double.
func TestFailoverAndJoin(t *testing.T) {
	l := startLab(t)
	// A 4 s expiry: a takeover well inside it can only come from seeing b's session close.
	const failExpiry = 4 * time.Second
	a, b := l.addWith(t, "a", renew, failExpiry), l.addWith(t, "b", renew, failExpiry)
	l.settle(t)
	a.start(t)
	b.start(t)
	time.Sleep(2 * time.Second)

	// A long execution on one of b's hosts' guests, running under b.
	var target string
	for _, u := range b.leases.Owned() {
		if u == "host:proxmox-host:atlas" || u == "host:proxmox-host:boreas" || u == "host:proxmox-host:ceres" {
			target = map[string]string{"host:proxmox-host:atlas": "lxc:jellyfin", "host:proxmox-host:boreas": "lxc:gitea",
				"host:proxmox-host:ceres": "lxc:pbs"}[u]
			break
		}
	}
	var execID string
	if target != "" {
		var ex struct{ ID string }
		e2estack.OK(t, &ex)(l.client.API(t, l.operator).RequestExecution(context.Background(),
			apiclient.RunRequest{Target: target, Command: "sleep 30", Purpose: "a long read that the crash cuts short"}))
		execID = ex.ID
		e2estack.Eventually(t, l.db.URL, 10*time.Second, 50*time.Millisecond, "the execution running under b", func() (bool, string) {
			var st, by string
			_ = l.db.Pool.QueryRow(context.Background(), `SELECT status, coalesce(claimed_by, '') FROM executions WHERE id = $1`, execID).Scan(&st, &by)
			return st == "running" && by == "b", st + " by " + by
		})
	}

	moved := b.leases.Owned()
	// b's Postgres session closes with it: a need not wait out b's leases. Judged by the
	// database's own stamps: a's takeover (acquired_at) came before b's leases would have
	// expired, however late this process looks.
	var bExpires time.Time
	if err := l.db.Pool.QueryRow(context.Background(), `SELECT min(expires_at) FROM scheduler_leases WHERE holder = 'b'`).Scan(&bExpires); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	b.kill()
	l.waitOwns(t, a, moved, 10*time.Second)
	took := time.Since(killed)
	var takenAt time.Time
	if err := l.db.Pool.QueryRow(context.Background(), `SELECT max(acquired_at) FROM scheduler_leases WHERE resource = ANY($1) AND holder = 'a'`, moved).Scan(&takenAt); err != nil {
		t.Fatal(err)
	}
	if !takenAt.Before(bExpires) {
		t.Errorf("a took b's units at %s, not before b's leases expired (%s): it waited for the expiry instead of seeing b's session close",
			takenAt.Format(time.StampMilli), bExpires.Format(time.StampMilli))
	}
	// The checks of b's units run again: every check with samples before has them after.
	before := l.samples(t, killed.Add(-2*time.Second), killed)
	var resumed time.Duration
	e2estack.Eventually(t, l.db.URL, 15*time.Second, 100*time.Millisecond, "every check running again", func() (bool, string) {
		after := l.samples(t, killed.Add(took), time.Now())
		for k := range before {
			if after[k] == 0 {
				return false, k
			}
		}
		resumed = time.Since(killed)
		return true, ""
	})
	t.Logf("kill -9 of b: a held its %d units after %s; every check ran again %s after the kill (expiry %s, interval 1 s)",
		len(moved), took.Round(10*time.Millisecond), resumed.Round(10*time.Millisecond), failExpiry)
	if execID != "" {
		e2estack.Eventually(t, l.db.URL, 10*time.Second, 100*time.Millisecond, "b's execution interrupted", func() (bool, string) {
			var st string
			_ = l.db.Pool.QueryRow(context.Background(), `SELECT status FROM executions WHERE id = $1`, execID).Scan(&st)
			return st == "interrupted", st
		})
		time.Sleep(500 * time.Millisecond)
		var st string
		var runs int
		if err := l.db.Pool.QueryRow(context.Background(), `SELECT status, (SELECT count(*) FROM events WHERE type = 'execution.started'
AND payload->>'execution_id' = $1::text) FROM executions WHERE id = $1::uuid`, execID).Scan(&st, &runs); err != nil {
			t.Fatal(err)
		}
		if st != "interrupted" || runs != 1 {
			t.Fatalf("b's execution: %s, started %d times; want interrupted, started once", st, runs)
		}
	}

	// c joins: it takes its share from a, with no gap and no double.
	c := l.add(t, "c")
	c.start(t)
	time.Sleep(2 * time.Second)
	from := time.Now()
	time.Sleep(4 * time.Second)
	to := time.Now()
	time.Sleep(1500 * time.Millisecond)
	assertOncePerInterval(t, l, l.samples(t, from, to), from, to)
	if len(c.leases.Owned()) == 0 {
		t.Fatal("c took no share")
	}
	// The hosts that moved to c have one connection, c's: a's closed when it handed them over.
	for _, addr := range l.hostAddrs() {
		if n := a.pool.OpenTo(addr) + c.pool.OpenTo(addr); n > 1 {
			t.Errorf("%s has %d open SSH connections across the schedulers after c joined, want 1", addr, n)
		}
	}
	for k := range before {
		if l.samples(t, from, to)[k] == 0 {
			t.Errorf("%s did not run in the window after c joined (a gap)", k)
		}
	}
}

// An execution is claimed by exactly one scheduler, the holder of its target's unit.
func TestExecutionsClaimedOnce(t *testing.T) {
	l := startLab(t)
	a, b := l.add(t, "a"), l.add(t, "b")
	l.settle(t)
	a.start(t)
	b.start(t)
	targets := []string{"lxc:jellyfin", "lxc:gitea", "lxc:pbs", "host:hermes", "nas:vault", "lxc:sonarr", "lxc:postgres", "sbc:pi"}
	var ids []string
	for i := range 24 {
		var ex struct{ ID string }
		e2estack.OK(t, &ex)(l.client.API(t, l.operator).RequestExecution(context.Background(),
			apiclient.RunRequest{Target: targets[i%len(targets)], Command: "hostname", Purpose: "claim race"}))
		ids = append(ids, ex.ID)
	}
	e2estack.Eventually(t, l.db.URL, 20*time.Second, 100*time.Millisecond, "all executions finished", func() (bool, string) {
		var open int
		_ = l.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM executions WHERE id = ANY($1) AND status NOT IN ('completed', 'failed')`, ids).Scan(&open)
		return open == 0, fmt.Sprint(open, " open")
	})
	rows, err := l.db.Pool.Query(context.Background(), `SELECT x.id::text, x.status, x.claimed_by, lease_unit(x.target_id),
(SELECT count(*) FROM events e WHERE e.type = 'execution.started' AND e.payload->>'execution_id' = x.id::text)
FROM executions x WHERE x.id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	holder := map[string]string{}
	for _, s := range []*scheduler{a, b} {
		for _, u := range s.leases.Owned() {
			holder[u] = s.id
		}
	}
	var id, st, by, unit string
	var started int
	if _, err := pgx.ForEachRow(rows, []any{&id, &st, &by, &unit, &started}, func() error {
		if st != "completed" || started != 1 || by != holder[unit] {
			t.Errorf("%s on %s: %s, started %d times, claimed by %s; want completed once by %s", id, unit, st, started, by, holder[unit])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// waitOwns waits until s owns every one of units.
func (l *lab) waitOwns(t *testing.T, s *scheduler, units []string, within time.Duration) {
	t.Helper()
	e2estack.Eventually(t, l.db.URL, within, 50*time.Millisecond, s.id+" owning "+strings.Join(units, " "), func() (bool, string) {
		owned := s.leases.Owned()
		for _, u := range units {
			if !contains(owned, u) {
				return false, u
			}
		}
		return true, ""
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// A scheduler that is paused (SIGSTOP: its lease renewals stop while it still has work in
// hand) stops running its units by itself before its leases can be taken, so after they
// moved it writes nothing: no check runs twice across the hand-over.
func TestPausedSchedulerWritesNothing(t *testing.T) {
	l := startLab(t)
	a, b := l.add(t, "a"), l.add(t, "b")
	l.settle(t)
	a.start(t)
	b.start(t)
	time.Sleep(2 * time.Second)
	moved := b.leases.Owned()
	paused := time.Now()
	b.leases.Halt() // the renewals stop; b's runner and writer go on
	// b's last renewal was sent at its leases' ValidUntil − (expiry − margin); on a loaded
	// machine that can be well before the pause.
	var renewed time.Time
	for _, h := range b.leases.Held() {
		if at := h.ValidUntil.Add(-expiry + min(renew/2, expiry/4)); at.After(renewed) {
			renewed = at
		}
	}
	l.waitOwns(t, a, moved, 10*time.Second)
	took := time.Since(paused)
	// A paused process keeps its Postgres session: it is waited out, never taken early.
	if since := time.Since(renewed); since < expiry {
		t.Errorf("a took paused b's units %s after b's last renewal (%s after the pause), before b's leases (%s) could expire",
			since, took, expiry)
	}
	if len(b.leases.Owned()) != 0 {
		t.Fatalf("b still counts %v as its own after a took them", b.leases.Owned())
	}
	time.Sleep(500 * time.Millisecond)
	runs := b.runner.Status().RunsTotal
	from := time.Now()
	time.Sleep(4 * time.Second)
	to := time.Now()
	time.Sleep(1500 * time.Millisecond)
	if n := b.runner.Status().RunsTotal; n != runs {
		t.Errorf("paused b ran %d checks after its leases moved", n-runs)
	}
	assertOncePerInterval(t, l, l.samples(t, from, to), from, to)
	t.Logf("b paused: a held its %d units %s later", len(moved), took.Round(10*time.Millisecond))
}

// kill -9 of one of two schedulers with the daemon's lease timings (5 s renew, 15 s expiry)
// and a 20 s interval on every check: every check of every unit the dead one held runs again
// on the survivor within 20 s of the kill (issue 32). Measured per check as its first run's
// stamped start on the survivor minus the kill; the wait is on the runs, the assertion on
// their stamps. Units taken from a dead holder pull their checks' next runs into
// checkrun.DefaultTakeoverWithin (10 s), rather than waiting one interval from their last.
func TestFailoverEveryCheckWithin20s(t *testing.T) {
	const interval, bound = 20 * time.Second, 20 * time.Second
	l := startLab(t)
	if _, err := l.db.Pool.Exec(context.Background(), `UPDATE check_defs SET interval_seconds = 20, timeout_seconds = 5`); err != nil {
		t.Fatal(err)
	}
	l.spread = interval // first runs spread over the whole interval: every phase occurs
	a, b := l.addWith(t, "a", 5*time.Second, 15*time.Second), l.addWith(t, "b", 5*time.Second, 15*time.Second)
	l.settle(t)
	a.start(t)
	b.start(t)
	var checks int
	if err := l.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM check_defs WHERE enabled`).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	// Every check has run once (its phase is set), then b dies mid-interval.
	l.waitRuns(t, 3*interval, "every check's first run", func(rs []checkRun) (bool, string) {
		seen := map[string]bool{}
		for _, r := range rs {
			seen[r.check] = true
		}
		return len(seen) >= checks, fmt.Sprintf("%d of %d", len(seen), checks)
	})
	units := b.leases.Owned()
	theirs := map[string]string{} // check → unit, of b's units
	for _, r := range l.runsIn(time.Time{}, time.Now().Add(time.Hour)) {
		if r.by == "b" {
			theirs[r.check] = r.unit
		}
	}
	killed := time.Now()
	b.kill()
	first := map[string]time.Time{}
	l.waitRuns(t, 3*interval, "every check of b's units running on a", func(rs []checkRun) (bool, string) {
		for _, r := range rs {
			if r.by == "a" && r.at.After(killed) && theirs[r.check] != "" {
				if at, ok := first[r.check]; !ok || r.at.Before(at) {
					first[r.check] = r.at
				}
			}
		}
		return len(first) == len(theirs), fmt.Sprintf("%d of %d", len(first), len(theirs))
	})
	for _, r := range l.runsIn(killed, time.Now().Add(time.Hour)) {
		if r.by == "b" && r.at.After(killed.Add(50*time.Millisecond)) {
			t.Fatalf("dead b started %s at %s, after the kill", r.check, r.at)
		}
	}
	// Per unit: the worst and the median of its checks' delays.
	perUnit := map[string][]time.Duration{}
	var all []time.Duration
	for c, u := range theirs {
		d := first[c].Sub(killed)
		perUnit[u] = append(perUnit[u], d)
		all = append(all, d)
		if d > bound {
			t.Errorf("%s (%s) ran again %s after the kill, past %s", c, u, d.Round(time.Millisecond), bound)
		}
	}
	sortDur := func(ds []time.Duration) { sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] }) }
	var lines []string
	for _, u := range units {
		ds := perUnit[u]
		if len(ds) == 0 {
			continue
		}
		sortDur(ds)
		lines = append(lines, fmt.Sprintf("%s: %d checks, p50 %s, max %s", u, len(ds), ds[len(ds)/2].Round(10*time.Millisecond), ds[len(ds)-1].Round(10*time.Millisecond)))
	}
	sortDur(all)
	t.Logf("kill -9 of b (%d units, %d checks, interval %s): every check ran again on a within %s (p50 %s, p90 %s)\n%s",
		len(units), len(all), interval, all[len(all)-1].Round(10*time.Millisecond), all[len(all)/2].Round(10*time.Millisecond),
		all[len(all)*9/10].Round(10*time.Millisecond), strings.Join(lines, "\n"))
	// The survivor's runs were stored: each check's latest result is at least its first run.
	e2estack.Eventually(t, l.db.URL, 10*time.Second, 100*time.Millisecond, "the survivor's results stored", func() (bool, string) {
		for c, at := range first {
			var stored time.Time
			_ = l.db.Pool.QueryRow(context.Background(), `SELECT at FROM check_results WHERE check_id = $1`, c).Scan(&stored)
			if stored.Before(at.Truncate(time.Microsecond)) {
				return false, c
			}
		}
		return true, ""
	})
}
