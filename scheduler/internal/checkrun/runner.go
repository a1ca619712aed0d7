package checkrun

import (
	"container/heap"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/httpprobe"
	"github.com/oikos-hq/oikos/scheduler/internal/probeparse"
	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/scheduler/internal/secretref"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Defaults for Options.
const (
	DefaultConcurrency   = 32
	DefaultInitialSpread = 10 * time.Second
	// DefaultTakeoverWithin: with the 2 s a survivor takes to see a scheduler die, its checks
	// run again within 12 s of the kill, well inside the 20 s the project promises.
	DefaultTakeoverWithin = 10 * time.Second
	DefaultReloadEvery    = time.Minute
	DefaultResolveTTL     = 5 * time.Minute
	// maxJitter bounds the per-run jitter around a check's anchored schedule.
	maxJitter = 2 * time.Second
	// maxSlack is how early a check may start when the loop is awake for another one anyway
	// (see slack). At a homelab's 10 checks/s on 10 s intervals (slack 250 ms) a wake-up
	// serves three or four checks instead of one: the process's wake-ups, not the checks,
	// were most of its CPU at that rate (issue 32: 0.49 → 0.22 ms per http check; 50 ms
	// before, which only helped at 100/s and up).
	maxSlack = 500 * time.Millisecond
	// lagWindow is how many recent runs the lag quantiles are computed over.
	lagWindow = 4096
)

// Clock stamps results. Scheduling itself runs on real timers; a test that freezes or
// advances the clock changes what results and sweeps believe "now" is.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Resolver turns a slug or id into a Target (S2); *fleet.Graph implements it.
// ResolveRunsOn is where a command about the entity runs: on it, or along its runs-on
// edges (the host fallback of S1).
type Resolver interface {
	Resolve(ctx context.Context, slugOrID string) (remote.Target, remote.Entity, error)
	ResolveRunsOn(ctx context.Context, slugOrID string) (remote.Target, error)
}

// executor runs a command on a resolved target; *remote.Pool implements it. Exec opens a
// session per command; Probe runs the command as a line of a long-lived shell on the same
// pooled connection, so the target starts no process for the check beyond the command's own.
type executor interface {
	Exec(ctx context.Context, t remote.Target, command string, out io.Writer) (remote.Result, error)
	Probe(ctx context.Context, t remote.Target, command string) (remote.Result, error)
	OpenConnections() int
}

// Options configure a Runner. Pool, SSH and Fleet are required.
type Options struct {
	Pool *storage.Pool
	// SSH is the pool shared with the executor: one connection per host for both.
	SSH   *remote.Pool
	Fleet Resolver
	// Notifier delivers NOTIFY oikos_checks; the runner registers its handler in NewRunner,
	// so build the runner before starting the notifier. Without it only the poll reloads.
	Notifier *eventbus.Notifier
	Logger   zerolog.Logger
	// Metrics receives the runner's and its result writer's metrics (README, Metrics); nil
	// keeps them unregistered (what /status reports is still counted).
	Metrics prometheus.Registerer
	// Concurrency caps the checks running at once (default 32). It is also how many idle
	// connections http checks keep per host:port: as many as may run to it at once.
	Concurrency int
	// HTTPClient, when set, is used by http checks as is (tests with their own TLS roots).
	// Otherwise http checks keep HTTP/1.1 connections per host:port through the NameMap dialer.
	HTTPClient *http.Client
	// NameMap maps host names (or *.suffix wildcards) to the IP literal, or ip:port, to dial for
	// http and tcp checks (see netmap.Parse in shared/netmap); nothing
	// else resolves a name.
	NameMap map[string]string
	// AllowNonLoopback permits http and tcp checks to dial addresses outside 127.0.0.0/8
	// (production fleets); off by default so a lab or test never reaches a real network.
	AllowNonLoopback bool
	// TLSConfig for http checks (root CAs of a private CA); nil uses the system roots.
	TLSConfig *tls.Config
	// Secrets resolves the `secret:NAME` values of an http check's headers when its request
	// is sent (issue #31); nil resolves none, and such a check reports why.
	Secrets *secretref.Resolver
	Clock   Clock
	// InitialSpread bounds the random phase of a check's first run (default 10 s).
	InitialSpread time.Duration
	// TakeoverWithin bounds when the checks of a unit taken over from a scheduler that died
	// run again (default 10 s; TakenOver).
	TakeoverWithin time.Duration
	// Ran, when set, is called after each run that is submitted for writing, with the check's
	// id, its lease unit and the run's start (its result's at): tests attribute every run to
	// its scheduler.
	Ran func(checkID, unit string, at time.Time)
	// ReloadEvery is the safety-net reload interval (default 1 min).
	ReloadEvery time.Duration
	// FlushEvery, UnchangedFlushEvery and FlushBatch batch result writes: a result that
	// changes what is stored waits at most FlushEvery (default 1 s), one that repeats it at
	// most UnchangedFlushEvery (default 30 × FlushEvery, at most 30 s), and a flush starts
	// at FlushBatch results (default 2000); see results.WriterOptions.
	FlushEvery          time.Duration
	UnchangedFlushEvery time.Duration
	FlushBatch          int
	// ResultsBuffer is how many results may wait while the database is unreachable
	// (results.WriterOptions.Buffer).
	ResultsBuffer int
	// OnFlush is called after every successful results write (results.WriterOptions.Flushed).
	OnFlush func(results.Flush)
	// ResolveTTL is how long a resolved target is reused (default 5 min). A reload, an
	// unreachable host or a refused key forgets it at once.
	ResolveTTL time.Duration
	// Lease, when set, says whether this scheduler holds the lease of a unit ("host:<slug>"
	// for everything that goes through a machine, "net" for the http and tcp checks;
	// scheduler/internal/leases) and at which generation. Checks of units it does not hold
	// are skipped (counted, not run), and a result is written only while the lease it ran
	// under is still held, checked in the statement that writes it (Holder). Nil holds
	// everything.
	Lease func(unit string) (generation int64, ok bool)
	// Holder is this scheduler's lease holder id; required with Lease.
	Holder string
	// ClusterTTL bounds how long a Proxmox cluster's answer about where its guests run is
	// reused by the checks of guests their node says are gone (moved.go; default 30 s, and at
	// most the asking check's interval).
	ClusterTTL time.Duration
}

// Runner runs the enabled checks. Start once; Stop is safe to call twice.
type Runner struct {
	opts Options
	// ranUnder is the generation of the lease each unit last ran under (the scheduling
	// loop's alone): what it keeps running under while the database is unreachable.
	ranUnder map[string]heldUnder
	log      zerolog.Logger
	m        *runMetrics
	clock    Clock
	ssh      executor
	fleet    Resolver
	http     *http.Client      // Options.HTTPClient, when given
	httpc    *httpprobe.Client // otherwise: kept HTTP/1.1 connections through dialer
	dialer   *httpprobe.Dialer
	writer   *results.Writer
	reloadC  chan struct{}
	wakeC    chan struct{} // the queue's head changed (Acquired)
	// jobs hands due checks to idle workers; workers counts the workers started (at most
	// Concurrency, touched only by the scheduling loop).
	jobs    chan job
	workers int
	// life runs the scheduling loop and the workers; starting guards the first load.
	life     startstop.Lifecycle
	starting atomic.Bool

	mu      sync.Mutex
	queue   dueHeap
	entries map[string]*entry
	// phasing counts, per unit just taken, the reads of its checks' latest runs under way
	// (Acquired): its checks wait for them.
	phasing map[string]int
	loaded  time.Time
	loadErr error

	resMu    sync.Mutex
	resCache map[string]cachedTarget

	// places: guests found on another node than the graph's, and the clusters' answers.
	places placements

	lagMu  sync.Mutex
	lags   []float64
	lagPos int

	runs     atomic.Int64
	overruns atomic.Int64
	running  atomic.Int64
}

type cachedTarget struct {
	t  remote.Target
	at time.Time
}

// job is one due run of a check, handed to a worker.
type job struct {
	e   *entry
	d   *checkDef
	due time.Time
	gen int64 // the lease generation it runs under (0 without leases)
}

// entry is one scheduled check.
type entry struct {
	def     atomic.Pointer[checkDef]
	base    time.Time // the anchored cycle start
	due     time.Time // base plus this cycle's jitter
	idx     int
	running atomic.Bool
	// overrunLogged is set by the first overrun of a run and cleared when the run ends.
	overrunLogged atomic.Bool
	state         runState
}

// runState is what a check carries from one run to the next.
type runState struct {
	parse probeparse.State // the parser's (the previous cpu counters)
	mu    sync.Mutex
	// unreachable counts consecutive runs that found the machine unreachable: one failed
	// dial (a handshake that lost a race with a busy host) is not yet a down machine.
	unreachable int
	// lastClass is the previous run's error class, so a failure is logged when it starts
	// (and its end when it ends), not on every run.
	lastClass string
}

// NewRunner builds a Runner and registers its NOTIFY handler on opts.Notifier.
func NewRunner(opts Options) (*Runner, error) {
	if opts.Pool == nil || opts.SSH == nil || opts.Fleet == nil {
		return nil, errors.New("checkrun: Pool, SSH and Fleet are required")
	}
	return newRunner(opts, opts.SSH), nil
}

func newRunner(opts Options, ssh executor) *Runner {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.InitialSpread <= 0 {
		opts.InitialSpread = DefaultInitialSpread
	}
	if opts.ReloadEvery <= 0 {
		opts.ReloadEvery = DefaultReloadEvery
	}
	if opts.ResolveTTL <= 0 {
		opts.ResolveTTL = DefaultResolveTTL
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.ClusterTTL <= 0 {
		opts.ClusterTTL = DefaultClusterTTL
	}
	r := &Runner{
		opts:     opts,
		log:      opts.Logger.With().Str("component", "checks").Logger(),
		m:        newRunMetrics(opts.Metrics),
		clock:    opts.Clock,
		ssh:      ssh,
		fleet:    opts.Fleet,
		dialer:   httpprobe.NewDialer(opts.NameMap, opts.AllowNonLoopback),
		jobs:     make(chan job),
		reloadC:  make(chan struct{}, 1),
		wakeC:    make(chan struct{}, 1),
		entries:  map[string]*entry{},
		resCache: map[string]cachedTarget{},
		lags:     make([]float64, 0, lagWindow),
		ranUnder: map[string]heldUnder{},
	}
	r.places.init()
	r.http = opts.HTTPClient
	if r.http == nil {
		r.httpc = httpprobe.NewClient(r.dialer, opts.TLSConfig, opts.Concurrency)
	}
	r.writer = results.NewWriter(results.WriterOptions{Pool: opts.Pool, Logger: r.log, Metrics: opts.Metrics, Now: opts.Clock.Now,
		FlushEvery: opts.FlushEvery, UnchangedFlushEvery: opts.UnchangedFlushEvery, FlushBatch: opts.FlushBatch,
		Buffer: opts.ResultsBuffer, Flushed: opts.OnFlush, Holder: fenceHolder(opts)})
	if opts.Notifier != nil {
		opts.Notifier.Listen(eventbus.ChannelChecks, func(string) { r.requestReload() })
		opts.Notifier.OnConnect(r.requestReload)
	}
	r.registerGauges(opts.Metrics)
	return r
}

func (r *Runner) requestReload() {
	select {
	case r.reloadC <- struct{}{}:
	default:
	}
}

// Start loads the definitions, schedules every check to run soon and starts the loop and
// the result writer. A failed first load is returned (and Start may be tried again).
func (r *Runner) Start(ctx context.Context) error {
	if !r.starting.CompareAndSwap(false, true) {
		return errors.New("checkrun: runner already started")
	}
	if err := r.reload(ctx); err != nil {
		r.starting.Store(false) // nothing runs: Start may be tried again, Stop has nothing to do
		return err
	}
	if err := r.writer.Start(ctx); err != nil {
		return fmt.Errorf("checkrun: %w", err)
	}
	if err := r.life.Start(ctx, r.log, "check-scheduler", r.loop); err != nil {
		return fmt.Errorf("checkrun: %w", err)
	}
	return nil
}

// Stop ends scheduling, waits for the checks in flight (their context is cancelled) and
// writes the results already taken. Safe to call twice, and before Start.
func (r *Runner) Stop() {
	r.life.Stop()
	r.writer.Stop()
	r.closeIdleHTTP(0)
}

// Acquired continues the schedule of the checks of units this scheduler just took where the
// previous holder left it: each runs again one interval after its latest stored result, so a
// hand-over adds no run (no double) and skips none (no gap); a check whose interval has
// already passed since (the holder died, or never ran it) runs within seconds instead of at
// the next cycle of a schedule that skipped it while another held it. Until the stored
// results are read, the units' checks wait.
func (r *Runner) Acquired(units []string) { r.acquired(units, false) }

// TakenOver is Acquired for units whose previous holder died (leases.Change.TakenOver): its
// last runs may have been lost with it, and nobody was checking them since it died, so their
// next runs are pulled in — each check's wait until one interval after its latest stored run
// is scaled by TakeoverWithin/interval — and every check of the units runs again within
// TakeoverWithin of the takeover, in the order they would have run, spread as they were. A
// check may run once sooner than its interval after its last run: the price of resuming
// monitoring well within one interval of a crash; never two schedulers at once (the lease).
func (r *Runner) TakenOver(units []string) { r.acquired(units, true) }

func (r *Runner) acquired(units []string, dead bool) {
	if len(units) == 0 {
		return
	}
	r.mu.Lock()
	if r.phasing == nil {
		r.phasing = map[string]int{}
	}
	for _, u := range units {
		r.phasing[u]++
	}
	r.mu.Unlock()
	units = slices.Clone(units)
	if !r.life.Go("check-rephase", func(ctx context.Context) { r.rephase(ctx, units, dead) }) {
		// Not running (yet): Start schedules every check afresh.
		r.mu.Lock()
		r.endPhasing(units)
		r.mu.Unlock()
	}
}

// rephase reads when the checks of units last ran and schedules their next runs from it.
func (r *Runner) rephase(ctx context.Context, units []string, dead bool) {
	// Whatever happens here (even a panic, which the lifecycle recovers), the units run again.
	defer func() {
		r.mu.Lock()
		r.endPhasing(units)
		r.mu.Unlock()
		select {
		case r.wakeC <- struct{}{}:
		default:
		}
	}()
	set := make(map[string]bool, len(units))
	for _, u := range units {
		set[u] = true
	}
	var ids []string
	r.mu.Lock()
	for id, e := range r.entries {
		if set[e.def.Load().Unit] {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	last, err := r.lastRuns(ctx, ids)
	if err != nil && ctx.Err() == nil {
		r.log.Warn().Err(err).Strs("units", units).Msg("reading when the checks of units just taken last ran failed; running them now")
	}
	now := time.Now()
	r.mu.Lock()
	for _, e := range r.queue {
		d := e.def.Load()
		if !set[d.Unit] {
			continue
		}
		if at, ok := last[d.ID]; ok && at.Add(d.Interval).After(now) {
			if at.After(now) {
				at = now // at most one interval from now, whatever another machine's clock said
			}
			e.base = at.Add(d.Interval)
			e.due = e.base.Add(jitter(d.Interval))
			if within := r.takeoverWithin(); dead && d.Interval > within {
				// No jitter on this run: it is what the bound is about.
				e.base = now.Add(time.Duration(float64(e.base.Sub(now)) * float64(within) / float64(d.Interval)))
				e.due = e.base
			}
			continue
		}
		spread := min(d.Interval, maxJitter)
		var off time.Duration
		if spread > 0 {
			off = time.Duration(rand.Int64N(int64(spread)))
		}
		if at := now.Add(off); at.Before(e.due) {
			e.base, e.due = at, at
		}
	}
	heap.Init(&r.queue)
	r.mu.Unlock()
}

func (r *Runner) takeoverWithin() time.Duration {
	if r.opts.TakeoverWithin > 0 {
		return r.opts.TakeoverWithin
	}
	return DefaultTakeoverWithin
}

// lastRuns reads the time of the latest stored result of each of the checks ids.
func (r *Runner) lastRuns(ctx context.Context, ids []string) (map[string]time.Time, error) {
	last := make(map[string]time.Time, len(ids))
	if len(ids) == 0 || r.opts.Pool == nil {
		return last, nil
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := storage.New(r.opts.Pool).LastRuns(qctx, ids, last)
	return last, err
}

// endPhasing lets the checks of units run again (under r.mu).
func (r *Runner) endPhasing(units []string) {
	for _, u := range units {
		if r.phasing[u]--; r.phasing[u] <= 0 {
			delete(r.phasing, u)
		}
	}
}

// Handover is called when units begin passing to another scheduler (their checks no longer
// start here): their results waiting to be written go now, so the new holder continues
// from them (Acquired) and none is fenced out when the lease goes.
func (r *Runner) Handover(units []string) {
	if len(units) > 0 {
		r.writer.Expedite()
	}
}

// Busy reports whether unit still has work in hand here: a check running, or a result not
// yet written. The lease manager hands a unit over only once it is not (leases.Options.Busy).
func (r *Runner) Busy(unit string) bool {
	if r.writer.PendingFor(unit) > 0 {
		r.writer.Expedite() // a run that ended after Handover
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if e.running.Load() && e.def.Load().Unit == unit {
			return true
		}
	}
	return false
}

// Reload requests a reload of the definitions (as NOTIFY oikos_checks does).
func (r *Runner) Reload() { r.requestReload() }

func (r *Runner) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	poll := time.NewTicker(r.opts.ReloadEvery)
	defer poll.Stop()
	for {
		r.mu.Lock()
		wait := time.Hour
		if len(r.queue) > 0 {
			wait = max(time.Until(r.queue[0].due), 0)
		}
		r.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-r.wakeC:
		case <-r.reloadC:
			if err := r.reload(ctx); err != nil && ctx.Err() == nil {
				r.log.Error().Err(err).Msg("reloading check definitions failed; keeping the current ones")
			}
		case <-poll.C:
			if err := r.reload(ctx); err != nil && ctx.Err() == nil {
				r.log.Error().Err(err).Msg("reloading check definitions failed; keeping the current ones")
			}
			r.closeIdleHTTP(httpprobe.IdleTimeout)
		case <-timer.C:
			r.dispatchDue(ctx)
		}
	}
}

// dispatchDue starts every check that is due, waiting for a free slot when Concurrency
// are running (the wait is what lag measures). Checks due within their slack of now start
// too: one wake-up of the loop, and of the threads its runs wait on, then serves several
// checks instead of one each.
func (r *Runner) dispatchDue(ctx context.Context) {
	for ctx.Err() == nil {
		now := time.Now()
		r.mu.Lock()
		if len(r.queue) == 0 || r.queue[0].due.After(now.Add(slack(r.queue[0].def.Load().Interval))) {
			r.mu.Unlock()
			return
		}
		e := r.queue[0]
		due := e.due
		d := e.def.Load()
		r.advance(e, d.Interval, now)
		heap.Fix(&r.queue, 0)
		waits := r.phasing[d.Unit] > 0
		r.mu.Unlock()
		if waits {
			continue // rescheduled when its unit's latest runs are read
		}

		if e.running.Load() {
			r.overrun(e, d)
			continue
		}
		var gen int64
		if r.opts.Lease != nil {
			g, ok := r.opts.Lease(d.Unit)
			if ok {
				r.ranUnder[d.Unit] = heldUnder{gen: g}
			} else if h, had := r.ranUnder[d.Unit]; had {
				switch {
				case r.writer.Failing():
					// The database is unreachable, so no lease can be renewed: keep checking
					// what this scheduler was assigned, under the lease it held (issue 32).
					// The writer writes these results once it is back only if nobody took
					// the unit over meanwhile (the fence compares holder and generation).
					g, ok = h.gen, true
				case h.missed.IsZero():
					// Lapsed: find out whether Postgres is down (then the next run goes on).
					h.missed = now
					r.ranUnder[d.Unit] = h
					r.writer.Probe()
				case r.writer.ReachedSince(h.missed):
					delete(r.ranUnder, d.Unit) // the database answers: the lease really went
				}
			}
			if !ok {
				r.m.notOwned.Inc()
				continue
			}
			gen = g
		}
		if !e.running.CompareAndSwap(false, true) {
			r.overrun(e, d)
			continue
		}
		if !r.hand(ctx, job{e: e, d: d, due: due, gen: gen}) {
			e.running.Store(false)
			return
		}
	}
}

// hand gives j to an idle worker, or starts a worker while fewer than Concurrency exist, or
// else waits for a worker to finish (that wait is what lag measures). Workers live until
// the runner stops: a goroutine per run would be created, grow its stack and die a hundred
// times a second. False when ctx ended first.
func (r *Runner) hand(ctx context.Context, j job) bool {
	select {
	case r.jobs <- j:
		return true
	default:
	}
	if r.workers < r.opts.Concurrency {
		if !r.life.Go("check-worker", func(ctx context.Context) { r.worker(ctx, j) }) {
			return false // stopping
		}
		r.workers++
		return true
	}
	select {
	case r.jobs <- j:
		return true
	case <-ctx.Done():
		return false
	}
}

// worker runs j, then every job handed to it, until ctx ends.
func (r *Runner) worker(ctx context.Context, j job) {
	for {
		r.runJob(ctx, j)
		select {
		case j = <-r.jobs:
		case <-ctx.Done():
			return
		}
	}
}

// runJob runs one job; a panic outside the probe (which run already recovers) is logged
// and the worker carries on.
func (r *Runner) runJob(ctx context.Context, j job) {
	defer safego.Recover(r.log, "check-run")
	r.run(ctx, j.e, j.d, j.due, j.gen)
}

func (r *Runner) overrun(e *entry, d *checkDef) {
	r.overruns.Add(1)
	r.m.overruns.WithLabelValues(checkLabel(d)).Inc()
	// Every overrun is counted; the log says it once per stuck run, not once per interval.
	if e.overrunLogged.CompareAndSwap(false, true) {
		r.log.Warn().Str("check", d.Slug).Dur("interval", d.Interval).Dur("timeout", d.Timeout).
			Msg("check fell due while its previous run is still running; skipping runs until it ends")
	}
}

// advance moves e to its next cycle. A check that fell more than a whole cycle behind (the
// process was suspended, the database stalled) skips the missed cycles, counted.
func (r *Runner) advance(e *entry, interval time.Duration, now time.Time) {
	e.base = e.base.Add(interval)
	if behind := now.Sub(e.base); behind > interval {
		missed := int64(behind / interval)
		e.base = e.base.Add(time.Duration(missed) * interval)
		r.m.missed.Add(float64(missed))
	}
	e.due = e.base.Add(jitter(interval))
}

// jitter is a symmetric offset of at most min(interval/20, 2 s).
func jitter(interval time.Duration) time.Duration {
	j := min(interval/20, maxJitter)
	if j <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(2*j))) - j
}

// slack is how early a run may start: at most maxSlack and half the jitter its interval
// allows, so the schedule stays within what jitter already varies.
func slack(interval time.Duration) time.Duration {
	return min(maxSlack, min(interval/20, maxJitter)/2)
}

// phase is a check's first-run offset.
// heldUnder is the lease generation a unit last ran under, and when its lease was first
// found lapsed since (zero while held).
type heldUnder struct {
	gen    int64
	missed time.Time
}

// fenceHolder is the holder the writer fences results by: only with leases.
func fenceHolder(opts Options) string {
	if opts.Lease == nil {
		return ""
	}
	return opts.Holder
}

func (r *Runner) phase(interval time.Duration) time.Duration {
	span := min(interval, r.opts.InitialSpread)
	if span <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(span)))
}

func (r *Runner) run(ctx context.Context, e *entry, d *checkDef, due time.Time, gen int64) {
	r.running.Add(1)
	defer r.running.Add(-1)
	defer e.overrunLogged.Store(false) // after running is cleared (defers run last-first)
	defer e.running.Store(false)
	r.recordLag(time.Since(due))
	r.runs.Add(1)

	// The result is stamped with the run's start, as Prometheus stamps a scrape: a run
	// that finished late (a slow probe, a loaded machine) still counts for the interval it
	// was started in, and the next holder re-phases from when the check last began.
	at := r.clock.Now()
	began := time.Now()
	rctx, cancel := context.WithTimeout(ctx, d.Timeout)
	var res results.Result
	err := safego.Call(func() error {
		var err error
		res, err = r.runProbe(rctx, d, &e.state)
		return err
	})
	cancel()
	if errors.Is(err, errShuttingDown) || ctx.Err() != nil {
		return
	}
	if err != nil {
		r.log.Error().Err(err).Str("check", d.Slug).Msg("check probe failed internally")
		res = results.Unknown(results.ClassProbe, "internal error in the %s probe (see the scheduler log)", d.Kind)
	}
	r.m.observe(checkLabel(d), res, time.Since(began))
	e.state.mu.Lock()
	prevClass := e.state.lastClass
	e.state.lastClass = res.Class
	e.state.mu.Unlock()
	switch {
	case res.Class == prevClass:
	case res.Class == results.ClassResolution || res.Class == results.ClassConfig:
		// S8: a broken configuration must be distinguishable from an outage in the log.
		r.log.Warn().Str("check", d.Slug).Str("target", d.TargetSlug).Str("class", res.Class).
			Str("reason", res.Reason).Msg("check cannot run: configuration problem, not an outage")
	case res.Class != "":
		r.log.Info().Str("check", d.Slug).Str("target", d.TargetSlug).Str("class", res.Class).
			Str("reason", res.Reason).Msg("check cannot observe its target")
	default:
		r.log.Info().Str("check", d.Slug).Str("target", d.TargetSlug).Str("was", prevClass).
			Msg("check observes its target again")
	}
	r.writer.Submit(ctx, results.Record{
		CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug,
		At: at, Result: res, Unit: d.Unit, Generation: gen,
	})
	if r.opts.Ran != nil {
		r.opts.Ran(d.ID, d.Unit, at)
	}
}

// closeIdleHTTP closes kept HTTP connections idle for at least olderThan (an
// Options.HTTPClient is the caller's to manage).
func (r *Runner) closeIdleHTTP(olderThan time.Duration) {
	if r.httpc != nil {
		r.httpc.CloseIdle(olderThan)
	}
}

// reload reads check_defs and brings the schedule in line: new checks are scheduled
// within InitialSpread, changed ones take effect at their next run (re-phased when the
// interval changed), removed ones leave the queue. The writer forgets what it stored for
// every target whose set of checks changed, so its health is recomputed from the new set
// at the next result.
func (r *Runner) reload(ctx context.Context) error {
	defs, err := loadDefs(ctx, storage.New(r.opts.Pool))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadErr = err
	if err != nil {
		r.m.reloadErrors.Inc()
		return err
	}
	r.loaded = time.Now()
	now := time.Now()
	seen := make(map[string]bool, len(defs))
	touched := map[string]bool{} // targets whose checks were added, changed or removed
	for _, d := range defs {
		seen[d.ID] = true
		if d.specErr != nil {
			r.log.Warn().Str("check", d.Slug).Err(d.specErr).Msg("check config unusable; the check will report it on every run")
		}
		e, ok := r.entries[d.ID]
		if !ok {
			e = &entry{}
			e.def.Store(d)
			e.base = now.Add(r.phase(d.Interval))
			e.due = e.base
			r.entries[d.ID] = e
			heap.Push(&r.queue, e)
			touched[d.TargetID] = true
			continue
		}
		old := e.def.Load()
		if old.version == d.version {
			continue
		}
		touched[old.TargetID], touched[d.TargetID] = true, true
		e.def.Store(d)
		e.state.parse.Reset()
		if old.Interval != d.Interval {
			e.base = now.Add(r.phase(d.Interval))
			e.due = e.base
			heap.Fix(&r.queue, e.idx)
		}
	}
	for id, e := range r.entries {
		if !seen[id] {
			touched[e.def.Load().TargetID] = true
			heap.Remove(&r.queue, e.idx)
			delete(r.entries, id)
		}
	}
	r.writer.ForgetTargets(touched)
	// Attributes (addresses, users, hosts edges) may have changed with the definitions.
	r.resMu.Lock()
	clear(r.resCache)
	r.resMu.Unlock()
	r.places.forgetPeers()
	r.m.reloads.Inc()
	return nil
}

// resolve returns the target for a slug or id, reusing a recent resolution.
func (r *Runner) resolve(ctx context.Context, key string) (remote.Target, error) {
	return r.cachedResolve(key, func() (remote.Target, error) {
		t, _, err := r.fleet.Resolve(ctx, key)
		return t, err
	})
}

// cachedResolve returns the cached target under key while it is younger than ResolveTTL,
// else resolves it with find and caches what find found (a failure is not cached).
func (r *Runner) cachedResolve(key string, find func() (remote.Target, error)) (remote.Target, error) {
	r.resMu.Lock()
	c, ok := r.resCache[key]
	r.resMu.Unlock()
	if ok && time.Since(c.at) < r.opts.ResolveTTL {
		return c.t, nil
	}
	t, err := find()
	if err != nil {
		return remote.Target{}, err
	}
	r.resMu.Lock()
	r.resCache[key] = cachedTarget{t: t, at: time.Now()}
	r.resMu.Unlock()
	return t, nil
}

func execKey(targetID string) string { return "exec:" + targetID }

// resolveExec finds where an ssh-script check of d runs: on its target when that is a
// machine or a guest, else on what the target runs on (fleet.Graph.ResolveRunsOn). The
// result is cached like any resolution.
func (r *Runner) resolveExec(ctx context.Context, d *checkDef) (remote.Target, error) {
	return r.cachedResolve(execKey(d.TargetID), func() (remote.Target, error) {
		return r.fleet.ResolveRunsOn(ctx, d.TargetID)
	})
}

// forgetOnFailure drops a cached resolution after a failure that an edited address, user
// or key may explain, so the next run resolves afresh.
func (r *Runner) forgetOnFailure(key string, err error) {
	if errors.Is(err, remote.ErrUnreachable) || errors.Is(err, remote.ErrAuthFailed) || errors.Is(err, remote.ErrHostKeyChanged) {
		r.resMu.Lock()
		delete(r.resCache, key)
		r.resMu.Unlock()
	}
}

// dueHeap orders entries by due time.
type dueHeap []*entry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

// Push adds an entry (heap.Interface).
func (h *dueHeap) Push(x any) {
	e := x.(*entry)
	e.idx = len(*h)
	*h = append(*h, e)
}

// Pop removes the last entry (heap.Interface).
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}
