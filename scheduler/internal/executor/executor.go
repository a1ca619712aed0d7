// Package executor is the scheduler's half of the gated execution path (docs/behaviours.md S9, X8):
// it claims runnable executions, runs them on their targets through the host-hop, streams
// their output into execution_logs and records how they ended.
//
// It is written against the failures of the system Oikos replaces: work is claimed from the
// database (FOR UPDATE SKIP LOCKED) on NOTIFY and on a slow poll, never handed over in
// memory, so an approval that commits is always picked up; each run gets a context derived
// from the executor's own, never from a request, so nothing is cancelled when an HTTP
// response completes; started_at is written at claim; the timeout is enforced and the output
// received so far is kept; the result is marshalled JSON; and a run whose scheduler died is
// marked interrupted at the next start and never run a second time, because its command may
// already have had its effect.
package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/fleet"
	"github.com/oikos-hq/oikos/scheduler/internal/secretref"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Defaults for Options.
const (
	DefaultTimeout     = 10 * time.Minute
	DefaultConcurrency = 16
	DefaultPoll        = 2 * time.Second
	DefaultStuckAfter  = 2 * time.Minute
	DefaultSweepEvery  = time.Minute
	DefaultFlushEvery  = 50 * time.Millisecond
	DefaultFlushBytes  = 32 << 10
	DefaultMaxOutput   = 1 << 20
)

// Options configure an Executor. Pool, SSH and Fleet are required.
type Options struct {
	Pool  *storage.Pool
	SSH   *remote.Pool
	Fleet *fleet.Graph
	// Secrets gives the stored secrets' values to redact from output (issue #31); nil
	// redacts the well-known credential formats only.
	Secrets  *secretref.Resolver
	Notifier *eventbus.Notifier // optional: without it only the poll finds work
	Logger   zerolog.Logger
	// Metrics receives the executor's metrics (README, Metrics); nil keeps them unregistered.
	Metrics prometheus.Registerer
	// SchedulerID is written to executions.claimed_by; default "<hostname>:<pid>".
	SchedulerID string
	// Owned, when set, lists the lease units this scheduler holds (leases.Manager.Owned):
	// only executions through those are claimed. Nil claims any.
	Owned func() []string
	// DefaultTimeout applies when an execution has no timeout_seconds (the column defaults to
	// 600, so this is a safety net).
	DefaultTimeout time.Duration
	// Concurrency is how many executions run at once.
	Concurrency int
	// Poll is the safety-net interval at which runnable executions are looked for even
	// without a NOTIFY.
	Poll time.Duration
	// StuckAfter is the grace beyond an execution's own timeout after which a `running` row
	// that no live run owns is marked interrupted by the sweep.
	StuckAfter time.Duration
	// SweepEvery is how often the stuck sweep runs.
	SweepEvery time.Duration
	// FlushEvery and FlushBytes batch output chunks into execution_logs rows.
	FlushEvery time.Duration
	FlushBytes int
	// MaxOutput caps the tail kept in executions.output.
	MaxOutput int
	// OnEnd, when set, is told of every run whose end was recorded (its terminal status), after
	// the commit: the composition root follows a completed migration with a placement sweep.
	// It must not block.
	OnEnd func(Ended)
}

// Ended is a run whose end was recorded.
type Ended struct {
	ID, TargetSlug, Action, Command, Status string
}

// Executor claims and runs executions. Start it once; Stop is safe to call twice.
type Executor struct {
	opts Options
	log  zerolog.Logger
	m    execMetrics

	wake chan struct{}
	// sweepNow makes the sweep look for dead schedulers' executions at once (units taken).
	sweepNow chan struct{}
	slots    chan struct{}

	// life runs the dispatch loop, the stuck sweep and every run; starting guards the orphan
	// recovery that precedes it, so a second Start never interrupts this executor's own runs.
	life     startstop.Lifecycle
	starting atomic.Bool

	mu       sync.Mutex // guards inflight
	inflight map[string]struct{}

	endMu     sync.Mutex // guards ends and endLeader (group commit of run ends)
	ends      []*end
	endLeader bool
}

// New builds an executor and registers its NOTIFY handler on the notifier, so call it
// before the notifier starts.
func New(opts Options) *Executor {
	if opts.SchedulerID == "" {
		host, _ := os.Hostname()
		opts.SchedulerID = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = DefaultTimeout
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = DefaultSweepEvery
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = DefaultFlushEvery
	}
	if opts.FlushBytes <= 0 {
		opts.FlushBytes = DefaultFlushBytes
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	e := &Executor{
		opts:     opts,
		log:      opts.Logger.With().Str("component", "executor").Str("scheduler_id", opts.SchedulerID).Logger(),
		wake:     make(chan struct{}, 1),
		sweepNow: make(chan struct{}, 1),
		slots:    make(chan struct{}, opts.Concurrency),
		inflight: map[string]struct{}{},
	}
	e.m = newExecMetrics(opts.Metrics, e)
	if opts.Notifier != nil {
		// The payload (an execution id) is only a hint: the claim reads the database.
		opts.Notifier.Listen(eventbus.ChannelExec, func(string) { e.poke() })
		// After a reconnect, anything approved meanwhile is found at once, not at the poll.
		opts.Notifier.OnConnect(e.poke)
	}
	return e
}

// SchedulerID is the id this executor claims executions under.
func (e *Executor) SchedulerID() string { return e.opts.SchedulerID }

// Poke makes the executor look for runnable executions now (a lease was just taken).
func (e *Executor) Poke() { e.poke() }

// SweepSoon makes the sweep look for the running executions of schedulers that died now,
// not at its next tick: called when units were taken over.
func (e *Executor) SweepSoon() {
	select {
	case e.sweepNow <- struct{}{}:
	default:
	}
}

func (e *Executor) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Start marks the executions orphaned by a previous scheduler as interrupted, then starts
// claiming. Work runs under a context derived from ctx; Stop cancels it. A failed orphan
// recovery is returned (and Start may be tried again); a second Start is an error.
func (e *Executor) Start(ctx context.Context) error {
	if e.opts.Pool == nil || e.opts.SSH == nil || e.opts.Fleet == nil {
		return errors.New("executor: Pool, SSH and Fleet are required")
	}
	if !e.starting.CompareAndSwap(false, true) {
		return fmt.Errorf("executor: %w", startstop.ErrStarted)
	}
	n, err := e.interruptOrphans(ctx)
	if err != nil {
		e.starting.Store(false) // nothing runs: Start may be tried again, Stop has nothing to do
		return fmt.Errorf("executor: recover orphaned executions: %w", err)
	}
	e.m.observeSwept(sweptOrphaned, n)
	if n > 0 {
		e.log.Warn().Int("count", n).Msg("marked executions left running by a stopped scheduler as interrupted; they are not re-run")
	}
	if err := e.life.Start(ctx, e.log, "executor-dispatch", e.dispatch); err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	e.life.Go("executor-sweep", e.sweepLoop)
	e.poke()
	return nil
}

// Stop cancels running commands (they end `interrupted`, with their output so far), waits
// for every run to record its end, and returns. Safe to call twice, and before Start.
func (e *Executor) Stop() { e.life.Stop() }

// dispatch claims runnable executions while a slot is free, then waits for a NOTIFY, a
// finished run or the poll.
func (e *Executor) dispatch(ctx context.Context) {
	tick := time.NewTicker(e.opts.Poll)
	defer tick.Stop()
	for {
		e.claimWhileFree(ctx)
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-tick.C:
		}
	}
}

func (e *Executor) claimWhileFree(ctx context.Context) {
	for ctx.Err() == nil {
		free := 0
	take:
		for free < cap(e.slots) {
			select {
			case e.slots <- struct{}{}:
				free++
			default:
				break take
			}
		}
		if free == 0 {
			return // all slots busy; a finishing run pokes
		}
		jobs, err := e.claim(ctx, free)
		for range free - len(jobs) {
			<-e.slots
		}
		if err != nil {
			if ctx.Err() == nil {
				e.log.Error().Err(err).Msg("claim runnable executions; retrying at the next wake-up")
			}
			return
		}
		if len(jobs) == 0 {
			return
		}
		for _, j := range jobs {
			e.track(j.ID, true)
			runJob := func(ctx context.Context) {
				defer func() {
					e.track(j.ID, false)
					<-e.slots
					e.poke()
				}()
				e.run(ctx, j)
			}
			if !e.life.Go("execution-"+j.ID, runJob) {
				// Stop came between the claim and here: ctx is cancelled, so the run records
				// the claimed execution as interrupted without running it.
				runJob(ctx)
			}
		}
		if len(jobs) < free {
			return // the backlog is drained; the next NOTIFY or poll wakes us
		}
	}
}

func (e *Executor) track(id string, on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if on {
		e.inflight[id] = struct{}{}
	} else {
		delete(e.inflight, id)
	}
}

func (e *Executor) inflightIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.inflight))
	for id := range e.inflight {
		ids = append(ids, id)
	}
	return ids
}

// Running is the number of executions this executor is running now.
func (e *Executor) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.inflight)
}

func (e *Executor) sweepLoop(ctx context.Context) {
	tick := time.NewTicker(e.opts.SweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.sweepNow:
		}
		n, err := e.SweepStuck(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Error().Err(err).Msg("sweep stuck executions")
		case n > 0:
			e.log.Warn().Int("count", n).Msg("marked stuck running executions as interrupted")
		}
		if e.opts.Owned == nil {
			continue // one scheduler: its orphans are found at its start
		}
		n, err = e.interruptDeadHolders(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Error().Err(err).Msg("sweep executions of stopped schedulers")
		case n > 0:
			e.m.observeSwept(sweptOrphaned, n)
			e.log.Warn().Int("count", n).Msg("marked executions of a scheduler that stopped answering as interrupted; they are not re-run")
		}
	}
}
