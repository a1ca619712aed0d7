package notifyworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/notifystore"
	"github.com/oikos-hq/oikos/shared/ids"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Actor is who the worker's signals are raised and resolved as.
const Actor = "api"

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	Pool    *storage.Pool
	Logger  zerolog.Logger
	Sender  notifytarget.Sender // default: a Transport
	Secrets notify.Secrets
	// Retry, when set, is an explicit schedule: the wait after each failed attempt, and a
	// delivery gets len(Retry)+1 attempts. Unset, Backoff decides.
	Retry []time.Duration
	// Backoff is the capped exponential back-off with jitter used without Retry (zero
	// members: DefaultBackoff's).
	Backoff Backoff
	// Rand draws the back-off's jitter in [0, 1) (default math/rand).
	Rand func() float64
	// FailingAfter is how many consecutive failed attempts make a channel failing (default
	// DefaultFailingAfter).
	FailingAfter int
	// Now is the clock due times, quiet hours and mutes are read against (time.Now).
	Now func() time.Time
	// Poll is the longest the worker sleeps without a wake-up (default 5 s).
	Poll time.Duration
	// Concurrency bounds the sends in flight, one per channel at most (default 8).
	Concurrency int
	// Lease is how long a claimed delivery is held: if the api dies while sending it, it is
	// due again after the lease (default 1 min; longer than an attempt's timeout).
	Lease time.Duration
	// Metrics receives the worker's metrics; nil keeps them unregistered.
	Metrics prometheus.Registerer
	// Observe, when set, is told what became of each claimed delivery once it is written
	// (tests wait on it instead of polling).
	Observe func(Outcome)
}

// Outcome says what became of a claimed delivery.
type Outcome struct {
	DeliveryID string
	ChannelID  string
	Channel    string
	Kind       string
	// Result is sent, retry (an attempt failed, another is due), failed (the last attempt
	// failed), suppressed, deferred (quiet hours) or released (the api stopped mid-send).
	Result string
	// Attempt is the attempt's number (1 for the first); 0 when none was made.
	Attempt int
	// Error is the attempt's error, redacted, or why the delivery was suppressed.
	Error string
}

// Results of an Outcome.
const (
	ResultSent       = "sent"
	ResultRetry      = "retry"
	ResultFailed     = "failed"
	ResultSuppressed = "suppressed"
	ResultDeferred   = "deferred"
	ResultReleased   = "released"
)

func (w *Worker) observe(c notifystore.Claimed, result string, attempt int, msg string) {
	if w.o.Observe != nil {
		w.o.Observe(Outcome{DeliveryID: c.ID, ChannelID: c.ChannelID, Channel: c.Channel, Kind: c.Kind, Result: result,
			Attempt: attempt, Error: msg})
	}
}

// Worker sends due deliveries. It claims them with FOR UPDATE SKIP LOCKED, at most one per
// channel at a time and never one of a channel it is already sending to, so a slow or dead
// endpoint holds up only its own channel; every attempt is recorded; a failure is retried
// after the next back-off, and the last failure fails the delivery and raises the channel's
// notification_channel_failing signal, which the channel's next success resolves.
type Worker struct {
	o       WorkerOptions
	db      *notifystore.Store
	life    startstop.Lifecycle
	wake    chan struct{}
	signals *signals.Store

	mu   sync.Mutex
	busy map[string]bool // channel ids being sent to

	attempts *prometheus.HistogramVec
}

// NewWorker builds a worker.
func NewWorker(o WorkerOptions) (*Worker, error) {
	if o.Pool == nil {
		return nil, errors.New("notify: the worker needs a pool")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sender == nil {
		o.Sender = &notifytarget.Transport{Logger: o.Logger}
	}
	o.Backoff = o.Backoff.withDefaults()
	if o.Rand == nil {
		o.Rand = randFloat
	}
	if o.FailingAfter <= 0 {
		o.FailingAfter = DefaultFailingAfter
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Lease <= 0 {
		o.Lease = time.Minute
	}
	return &Worker{o: o, db: notifystore.New(o.Pool), wake: make(chan struct{}, 1), busy: map[string]bool{},
		signals: signals.New(o.Now).As(Actor),
		attempts: metrics.Register(o.Metrics, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oikos_api_notification_attempt_duration_seconds",
			Help:    "Attempts at sending a notification, by channel kind and outcome (ok, failed).",
			Buckets: metrics.SlowBuckets(),
		}, []string{"channel_kind", "outcome"})),
	}, nil
}

// Start runs the worker until Stop.
func (w *Worker) Start(ctx context.Context) error {
	return w.life.Start(ctx, w.o.Logger, "notify-worker", w.loop)
}

// Stop ends the worker and waits for the sends in flight (each bounded by its timeout; one
// cut short is due again at once, unrecorded).
func (w *Worker) Stop() { w.life.Stop() }

// Wake makes the worker look for due deliveries now.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) loop(ctx context.Context) {
	for {
		if err := w.claim(ctx); err != nil && ctx.Err() == nil {
			w.o.Logger.Warn().Err(err).Msg("notifications: claiming due deliveries failed; retrying")
		}
		timer := time.NewTimer(w.untilDue(ctx))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-w.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// busyChannels lists the channels being sent to and how many more sends may start.
func (w *Worker) busyChannels() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.busy))
	for id := range w.busy {
		out = append(out, id)
	}
	return out, w.o.Concurrency - len(w.busy)
}

// untilDue is how long to sleep: until the next pending delivery of a free channel is due,
// at most Poll; with no free slot, until a send ends (it wakes the loop) or Poll.
func (w *Worker) untilDue(ctx context.Context) time.Duration {
	busy, free := w.busyChannels()
	if free <= 0 {
		return w.o.Poll
	}
	due, err := w.db.NextDue(ctx, busy)
	if err != nil || due == nil {
		return w.o.Poll
	}
	// A floor keeps a delivery that is due but locked by another claimer from spinning the loop.
	return min(max(due.Sub(w.o.Now()), 10*time.Millisecond), w.o.Poll)
}

// claim leases due deliveries, one per free channel, and starts their sends.
func (w *Worker) claim(ctx context.Context) error {
	busy, free := w.busyChannels()
	if free <= 0 {
		return nil
	}
	now := w.o.Now()
	// The lease doubles as the claim's token: an update that finds another next_attempt_at
	// lost the delivery to another claimer after the lease ran out.
	lease := now.Add(w.o.Lease).Truncate(time.Microsecond)
	var got []notifystore.Claimed
	err := w.db.InTx(ctx, func(tx *notifystore.Store) error {
		due, err := tx.DueDeliveries(ctx, now, busy)
		if err != nil {
			return err
		}
		var pick []string
		seen := map[string]bool{}
		for _, d := range due {
			if !seen[d.ChannelID] && len(pick) < free {
				seen[d.ChannelID] = true
				pick = append(pick, d.ID)
			}
		}
		if len(pick) == 0 {
			return nil
		}
		got, err = tx.Lease(ctx, pick, lease)
		return err
	})
	if err != nil {
		return fmt.Errorf("claim deliveries: %w", err)
	}
	for _, c := range got {
		w.mu.Lock()
		w.busy[c.ChannelID] = true
		w.mu.Unlock()
		started := w.life.Go("notify-send", func(ctx context.Context) {
			defer func() {
				w.mu.Lock()
				delete(w.busy, c.ChannelID)
				w.mu.Unlock()
				w.Wake()
			}()
			w.deliver(ctx, c)
		})
		if !started {
			// Stopping: the lease runs out and the delivery is due again.
			w.mu.Lock()
			delete(w.busy, c.ChannelID)
			w.mu.Unlock()
		}
	}
	return nil
}

// errLost is a claim another claimer took over after its lease ran out.
var errLost = notifystore.ErrLost

// deliver makes one attempt at c, or suppresses or defers it.
func (w *Worker) deliver(ctx context.Context, c notifystore.Claimed) {
	log := w.o.Logger.With().Str("delivery", c.ID).Str("channel", c.Channel).Str("kind", c.Kind).Logger()
	// What is written after the attempt must be written even when the api is stopping: an
	// attempt that was made and not recorded would be made again.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	now := w.o.Now()
	if !c.Enabled {
		w.settle(wctx, log, c, "the channel is disabled")
		return
	}
	if reason, err := w.silenced(wctx, c, now); err != nil {
		log.Warn().Err(err).Msg("notifications: could not read the incident's mute; sending")
	} else if reason != "" {
		w.settle(wctx, log, c, reason)
		return
	}
	if c.QuietStart != nil && c.QuietEnd != nil {
		if q, err := notify.ParseQuiet(*c.QuietStart, *c.QuietEnd, c.Timezone); err == nil {
			if end, in := q.Until(now); in {
				// Nothing is dropped: it is sent when the window ends.
				if w.guarded(log, w.db.Defer(wctx, c, end)) {
					w.observe(c, ResultDeferred, 0, "")
				}
				return
			}
		}
	}
	target, err := notify.ResolveTarget(wctx, w.db, w.o.Secrets, c.ChannelKind, c.URLRef, c.SecretRef)
	start := time.Now()
	code := 0
	if err == nil {
		code, err = w.o.Sender.Send(ctx, target, notifytarget.Message{ID: c.Key, Kind: c.Kind, Severity: c.Severity,
			Title: c.Title, Body: c.Body, Link: c.Link, Payload: c.Payload,
			Event: notifytarget.EventRef{ID: c.EventID, Type: c.EventType, At: c.EventAt, EntityID: c.EntityID}})
	}
	elapsed := time.Since(start)
	if err != nil && ctx.Err() != nil {
		// Stopped mid-send: due again at once, at the next start, without an attempt counted.
		if w.guarded(log, w.db.Defer(wctx, c, now)) {
			w.observe(c, ResultReleased, 0, "")
		}
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	w.attempts.WithLabelValues(c.ChannelKind, outcome).Observe(elapsed.Seconds())
	msg := clip(notifytarget.RedactError(err, target.URL, target.Secret))
	result, msg, err := w.record(wctx, c, code, msg, elapsed)
	if errors.Is(err, errLost) {
		// Deleted with its channel, or taken over after the lease ran out.
		log.Info().Msg("notifications: a delivery changed while it was sent; the attempt is not recorded")
		return
	}
	if err != nil {
		log.Error().Err(err).Msg("notifications: could not record an attempt; the delivery is retried when its lease ends")
		return
	}
	if msg != "" {
		log.Warn().Str("error", msg).Int("attempt", c.Attempts+1).Str("result", result).Msg("notification not delivered")
	}
	w.observe(c, result, c.Attempts+1, msg)
}

// maxError bounds a stored error: enough to act on, not a receiver's whole error page.
const maxError = 500

// clip makes an error one line of at most maxError characters.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxError {
		s = string(r[:maxError-1]) + "…"
	}
	return s
}

// guarded reports whether a leased update (the store's writes after a claim: the delivery
// still pending and still ours) applied, and logs why not.
func (w *Worker) guarded(log zerolog.Logger, err error) bool {
	if err != nil {
		log.Warn().Err(err).Msg("notifications: could not update a delivery")
		return false
	}
	return true
}

// settle suppresses a delivery: recorded with its reason, never sent.
func (w *Worker) settle(ctx context.Context, log zerolog.Logger, c notifystore.Claimed, reason string) {
	if w.guarded(log, w.db.Suppress(ctx, c, reason)) {
		w.observe(c, ResultSuppressed, 0, reason)
	}
}

// silenced says why an incident's notification is not to be sent, or "": the incident (its
// signal) is muted, or resolved while a mute still ran (an operator who muted it does not
// want to hear about it), or acknowledged and this is only an update. The incident itself
// is never touched.
func (w *Worker) silenced(ctx context.Context, c notifystore.Claimed, now time.Time) (string, error) {
	if !strings.HasPrefix(c.Kind, "incident.") {
		return "", nil
	}
	var p struct {
		IncidentID string `json:"incident_id"`
	}
	if json.Unmarshal(c.Payload, &p) != nil || !ids.IsUUID(p.IncidentID) {
		return "", nil
	}
	status, until, found, err := w.db.Incident(ctx, p.IncidentID)
	if err != nil || !found {
		return "", err
	}
	switch {
	case until != nil && until.After(now) && (status == "muted" || status == "resolved"):
		return "the incident is muted until " + until.UTC().Format(time.RFC3339), nil
	case status == "acknowledged" && c.Kind == notify.KindIncidentUpdated:
		return "the incident is acknowledged", nil
	}
	return "", nil
}

// next decides what follows a failed attempt: the time it is due again, or zero when it
// fails (the schedule is spent, it is older than the give-up age, or the answer was a
// permanent refusal), with the reason added to its error.
func (w *Worker) next(c notifystore.Claimed, attempts, code int, now time.Time) (time.Time, string) {
	switch {
	case permanent(code):
		return time.Time{}, "; not retried: a 4xx other than 408 or 429 will be refused again"
	case w.o.Retry != nil:
		if attempts <= len(w.o.Retry) {
			return now.Add(w.o.Retry[attempts-1]), ""
		}
		return time.Time{}, ""
	case now.Sub(c.CreatedAt) >= w.o.Backoff.GiveUpAfter:
		return time.Time{}, "; given up " + w.o.Backoff.GiveUpAfter.String() + " after it was queued"
	}
	return now.Add(w.o.Backoff.Delay(attempts, w.o.Rand())), ""
}

// record writes an attempt and its consequences in one transaction: the delivery sent, due
// again after the next back-off, or failed; the channel's health (its last success or error
// and its consecutive failures); and, when the attempt began or ended a failing episode, the
// channel's failing signal raised or resolved with its notification_target.failing or
// .recovered event and audit row. The channel's row lock makes that happen once per episode
// even with two apis.
func (w *Worker) record(ctx context.Context, c notifystore.Claimed, code int, errMsg string, elapsed time.Duration) (string, string, error) {
	now := w.o.Now()
	attempts := c.Attempts + 1
	ok := errMsg == ""
	result := ResultSent
	var due time.Time
	if !ok {
		var why string
		due, why = w.next(c, attempts, code, now)
		result = ResultRetry
		if due.IsZero() {
			result = ResultFailed
			errMsg = clip(errMsg + why)
		}
	}
	err := w.db.InTx(ctx, func(tx *notifystore.Store) error {
		var err error
		switch result {
		case ResultSent:
			err = tx.MarkSent(ctx, c, attempts, now)
		case ResultRetry:
			err = tx.MarkRetry(ctx, c, attempts, due, errMsg)
		default:
			err = tx.MarkFailed(ctx, c, attempts, errMsg)
		}
		if err != nil {
			return err
		}
		a := notifystore.AttemptRow{DeliveryID: c.ID, At: now, OK: ok, Duration: elapsed}
		if code != 0 {
			a.StatusCode = &code
		}
		if !ok {
			a.Error = &errMsg
		}
		if err := tx.InsertAttempt(ctx, a); err != nil {
			return err
		}
		if ok {
			h, err := tx.ChannelOK(ctx, c.ChannelID, now)
			if err != nil || !h.Recovered {
				return err
			}
			if _, err := tx.ResolveSignal(ctx, w.signals, notify.FailingKey(c.ChannelID), "a delivery to the channel succeeded"); err != nil {
				return err
			}
			return w.report(ctx, tx, notify.EventTargetRecovered, notify.TargetHealth{ChannelID: c.ChannelID,
				Channel: h.Channel, ChannelKind: c.ChannelKind, State: notifystore.StateOK, FailingSince: h.FailingSince,
				RecoveredAt: &now, DeliveryID: c.ID})
		}
		h, err := tx.ChannelFailed(ctx, c.ChannelID, errMsg, now, w.o.FailingAfter)
		if err != nil || !h.Failing {
			return err
		}
		if _, err = tx.RaiseSignal(ctx, w.signals, signals.Signal{
			Kind: notify.SignalFailing, DedupKey: notify.FailingKey(c.ChannelID), Severity: signals.SeverityWarning,
			Summary: fmt.Sprintf("notification channel %s is failing: %s", h.Channel, errMsg),
			Details: map[string]any{"channel_id": c.ChannelID, "channel": h.Channel, "delivery_id": c.ID,
				"kind": c.Kind, "consecutive_failures": h.Failures, "error": errMsg},
		}); err != nil {
			return err
		}
		return w.report(ctx, tx, notify.EventTargetFailing, notify.TargetHealth{ChannelID: c.ChannelID, Channel: h.Channel,
			ChannelKind: c.ChannelKind, State: notifystore.StateFailing, ConsecutiveFailures: h.Failures,
			LastError: errMsg, FailingSince: &now, DeliveryID: c.ID})
	})
	return result, errMsg, err
}

// report writes a health change's audit row and event (the action is the event's type).
func (w *Worker) report(ctx context.Context, tx *notifystore.Store, typ string, h notify.TargetHealth) error {
	return tx.Record(ctx, notify.Meta{Actor: Actor, CorrelationID: "delivery:" + h.DeliveryID}, typ, typ, nil, h)
}
