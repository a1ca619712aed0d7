package results

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/oikos-hq/oikos/shared/pg"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Defaults for WriterOptions.
const (
	DefaultFlushEvery          = time.Second
	DefaultUnchangedFlushEvery = 30 * time.Second
	DefaultFlushBatch          = 2000
	// DefaultBuffer holds two minutes of results at 100 checks/s: a database outage of a
	// minute (an update of the Postgres host) loses none.
	DefaultBuffer = 12000
	// DefaultMaxRetryDelay caps the back-off between attempts while writes fail: once the
	// database is back, what waits is written within this long.
	DefaultMaxRetryDelay = 5 * time.Second
)

// EventResultsUnrecorded is appended, once the database is back, for every check some of
// whose results could not be kept while it was unreachable (the buffer was full): the
// check's history has a gap there, and the event says why, when and how many.
const EventResultsUnrecorded = "check.results_unrecorded"

// EventHealthChanged is appended when a target's combined health changes.
const EventHealthChanged = "health.changed"

// Actor is recorded on the writer's events.
const Actor = "scheduler"

// Record is one result on its way to the database.
type Record struct {
	CheckID, CheckSlug, Kind string
	TargetID, TargetSlug     string
	At                       time.Time
	Result                   Result
	// Unit and Generation are the lease the check ran under (scheduler/internal/leases);
	// with WriterOptions.Holder the result is written only while that lease is still held
	// at that generation, checked in the writing statement itself.
	Unit       string
	Generation int64
}

// WriterOptions configure a Writer. Pool is required.
type WriterOptions struct {
	Pool   *storage.Pool
	Logger zerolog.Logger
	// Metrics receives the writer's metrics (README, Metrics); nil keeps them unregistered.
	Metrics prometheus.Registerer
	// Now stamps entity_status.changed_at (default time.Now).
	Now func() time.Time
	// FlushEvery is the longest a result that changes what is stored (a new health, error
	// class or, short of up, reason; a check's first result) waits to be written
	// (default 1 s).
	FlushEvery time.Duration
	// UnchangedFlushEvery is the longest a result that repeats the stored state waits
	// (default 30 × FlushEvery, at most 30 s): it only adds its metric samples and advances
	// the check's run count and the target's last observation, which nothing needs within
	// seconds (the staleness sweep's bound is 5 min at least). A longer window spreads a
	// flush's fixed cost over more results, and a check that ran twice in it is written
	// once.
	UnchangedFlushEvery time.Duration
	// FlushBatch: a flush starts as soon as this many results wait (default 2000), and a
	// flush writes at most this many (a backlog goes in several, oldest first).
	FlushBatch int
	// Buffer is how many results may wait (default DefaultBuffer, at least 2×FlushBatch).
	// While writes succeed a full buffer makes Submit wait (backpressure on the checks);
	// while they fail (the database is unreachable) the checks go on, and a result that
	// finds the buffer full is counted for its check and reported once the database is back
	// (EventResultsUnrecorded), never dropped silently.
	Buffer int
	// MaxRetryDelay caps the back-off between attempts of a failed write (default
	// DefaultMaxRetryDelay; the first retry comes after FlushEvery, then twice as long …).
	MaxRetryDelay time.Duration
	// Holder, when set, fences every write by lease: a result is written only while this
	// holder still holds its Record.Unit at its Record.Generation (storage qFenceLeases).
	Holder string
	// Flushed, when set, is called after every successful write with what it wrote: the
	// incident engine evaluates when a write carried a problem or a change of health.
	Flushed func(Flush)
}

// Flush says what one successful write carried.
type Flush struct {
	// Results written; Problems of them not up; Changes of targets' health.
	Results, Problems, Changes int
}

// Writer batches results into the database (see the package documentation). Start once;
// Stop flushes what was submitted and is safe twice.
type Writer struct {
	opts WriterOptions
	log  zerolog.Logger
	m    *writerMetrics
	life startstop.Lifecycle

	// Submitted results wait in buf (at most 4×FlushBatch) until the loop takes them. A
	// buffer under a mutex rather than a channel: a channel send wakes the writer goroutine
	// for every result (issue 6). The loop is woken only when a deadline moves earlier: the
	// first result of an empty buffer, the first changing one, a full batch.
	bufMu        sync.Mutex
	buf          []Record
	oldestAt     time.Time // arrival of the oldest waiting result; zero when none waits
	changedSince time.Time // arrival of the oldest waiting result that changes what is stored
	space        chan struct{}
	kick         chan struct{}
	pending      atomic.Int64
	// byUnit counts, per lease unit, the results submitted and not yet written or dropped
	// (under bufMu): a unit is handed to another scheduler only once its results are in.
	byUnit map[string]int

	// stored is the state last written for each check, which a new result is compared with
	// to tell a change from a repetition. It is a hint: a repetition is written only where
	// the row in check_results still holds that state (the heartbeat statement checks), so
	// a stale entry costs a full write, never a wrong one.
	storedMu sync.Mutex
	stored   map[string]storedState

	// lost counts, per check, the results that found the buffer full while writes failed
	// (under bufMu); the next batch reports them.
	lost map[string]*lostRun
	// failing is set from a failed write to the next successful one; failErr is its error.
	failing atomic.Bool
	failErr atomic.Pointer[string]
	// reachedAt is the latest successful write or probe (unix nanoseconds); probe asks the
	// loop to find out whether the database answers (Probe).
	reachedAt atomic.Int64
	probe     atomic.Bool
	lastPrune time.Time // of the batch ids (the loop's only)

	mu        sync.Mutex
	flushedAt time.Time
	flushErr  error
}

// storedState is what of a check's stored result decides whether a new one changes it.
type storedState struct {
	target, health, class, reason, placement string
}

// NewWriter builds a Writer.
func NewWriter(opts WriterOptions) *Writer {
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = DefaultFlushEvery
	}
	if opts.UnchangedFlushEvery <= 0 {
		opts.UnchangedFlushEvery = min(30*opts.FlushEvery, DefaultUnchangedFlushEvery)
	}
	opts.UnchangedFlushEvery = max(opts.UnchangedFlushEvery, opts.FlushEvery)
	if opts.FlushBatch <= 0 {
		opts.FlushBatch = DefaultFlushBatch
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	opts.Buffer = max(opts.Buffer, 2*opts.FlushBatch)
	if opts.MaxRetryDelay <= 0 {
		opts.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	w := &Writer{opts: opts, log: opts.Logger, kick: make(chan struct{}, 1), stored: map[string]storedState{},
		byUnit: map[string]int{}, lost: map[string]*lostRun{}}
	w.m = newWriterMetrics(opts.Metrics, func() float64 { return float64(w.Pending()) })
	return w
}

// batch is one write: its records, what was lost before it (reported in its transaction)
// and its id (storage qClaimBatch), kept across retries so a batch that did commit is not
// written twice.
type batch struct {
	id   string
	recs []Record
	lost []lostRun
}

// lostRun is what one check lost to a full buffer while writes failed.
type lostRun struct {
	CheckID    string    `json:"check_id"`
	CheckSlug  string    `json:"check_slug"`
	TargetSlug string    `json:"target_slug"`
	Count      int       `json:"count"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	Reason     string    `json:"reason"`
	targetID   string
}

// Failing reports whether the latest write failed (the database is unreachable, most
// likely): the runner keeps checking what it was assigned meanwhile.
func (w *Writer) Failing() bool { return w.failing.Load() }

// Probe asks the writer to find out soon whether the database answers: by writing what
// waits, or with a ping when nothing does (a failure sets Failing). The runner asks when a
// unit's lease lapses: a lease the manager could not renew because Postgres is down, or one
// that really went to another scheduler (ReachedSince then says so).
func (w *Writer) Probe() {
	w.probe.Store(true)
	w.Expedite()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// ReachedSince reports whether a write or a probe succeeded after t.
func (w *Writer) ReachedSince(t time.Time) bool { return w.reachedAt.Load() > t.UnixNano() }

// ping answers a Probe when nothing waits to be written.
func (w *Writer) ping(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := storage.New(w.opts.Pool).Ping(pctx); err != nil {
		msg := err.Error()
		w.failErr.Store(&msg)
		if !w.failing.Swap(true) {
			w.log.Error().Err(err).Msg("the database does not answer; results are kept for when it is back")
		}
		return
	}
	w.reachedAt.Store(time.Now().UnixNano())
	w.failing.Store(false)
}

// repeats reports whether rec's result leaves its check's stored state as it is: same
// target, health and error class, and the same reason unless it is up (an up reason
// carries the figure of the run, "cpu 3.2%", which the metric samples keep; a reason of
// any other health is what the target's status shows).
func (w *Writer) repeats(rec *Record) bool {
	w.storedMu.Lock()
	st, ok := w.stored[rec.CheckID]
	w.storedMu.Unlock()
	r := &rec.Result
	return ok && st.target == rec.TargetID && st.health == r.Health && st.class == r.Class &&
		(r.Health == HealthUp || st.reason == r.Reason) && st.placement == r.Placement
}

// ForgetTargets drops what the writer remembers of the checks of these targets, so their
// next results are written in full and the targets' health recomputed: the runner calls it
// when a target's set of checks changed (a check added, removed, disabled or edited), which
// changes the combined health even though no single result does.
func (w *Writer) ForgetTargets(targets map[string]bool) {
	if len(targets) == 0 {
		return
	}
	w.storedMu.Lock()
	defer w.storedMu.Unlock()
	for id, st := range w.stored {
		if targets[st.target] {
			delete(w.stored, id)
		}
	}
}

// Submit hands a result over. When the buffer is full it waits for room while writes
// succeed — backpressure on the checks rather than an unbounded queue — until ctx ends;
// while they fail it does not wait: the result is counted as lost for its check, and the
// loss is reported with the reason once the database is back (never silently).
func (w *Writer) Submit(ctx context.Context, rec Record) {
	// A result that is not up waits no longer than a change, even when it repeats: each
	// failed run counts towards an incident's failure threshold, which should not wait for
	// the 30 s of a healthy repetition.
	changes := !w.repeats(&rec) || rec.Result.Health != HealthUp
	w.pending.Add(1)
	for {
		w.bufMu.Lock()
		if len(w.buf) >= w.opts.Buffer && w.failing.Load() {
			w.loseLocked(&rec)
			w.bufMu.Unlock()
			w.pending.Add(-1)
			return
		}
		if len(w.buf) < w.opts.Buffer {
			now := time.Now()
			wake := false
			if len(w.buf) == 0 {
				w.oldestAt, wake = now, true
			}
			if changes && w.changedSince.IsZero() {
				w.changedSince, wake = now, true
			}
			w.buf = append(w.buf, rec)
			w.byUnit[rec.Unit]++
			if len(w.buf) >= w.opts.FlushBatch {
				wake = true
			}
			w.bufMu.Unlock()
			if wake {
				select {
				case w.kick <- struct{}{}:
				default:
				}
			}
			return
		}
		if w.space == nil {
			w.space = make(chan struct{})
		}
		space := w.space
		w.bufMu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			w.pending.Add(-1)
			return
		}
	}
}

// loseLocked counts rec as lost to a full buffer (bufMu held).
func (w *Writer) loseLocked(rec *Record) {
	why := fmt.Sprintf("the buffer of %d was full while the database was unreachable", w.opts.Buffer)
	if e := w.failErr.Load(); e != nil {
		why += " (" + *e + ")"
	}
	w.loseWhyLocked(rec, droppedBufferFull, why)
}

// writeTries is how often a batch the database refuses (an error that is not the database
// being away: a bad value, a bug) is tried before its results are given up and reported, so
// one bad batch cannot hold back every later result.
const writeTries = 5

// loseWhyLocked counts rec as lost for reason (bufMu held); why is what the check's
// check.results_unrecorded event says.
func (w *Writer) loseWhyLocked(rec *Record, reason, why string) {
	w.m.dropped.WithLabelValues(reason).Inc()
	l := w.lost[rec.CheckID]
	if l == nil {
		l = &lostRun{CheckID: rec.CheckID, CheckSlug: rec.CheckSlug, TargetSlug: rec.TargetSlug, targetID: rec.TargetID,
			From: rec.At, To: rec.At, Reason: why}
		w.lost[rec.CheckID] = l
		if len(w.lost) == 1 && reason == droppedBufferFull {
			w.log.Error().Int("buffered", len(w.buf)).Msg("the results buffer is full while the database is unreachable: further results are counted, not kept, and reported once it is back")
		}
	}
	l.Count++
	l.From, l.To = minTime(l.From, rec.At), maxTime(l.To, rec.At)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Pending counts results submitted and not yet written.
func (w *Writer) Pending() int64 { return w.pending.Load() }

// PendingFor counts the results of unit submitted and not yet written or dropped.
func (w *Writer) PendingFor(unit string) int {
	w.bufMu.Lock()
	defer w.bufMu.Unlock()
	return w.byUnit[unit]
}

// Expedite makes what waits due now, as if it had changed a FlushEvery ago: the results of
// a unit being handed to another scheduler are written before its lease goes, rather than
// after the up to 30 s a healthy repetition may wait (and then fenced out and lost).
func (w *Writer) Expedite() {
	w.bufMu.Lock()
	if len(w.buf) == 0 {
		w.bufMu.Unlock()
		return
	}
	if at := time.Now().Add(-w.opts.FlushEvery); w.changedSince.IsZero() || w.changedSince.After(at) {
		w.changedSince = at
	}
	w.bufMu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// settled counts recs as no longer pending: written, fenced out or dropped.
func (w *Writer) settled(recs []Record) {
	w.pending.Add(-int64(len(recs)))
	w.bufMu.Lock()
	defer w.bufMu.Unlock()
	for i := range recs {
		u := recs[i].Unit
		if w.byUnit[u]--; w.byUnit[u] <= 0 {
			delete(w.byUnit, u)
		}
	}
}

// take makes the next batch of at most FlushBatch of the oldest submitted results, with
// what was lost before them, and lets waiting submitters go on; nil when nothing waits. What
// stays keeps its deadlines, so a backlog is written batch after batch.
func (w *Writer) take() *batch {
	w.bufMu.Lock()
	defer w.bufMu.Unlock()
	if len(w.buf) == 0 && len(w.lost) == 0 {
		return nil
	}
	n := min(len(w.buf), w.opts.FlushBatch)
	b := &batch{id: uuid.NewString(), recs: slices.Clone(w.buf[:n])}
	rest := copy(w.buf, w.buf[n:])
	clear(w.buf[rest:])
	w.buf = w.buf[:rest]
	if rest == 0 {
		w.oldestAt, w.changedSince = time.Time{}, time.Time{}
	}
	for _, l := range w.lost {
		b.lost = append(b.lost, *l)
	}
	sort.Slice(b.lost, func(i, j int) bool { return b.lost[i].CheckSlug < b.lost[j].CheckSlug })
	clear(w.lost)
	w.releaseLocked()
	return b
}

// releaseLocked wakes the submitters waiting for room (bufMu held).
func (w *Writer) releaseLocked() {
	if w.space != nil {
		close(w.space)
		w.space = nil
	}
}

// due is when the waiting results must be written (zero: nothing waits) and whether a full
// batch waits.
func (w *Writer) due() (time.Time, bool) {
	w.bufMu.Lock()
	defer w.bufMu.Unlock()
	if len(w.buf) == 0 {
		if len(w.lost) > 0 {
			return time.Now(), false // a loss to report, and nothing to carry it
		}
		return time.Time{}, false
	}
	at := w.oldestAt.Add(w.opts.UnchangedFlushEvery)
	if !w.changedSince.IsZero() {
		at = earliest(at, w.changedSince.Add(w.opts.FlushEvery))
	}
	return at, len(w.buf) >= w.opts.FlushBatch
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Start starts the writing loop. It runs until Stop, whatever becomes of ctx (results
// submitted while the caller shuts down are still written).
func (w *Writer) Start(ctx context.Context) error {
	return w.life.Start(context.WithoutCancel(ctx), w.log, "check-result-writer", w.loop)
}

// Stop writes what was submitted and ends the writer. Safe twice; a no-op before Start.
func (w *Writer) Stop() { w.life.Stop() }

// LastFlush is when the latest successful write was, and the error of the latest attempt.
func (w *Writer) LastFlush() (*time.Time, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var at *time.Time
	if !w.flushedAt.IsZero() {
		t := w.flushedAt
		at = &t
	}
	msg := ""
	if w.flushErr != nil {
		msg = w.flushErr.Error()
	}
	return at, msg
}

func (w *Writer) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		cur       *batch // being written: a failed write keeps it, with its id, for the retry
		retryAt   time.Time
		failures  int
		failSince time.Time
	)
	attempt := func(fctx context.Context) error {
		err := w.flushBatch(fctx, cur)
		w.mu.Lock()
		w.flushErr = err
		if err == nil {
			w.flushedAt = time.Now()
		}
		w.mu.Unlock()
		if err != nil {
			failures++
			w.m.flushErrors.Inc()
			msg := err.Error()
			if !pg.IsUnavailable(err) && ctx.Err() == nil {
				// The database answered and refused: retried a few times (it may pass), then
				// given up and reported; the runner is not told the database is away.
				if failures >= writeTries {
					w.log.Error().Err(err).Int("results", len(cur.recs)).Int("tries", failures).
						Msg("the database refused a batch of check results; given up and reported as unrecorded")
					w.bufMu.Lock()
					for i := range cur.recs {
						w.loseWhyLocked(&cur.recs[i], droppedWriteFailed, "the database refused them: "+msg)
					}
					w.bufMu.Unlock()
					w.settled(cur.recs)
					cur, failures = nil, 0
					return err
				}
				delay := min(w.opts.FlushEvery<<min(failures-1, 16), w.opts.MaxRetryDelay)
				retryAt = time.Now().Add(delay)
				w.log.Warn().Err(err).Int("results", len(cur.recs)).Int("failures", failures).Dur("retry_in", delay).
					Msg("writing check results failed; retrying")
				return err
			}
			w.failErr.Store(&msg)
			if failures == 1 {
				failSince = time.Now()
				w.failing.Store(true)
				w.bufMu.Lock()
				w.releaseLocked() // waiting submitters go on: their results are counted, not blocked
				w.bufMu.Unlock()
			}
			delay := min(w.opts.FlushEvery<<min(failures-1, 16), w.opts.MaxRetryDelay)
			retryAt = time.Now().Add(delay)
			w.log.Error().Err(err).Int("results", len(cur.recs)).Int64("buffered", w.Pending()).Int("failures", failures).
				Dur("retry_in", delay).Msg("writing check results failed; kept for a retry")
			return err
		}
		if failures > 0 {
			w.log.Info().Int("failures", failures).Dur("for", time.Since(failSince).Round(time.Millisecond)).
				Int64("still_buffered", w.Pending()-int64(len(cur.recs))).Msg("writing check results again; the buffered ones follow in order")
		}
		failures = 0
		w.reachedAt.Store(time.Now().UnixNano())
		w.failing.Store(false)
		w.m.flushes.Inc()
		w.settled(cur.recs)
		cur = nil
		return nil
	}
	for {
		var at time.Time
		if cur != nil {
			// A failed batch is retried alone, with its id, before anything newer.
			at = retryAt
			if !time.Now().Before(at) {
				_ = attempt(ctx)
				continue
			}
		} else {
			if w.probe.Swap(false) && w.Pending() == 0 {
				w.ping(ctx)
			}
			var full bool
			at, full = w.due()
			if full || (!at.IsZero() && !time.Now().Before(at)) {
				if cur = w.take(); cur != nil {
					_ = attempt(ctx)
				}
				continue
			}
		}
		if !at.IsZero() {
			timer.Reset(time.Until(at))
		}
		select {
		case <-ctx.Done():
			w.drain(context.WithoutCancel(ctx), &cur, attempt)
			return
		case <-w.kick:
			// A deadline moved earlier or a batch filled up: recompute.
		case <-timer.C:
		}
		timer.Stop()
	}
}

// drain writes what waits on Stop, for at most 10 s; what it cannot write is counted and
// logged as lost (the database is unreachable as the scheduler stops).
func (w *Writer) drain(ctx context.Context, cur **batch, attempt func(context.Context) error) {
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if *cur == nil {
		*cur = w.take()
	}
	for *cur != nil {
		if err := attempt(fctx); err != nil {
			break
		}
		*cur = w.take()
	}
	for b := *cur; b != nil; b = w.take() {
		n := len(b.recs)
		for _, l := range b.lost {
			n += l.Count
		}
		w.settled(b.recs)
		w.m.dropped.WithLabelValues(droppedShutdown).Add(float64(n))
		w.log.Error().Int("results", n).Msg("stopping with check results the database did not take: they are lost")
	}
}

type targetStatus struct {
	health, reason string
}

type healthChange struct {
	EntityID string `json:"entity_id"`
	Slug     string `json:"slug"`
	From     string `json:"from"`
	To       string `json:"to"`
	Reason   string `json:"reason"`
}

// flush writes one batch in one transaction (storage.InResultsTx, over pg.InBatchTx) of two
// round trips (the statements are storage/results.go's):
//
//   - when some results repeat their check's stored state: BEGIN and qConfirmResults (those
//     results and every sample of the batch); then, for the rest — changing results, and
//     repeating ones whose stored row turned out to differ — writeChanged's first batch, and
//     its last with COMMIT (three round trips); or COMMIT alone when nothing is left;
//   - when none does: BEGIN, qConfirmResults (the samples) and writeChanged's first batch; then
//     its last batch with COMMIT.
func (w *Writer) flush(ctx context.Context, recs []Record) error {
	return w.flushBatch(ctx, &batch{id: uuid.NewString(), recs: recs})
}

// flushBatch writes b (see flush) under its id: an attempt that finds the id stored (an
// earlier attempt committed, and its answer was lost) writes nothing and succeeds.
func (w *Writer) flushBatch(ctx context.Context, b *batch) error {
	batch := b.recs
	var (
		latest                map[string]int // check id → index in batch
		problems              int
		tails                 map[string]int32
		same, changed         []*Record
		cIDs, cHealth, cClass []string
		cReason               []*string
		cAt                   []time.Time
		cObs                  []*time.Time
		cRuns                 []int32
		sChecks, sNames       []string
		sValues               []float64
		sAts                  []time.Time
		fenced                int
	)
	// prepare reads the batch: the latest result per check, and every result's metrics.
	prepare := func(batch []Record) {
		latest = map[string]int{}
		var checkIDs []string
		problems = 0
		for i, rec := range batch {
			j, ok := latest[rec.CheckID]
			if !ok {
				checkIDs = append(checkIDs, rec.CheckID)
			}
			if !ok || !rec.At.Before(batch[j].At) {
				latest[rec.CheckID] = i
			}
			if rec.Result.Health != HealthUp {
				problems++
			}
		}
		tails = streakTails(batch, latest)
		for _, cid := range checkIDs {
			rec := &batch[latest[cid]]
			if !w.repeats(rec) {
				changed = append(changed, rec)
				continue
			}
			same = append(same, rec)
			cIDs = append(cIDs, rec.CheckID)
			cHealth = append(cHealth, rec.Result.Health)
			cClass = append(cClass, rec.Result.Class)
			var reason *string // any reason, for an up result
			if rec.Result.Health != HealthUp {
				reason = &rec.Result.Reason
			}
			cReason = append(cReason, reason)
			cAt = append(cAt, rec.At)
			cObs = append(cObs, observedAt(rec))
			cRuns = append(cRuns, tails[rec.CheckID])
		}
		for i := range batch {
			rec := &batch[i]
			for _, m := range rec.Result.Metrics {
				sChecks = append(sChecks, rec.CheckID)
				sNames = append(sNames, m.Name)
				sValues = append(sValues, m.Value)
				sAts = append(sAts, rec.At)
			}
		}
	}
	if w.opts.Holder == "" {
		prepare(batch)
	}

	var (
		samples   int64
		confirmed []string
		written   map[string]bool
		changes   []healthChange
		dropped   int
	)
	prune := time.Since(w.lastPrune) > 10*time.Minute
	err := storage.New(w.opts.Pool).InResultsTx(ctx, func(tx *storage.ResultsTx) error {
		tx.QueueClaimBatch(b.id, prune)
		for i := range b.lost {
			l := b.lost[i]
			l.Reason = fmt.Sprintf("unknown: %d results not recorded from %s to %s: %s",
				l.Count, l.From.UTC().Format(time.RFC3339), l.To.UTC().Format(time.RFC3339), l.Reason)
			if err := tx.QueueEvent(eventbus.Event{Type: EventResultsUnrecorded, EntityID: l.targetID, Actor: Actor}, l); err != nil {
				return err
			}
		}
		if w.opts.Holder != "" {
			kept, err := w.fence(ctx, tx, batch)
			if err != nil {
				return err
			}
			fenced = len(batch) - len(kept)
			prepare(kept)
			if len(kept) == 0 {
				return tx.Commit(ctx)
			}
		}
		tx.QueueConfirm(storage.Confirm{CIDs: cIDs, CHealth: cHealth, CClass: cClass, CReason: cReason, CAt: cAt, CObs: cObs,
			CRuns: cRuns, SChecks: sChecks, SNames: sNames, SValues: sValues, SAts: sAts}, &samples, &confirmed)
		if len(same) > 0 {
			if err := tx.Send(ctx); err != nil {
				return err
			}
			ok := make(map[string]bool, len(confirmed))
			for _, id := range confirmed {
				ok[id] = true
			}
			for _, rec := range same {
				if !ok[rec.CheckID] {
					changed = append(changed, rec)
				}
			}
			if len(changed) == 0 {
				return tx.Commit(ctx)
			}
		}
		var err error
		written, dropped, changes, err = w.writeChanged(ctx, tx, changed, tails)
		return err
	})
	if err != nil && storage.BatchCommitted(err) {
		// Written by an earlier attempt: nothing to do but forget what that attempt would
		// have remembered (the next results of these checks are written in full).
		w.storedMu.Lock()
		for i := range batch {
			delete(w.stored, batch[i].CheckID)
		}
		w.storedMu.Unlock()
		w.log.Info().Str("batch", b.id).Int("results", len(batch)).Msg("a retried batch of check results had been written already")
		return nil
	}
	if err != nil {
		return fmt.Errorf("write check results: %w", err)
	}
	if prune {
		w.lastPrune = time.Now()
	}
	if len(b.lost) > 0 {
		n := 0
		for _, l := range b.lost {
			n += l.Count
		}
		w.log.Warn().Int("checks", len(b.lost)).Int("results", n).Msg("recorded the results the full buffer could not keep as check.results_unrecorded events")
	}
	// What is stored now; a result older than the stored row leaves its check unknown.
	w.storedMu.Lock()
	for _, rec := range changed {
		if written[rec.CheckID] {
			r := &rec.Result
			w.stored[rec.CheckID] = storedState{target: rec.TargetID, health: r.Health, class: r.Class, reason: r.Reason, placement: r.Placement}
		} else {
			delete(w.stored, rec.CheckID)
		}
	}
	w.storedMu.Unlock()
	if fenced > 0 {
		w.m.dropped.WithLabelValues(droppedLeaseLost).Add(float64(fenced))
		w.log.Info().Int("results", fenced).Msg("results of units whose lease this scheduler no longer holds were dropped")
	}
	if dropped > 0 {
		w.m.dropped.WithLabelValues(droppedCheckDeleted).Add(float64(dropped))
		w.log.Debug().Int("results", dropped).Msg("results of checks deleted since they ran were dropped")
	}
	w.m.unchanged.Add(float64(len(confirmed)))
	w.m.samples.Add(float64(samples))
	w.m.healthChanges.Add(float64(len(changes)))
	if w.opts.Flushed != nil {
		w.opts.Flushed(Flush{Results: len(batch), Problems: problems, Changes: len(changes)})
	}
	return nil
}

// The fence (storage's qFenceLeases) reads which of the leases the batch ran under this
// scheduler still holds, at the same generation and unexpired by the server's clock now, and
// locks them FOR SHARE: a scheduler taking one over (leases.Tick's conditional upsert) waits
// for this transaction, so no result is written after its lease passed to another holder.

// fence sends BEGIN and the fence and returns the records whose lease still holds.
func (w *Writer) fence(ctx context.Context, tx *storage.ResultsTx, batch []Record) ([]Record, error) {
	var units []string
	for _, rec := range batch {
		if !slices.Contains(units, rec.Unit) {
			units = append(units, rec.Unit)
		}
	}
	held := map[string]int64{}
	tx.QueueFence(w.opts.Holder, units, held)
	if err := tx.Send(ctx); err != nil {
		return nil, fmt.Errorf("fence by lease: %w", err)
	}
	kept := make([]Record, 0, len(batch))
	for _, rec := range batch {
		if g, ok := held[rec.Unit]; ok && g == rec.Generation {
			kept = append(kept, rec)
		}
	}
	return kept, nil
}

// streakTails counts, for each check of the batch, how many of its results in a row end
// with the health of its latest one: what the write adds to its row's streak (a check that
// ran three times in one flush window counts three runs towards a threshold, not one).
func streakTails(batch []Record, latest map[string]int) map[string]int32 {
	byCheck := make(map[string][]*Record, len(latest))
	for i := range batch {
		byCheck[batch[i].CheckID] = append(byCheck[batch[i].CheckID], &batch[i])
	}
	tails := make(map[string]int32, len(latest))
	for id, recs := range byCheck {
		if len(recs) == 1 {
			tails[id] = 1
			continue
		}
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].At.Before(recs[j].At) })
		last := batch[latest[id]].Result
		n := int32(0)
		for i := len(recs) - 1; i >= 0 && sameStreak(recs[i].Result, last); i-- {
			n++
		}
		tails[id] = max(n, 1)
	}
	return tails
}

// sameStreak says whether r counts towards the streak that last ends: the same health, or an
// unreachable machine's unconfirmed first failure (unknown, "down if the next attempt fails
// too") before its confirmed one. That first failed dial was a failed run: counting it keeps
// the confirmation from adding a run to the incident threshold (storage's qUpsertResults
// applies the same rule across flushes).
func sameStreak(r, last Result) bool {
	return r.Health == last.Health || (r.Health == HealthUnknown && r.Class == ClassUnreachable &&
		last.Health == HealthDown && last.Class == ClassUnreachable)
}

func observedAt(rec *Record) *time.Time {
	if rec.Result.Observed {
		return &rec.At
	}
	return nil
}

// writeChanged writes the rows of the changing results and the recomputed statuses of
// their targets: tx's next batch (possibly carrying BEGIN) gets the upsert,
// the status rows and the reads, and the last batch the status UPDATE, the events and
// COMMIT. It returns the checks whose row was written, the results of deleted checks, and
// the transitions.
func (w *Writer) writeChanged(ctx context.Context, tx *storage.ResultsTx, changed []*Record, tails map[string]int32) (map[string]bool, int, []healthChange, error) {
	n := len(changed)
	var (
		ids, healths, reasons, classes, summaries = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		ats                                       = make([]time.Time, 0, n)
		obs                                       = make([]*time.Time, 0, n)
		runs                                      = make([]int32, 0, n)
	)
	for _, rec := range changed {
		summary := rec.Result.Summary
		if summary == nil {
			summary = map[string]any{}
		}
		raw, err := json.Marshal(summary)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%s summary: %w", rec.CheckSlug, err)
		}
		ids = append(ids, rec.CheckID)
		healths = append(healths, rec.Result.Health)
		reasons = append(reasons, rec.Result.Reason)
		classes = append(classes, rec.Result.Class)
		summaries = append(summaries, string(raw))
		ats = append(ats, rec.At)
		obs = append(obs, observedAt(rec))
		runs = append(runs, max(tails[rec.CheckID], 1))
	}
	exists := make(map[string]bool, n)
	written := make(map[string]bool, n)
	tx.QueueUpsert(ids, healths, reasons, classes, summaries, ats, obs, runs, func(id, _ string, wrote bool) {
		exists[id] = true
		if wrote {
			written[id] = true
		}
	})
	// Status rows are created with the schema's default (unknown), then locked in id order
	// so two schedulers writing the same targets cannot deadlock.
	tx.QueueEnsureStatus(ids)
	old := map[string]targetStatus{}
	slugOf := map[string]string{}
	tx.QueueLockStatus(ids, func(id, health, reason, slug string) {
		old[id] = targetStatus{health: health, reason: reason}
		slugOf[id] = slug
	})
	states := map[string][]checkState{}
	tx.QueueTargetStates(ids, func(tid string, s checkState) {
		states[tid] = append(states[tid], s)
	})
	if err := tx.Send(ctx); err != nil {
		return nil, 0, nil, err
	}
	changes, err := w.queueStatuses(tx, old, slugOf, states)
	if err != nil {
		return nil, 0, nil, err
	}
	for _, c := range changes {
		if err := tx.QueueEvent(eventbus.Event{Type: EventHealthChanged, EntityID: c.EntityID, Actor: Actor}, c); err != nil {
			return nil, 0, nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, nil, err
	}
	return written, n - len(exists), changes, nil
}

// queueStatuses queues the UPDATE of the locked targets' (old) entity_status from their
// enabled checks' latest results (states) and returns the transitions.
func (w *Writer) queueStatuses(tx *storage.ResultsTx, old map[string]targetStatus, slugOf map[string]string, states map[string][]checkState) ([]healthChange, error) {
	targets := make([]string, 0, len(old))
	for tid := range old {
		targets = append(targets, tid)
	}
	sort.Strings(targets)
	var (
		ids, healths, reasons, summaries = make([]string, 0, len(targets)), make([]string, 0, len(targets)), make([]string, 0, len(targets)), make([]string, 0, len(targets))
		last                             = make([]*time.Time, 0, len(targets))
		changes                          []healthChange
	)
	for _, tid := range targets {
		prev := old[tid]
		c := combine(states[tid])
		if prev.health == HealthStale && c.Health == HealthUnknown {
			// Still nothing observed: stale stays stale (the sweep set it; an unknown
			// result brings no news that would make the data current again).
			c.Health, c.Reason = HealthStale, prev.reason
		}
		raw, err := json.Marshal(c.Summary)
		if err != nil {
			return nil, fmt.Errorf("status summary: %w", err)
		}
		ids = append(ids, tid)
		healths = append(healths, c.Health)
		reasons = append(reasons, c.Reason)
		summaries = append(summaries, string(raw))
		last = append(last, c.LastCheckAt)
		if prev.health != c.Health {
			changes = append(changes, healthChange{EntityID: tid, Slug: slugOf[tid], From: prev.health, To: c.Health, Reason: c.Reason})
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// last_check_at only moves forward: it is the newest observation of the target, and
	// a confirmation may have advanced it past what the states say (qUpdateStatuses).
	tx.QueueUpdateStatuses(ids, healths, reasons, summaries, last, w.opts.Now())
	return changes, nil
}
