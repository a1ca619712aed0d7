package checkrun

// BenchmarkResultsPostgres (issue 11; figures in docs/benchmarks.md): what storing check
// results costs Postgres, and how many HTTP connections the checks open.
//
// 1,200 ingress routes, one derived http check each, against an HTTP server in a child
// process (this test binary re-executed): routes 0–199 each on a name of their own, routes
// 200–1199 all on one host:port. Phases, each with a fresh runner after a warm-up (every
// check has run, so its first, full, write is behind it):
//
//   - idle: no runner; Postgres's own background rate, subtracted in the "net" figures;
//   - 10 checks/s: the 200 routes every 20 s (a homelab's usual rate);
//   - 100 checks/s: the 200 routes every 2 s;
//   - 500 checks/s, one host: the 1,000 routes on one host:port every 2 s.
//
// Postgres CPU is utime+stime from /proc/<pid>/stat of the private cluster's processes
// (found as the parent of a pool backend and its children), read before and after each
// window: "backends" are the client sessions, "other" the postmaster (with its reaped
// children: autovacuum workers) and its background processes (walwriter, checkpointer,
// autovacuum launcher …). New connections are counted by the server (connections it
// accepted) and by the client (httpprobe.Client.Dials). The windows: OIKOS_BENCH_SECONDS
// (default 30 s; the 10/s phase runs four times as long); OIKOS_BENCH_ONLY picks phases by
// substring ("10 checks", "500"); OIKOS_BENCH_UNCHANGED_FLUSH overrides the writer's
// UnchangedFlushEvery (a duration) to compare batching windows; OIKOS_BENCH_VERBOSE=1 adds
// Postgres CPU by process and the tables' write and autovacuum counts.
//
//	bin/oikos-local test -- go test -run '^$' -bench BenchmarkResultsPostgres -benchtime 1x ./scheduler/internal/checkrun/

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/remote"
)

// pgMeter reads the CPU of the Postgres cluster a pool talks to.
type pgMeter struct{ postmaster int }

func newPGMeter(b *testing.B, pool *pgxpool.Pool) *pgMeter {
	b.Helper()
	var pid int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	ppid, _, err := procStatOf(pid)
	if err != nil {
		b.Skipf("the Postgres server is not a local process: %v", err)
	}
	return &pgMeter{postmaster: ppid}
}

// procStatOf reads a process's parent and utime+stime+cutime+cstime (reaped children count:
// an autovacuum worker that exited shows up in the postmaster's cutime).
func procStatOf(pid int) (ppid int, cpu time.Duration, err error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("odd /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("odd /proc/%d/stat", pid)
	}
	ppid, _ = strconv.Atoi(f[1])
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} {
		n, _ := strconv.ParseInt(f[k], 10, 64)
		ticks += n
	}
	return ppid, time.Duration(ticks) * (time.Second / 100), nil // USER_HZ is 100 on Linux
}

// pgSample is the cluster's CPU so far: client backends, and everything else, also by
// process title (the postmaster's own line includes its reaped children).
type pgSample struct {
	backends, other time.Duration
	byTitle         map[string]time.Duration
}

func (s pgSample) sub(o pgSample) pgSample {
	d := pgSample{backends: s.backends - o.backends, other: s.other - o.other, byTitle: map[string]time.Duration{}}
	for k, v := range s.byTitle {
		if v -= o.byTitle[k]; v != 0 {
			d.byTitle[k] = v
		}
	}
	return d
}

func (s pgSample) total() time.Duration { return s.backends + s.other }

func (m *pgMeter) sample() pgSample {
	s := pgSample{byTitle: map[string]time.Duration{}}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, cpu, err := procStatOf(pid)
		if err != nil || (pid != m.postmaster && ppid != m.postmaster) {
			continue
		}
		// A backend's title is "postgres: <user> <db> <client address> …"; background
		// processes name themselves ("postgres: checkpointer").
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		title := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		if pid != m.postmaster && (strings.Contains(title, "127.0.0.1") || strings.Contains(title, "[local]")) {
			s.backends += cpu
			title = "backends"
		} else {
			s.other += cpu
			if pid == m.postmaster {
				title = "postmaster (and reaped children)"
			}
		}
		s.byTitle[title] += cpu
	}
	return s
}

func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// pgPhase is one measured window of BenchmarkResultsPostgres.
type pgPhase struct {
	name               string
	runs               int64
	window             time.Duration
	self               time.Duration // the scheduler (this process)
	pg                 pgSample
	accepted, dials    int64 // new HTTP connections: the server's count, the client's
	flushes, unchanged float64
	flushErrors        float64
	db                 dbCounters
	load0, load1       string
}

// dbCounters are the bench database's statistics (pg_stat_database): transactions and
// rows written and read.
type dbCounters struct {
	xacts, inserted, updated, fetched, returned, blksHit int64
}

func readDBCounters(b *testing.B, pool *pgxpool.Pool) dbCounters {
	b.Helper()
	var c dbCounters
	// The statistics of the transactions before this one are visible after a snapshot
	// clear (they are flushed at most once a second, so the read is a little behind).
	if err := pool.QueryRow(context.Background(), `SELECT xact_commit, tup_inserted, tup_updated, tup_fetched, tup_returned, blks_hit
FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.xacts, &c.inserted, &c.updated, &c.fetched, &c.returned, &c.blksHit); err != nil {
		b.Fatal(err)
	}
	return c
}

func (c dbCounters) sub(o dbCounters) dbCounters {
	return dbCounters{c.xacts - o.xacts, c.inserted - o.inserted, c.updated - o.updated, c.fetched - o.fetched, c.returned - o.returned, c.blksHit - o.blksHit}
}

func (p pgPhase) ms(d time.Duration) float64 {
	if p.runs == 0 {
		return 0
	}
	return float64(d.Microseconds()) / 1000 / float64(p.runs)
}

func (p pgPhase) perCheck(v float64) float64 { return v / float64(max(p.runs, 1)) }

func (p pgPhase) String() string {
	return fmt.Sprintf("%-24s %4.0fs runs %6d (%.1f/s)  scheduler %.3f ms/check  postgres backends %.3f + other %.3f = %.3f ms/check  "+
		"new conns %d server / %d client (%.3f/check)  flushes %.0f, unchanged results %.0f (%.0f%%), flush errors %.0f  "+
		"per check: %.2f transactions, %.2f rows inserted, %.2f updated, %.1f fetched, %.1f buffer hits  load %s → %s",
		p.name, p.window.Seconds(), p.runs, float64(p.runs)/p.window.Seconds(), p.ms(p.self), p.ms(p.pg.backends), p.ms(p.pg.other),
		p.ms(p.pg.total()), p.accepted, p.dials, p.perCheck(float64(p.accepted)), p.flushes, p.unchanged,
		100*p.perCheck(p.unchanged), p.flushErrors, p.perCheck(float64(p.db.xacts)), p.perCheck(float64(p.db.inserted)),
		p.perCheck(float64(p.db.updated)), p.perCheck(float64(p.db.fetched+p.db.returned)), p.perCheck(float64(p.db.blksHit)), p.load0, p.load1)
}

func measurePG(b *testing.B, name string, opts Options, meter *pgMeter, accepted func() int64, warm, window time.Duration) pgPhase {
	b.Helper()
	reg := metrics.NewRegistry()
	opts.Metrics = reg
	opts.Logger = zerolog.Nop()
	r, err := NewRunner(opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer r.Stop()
	timer := time.NewTimer(warm)
	<-timer.C
	p := pgPhase{name: name, load0: loadAvg()}
	st0 := r.Status()
	self0, _ := procCPU("self")
	pg0 := meter.sample()
	db0 := readDBCounters(b, opts.Pool)
	a0 := accepted()
	f0, u0, e0 := reg.Value("oikos_scheduler_result_flushes_total"), reg.Value("oikos_scheduler_results_unchanged_total"),
		reg.Value("oikos_scheduler_result_flush_errors_total")
	start := time.Now()
	timer.Reset(window)
	<-timer.C
	p.window = time.Since(start)
	self1, _ := procCPU("self")
	p.pg = meter.sample().sub(pg0)
	p.db = readDBCounters(b, opts.Pool).sub(db0)
	p.accepted = accepted() - a0
	st1 := r.Status()
	p.runs = st1.RunsTotal - st0.RunsTotal
	p.dials = st1.HTTPDials - st0.HTTPDials
	p.self = self1 - self0
	p.flushes = reg.Value("oikos_scheduler_result_flushes_total") - f0
	p.unchanged = reg.Value("oikos_scheduler_results_unchanged_total") - u0
	p.flushErrors = reg.Value("oikos_scheduler_result_flush_errors_total") - e0
	p.load1 = loadAvg()
	b.Log(p.String())
	if os.Getenv("OIKOS_BENCH_VERBOSE") != "" {
		// On stderr: a benchmark's log is cut after a few lines.
		fmt.Fprintf(os.Stderr, "%s: postgres by process: %v\n", name, p.pg.byTitle)
		rows, err := opts.Pool.Query(context.Background(), `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, autovacuum_count, autoanalyze_count
FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd > 0 ORDER BY relname`)
		if err == nil {
			for rows.Next() {
				var name string
				var ins, upd, hot, av, aa int64
				_ = rows.Scan(&name, &ins, &upd, &hot, &av, &aa)
				fmt.Fprintf(os.Stderr, "  %-16s inserted %d updated %d (HOT %d) autovacuums %d autoanalyzes %d (since the database was made)\n", name, ins, upd, hot, av, aa)
			}
			rows.Close()
		}
		var dbs int
		_ = opts.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datallowconn`).Scan(&dbs)
		fmt.Fprintf(os.Stderr, "  %d databases in the cluster (autovacuum visits each once a minute)\n", dbs)
	}
	if f := st1.FailuresByReason; len(f) > 0 {
		b.Errorf("%s: failures %v", name, f)
	}
	if p.flushErrors > 0 {
		b.Errorf("%s: %v failed flushes (%s)", name, p.flushErrors, st1.LastFlushError)
	}
	return p
}

// benchConnsChildEnv makes TestMain run runConnsChild instead of the tests.
const benchConnsChildEnv = "OIKOS_BENCH_CONNS_CHILD"

// connsChildInfo is what the child reports once it listens.
type connsChildInfo struct {
	HTTP    string `json:"http"`
	Control string `json:"control"`
}

// runConnsChild serves HTTP on one listener and, on a second one, the number of
// connections the first accepted, until stdin closes.
func runConnsChild() int {
	var accepted atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok "+r.Host+"\n")
	}), ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	cln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1
	}
	csrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strconv.FormatInt(accepted.Load(), 10))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = csrv.Serve(cln) }()
	defer csrv.Close()
	if err := json.NewEncoder(os.Stdout).Encode(connsChildInfo{HTTP: ln.Addr().String(), Control: cln.Addr().String()}); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// childAccepted asks the child how many connections its HTTP listener accepted.
func childAccepted(b *testing.B, control string) func() int64 {
	c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	return func() int64 {
		resp, err := c.Get("http://" + control + "/")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			b.Fatalf("child answered %q", raw)
		}
		return n
	}
}

// benchWants reports whether a phase is selected by OIKOS_BENCH_ONLY (comma-separated
// substrings of phase names; unset: all).
func benchWants(name string) bool {
	only := os.Getenv("OIKOS_BENCH_ONLY")
	if only == "" {
		return true
	}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" && strings.Contains(name, s) {
			return true
		}
	}
	return false
}

func BenchmarkResultsPostgres(b *testing.B) {
	if testing.Short() {
		b.Skip("minutes long")
	}
	window := benchSeconds()
	var info connsChildInfo
	startBenchChild(b, benchConnsChildEnv+"=1", &info)
	accepted := childAccepted(b, info.Control)
	_, port, _ := net.SplitHostPort(info.HTTP)
	const own, shared = 200, 1000
	var inv strings.Builder
	inv.WriteString("entities:\n")
	names := map[string]string{"one.lab.example": "127.0.0.1"}
	for i := 0; i < own+shared; i++ {
		host := fmt.Sprintf("svc%04d.lab.example", i)
		if i < own {
			names[host] = "127.0.0.1"
			fmt.Fprintf(&inv, "  - {type: ingress-route, name: %s, attributes: {url: \"http://%s:%s/health\"}}\n", host, host, port)
		} else {
			fmt.Fprintf(&inv, "  - {type: ingress-route, name: %s, attributes: {url: \"http://one.lab.example:%s/health/%d\"}}\n", host, port, i)
		}
	}
	lab := labtest.New(b, labtest.Options{Inventory: []byte(inv.String()), NoSim: true})
	ssh := remote.NewPool(remote.PoolOptions{Signer: labtest.Signer(b), HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop()})
	defer ssh.Close()
	lab.DeriveChecks(b, func(t checks.Target, d *checks.Def) bool { return t.Type == "ingress-route" && d.Kind == "http" })
	meter := newPGMeter(b, lab.DB)
	base := Options{Pool: lab.DB, SSH: ssh, Fleet: lab.Fleet, NameMap: names, Concurrency: DefaultConcurrency}
	if d, err := time.ParseDuration(os.Getenv("OIKOS_BENCH_UNCHANGED_FLUSH")); err == nil {
		base.UnchangedFlushEvery = d // to compare batching windows
		b.Logf("UnchangedFlushEvery %s", d)
	}
	ctx := context.Background()
	// only enables the routes on one host:port (or the others) every interval.
	only := func(oneHost bool, interval time.Duration) {
		b.Helper()
		setIntervals(b, lab, "http", interval)
		if _, err := lab.DB.Exec(ctx, `UPDATE check_defs SET enabled = ((config->>'url' LIKE '%//one.lab.example:%') = $1), updated_at = now()`,
			oneHost); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()

	p0 := meter.sample()
	t0 := time.Now()
	idle := time.NewTimer(window)
	<-idle.C
	idleWin := time.Since(t0)
	idleCPU := meter.sample().sub(p0)
	idleRate := idleCPU.total().Seconds() / idleWin.Seconds() // CPU seconds per second
	b.Logf("postgres idle: %.2f ms CPU per second (backends %s, other %s over %s)  load %s",
		1000*idleRate, idleCPU.backends, idleCPU.other, idleWin.Round(time.Second), loadAvg())

	var phases []pgPhase
	o := base
	if benchWants("10 checks/s") {
		only(false, 20*time.Second)
		o.InitialSpread = 20 * time.Second
		phases = append(phases, measurePG(b, "10 checks/s", o, meter, accepted, 25*time.Second, 4*window))
	}
	if benchWants("100 checks/s") {
		only(false, 2*time.Second)
		o.InitialSpread = 2 * time.Second
		phases = append(phases, measurePG(b, "100 checks/s", o, meter, accepted, 5*time.Second, window))
	}
	if benchWants("500 checks/s, one host") {
		only(true, 2*time.Second)
		o.InitialSpread = 2 * time.Second
		phases = append(phases, measurePG(b, "500 checks/s, one host", o, meter, accepted, 5*time.Second, window))
	}
	b.StopTimer()
	for _, p := range phases {
		net := (p.pg.total().Seconds() - idleRate*p.window.Seconds()) * 1000 / float64(max(p.runs, 1))
		b.Logf("%-24s postgres net of idle %.3f ms/check; new connections %.4f per check", p.name, net, p.perCheck(float64(p.accepted)))
		unit := strings.ReplaceAll(strings.Fields(p.name)[0], " ", "")
		b.ReportMetric(p.ms(p.pg.total()), "pg-ms/check@"+unit)
		b.ReportMetric(p.perCheck(float64(p.accepted)), "newconns/check@"+unit)
	}
}
