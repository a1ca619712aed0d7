package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/ids"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// DefaultRetry is the back-off between a delivery's attempts: after the first failure it is
// tried again in 10 s, then 1 min, 5 min, 15 min and 1 h; a sixth failure fails it.
var DefaultRetry = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}

// Actor is who the worker's signals are raised and resolved as.
const Actor = "api"

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	Pool    *pgxpool.Pool
	Logger  zerolog.Logger
	Sender  Sender // default: a Transport
	Secrets Secrets
	// Retry is the back-off after each failed attempt; a delivery gets len(Retry)+1 attempts
	// (default DefaultRetry).
	Retry []time.Duration
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

func (w *Worker) observe(c claimed, result string, attempt int, msg string) {
	if w.o.Observe != nil {
		w.o.Observe(Outcome{DeliveryID: c.id, ChannelID: c.channelID, Channel: c.channel, Kind: c.kind, Result: result,
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
		o.Sender = &Transport{Logger: o.Logger}
	}
	if o.Retry == nil {
		o.Retry = DefaultRetry
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
	return &Worker{o: o, wake: make(chan struct{}, 1), busy: map[string]bool{},
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
	var due *time.Time
	err := w.o.Pool.QueryRow(ctx, `SELECT min(next_attempt_at) FROM notification_deliveries
		WHERE status = 'pending' AND NOT (channel_id = ANY($1::uuid[]))`, busy).Scan(&due)
	if err != nil || due == nil {
		return w.o.Poll
	}
	// A floor keeps a delivery that is due but locked by another claimer from spinning the loop.
	return min(max(due.Sub(w.o.Now()), 10*time.Millisecond), w.o.Poll)
}

// claimed is a delivery leased for one attempt, with its channel.
type claimed struct {
	id, key, channelID, channel, kind, severity, title, body, link string
	payload                                                        json.RawMessage
	event                                                          EventRef
	attempts                                                       int
	channelKind, urlRef                                            string
	secretRef, quietStart, quietEnd                                *string
	timezone                                                       string
	enabled                                                        bool
	lease                                                          time.Time
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
	var got []claimed
	err := pg.InTx(ctx, w.o.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id::text, channel_id::text FROM notification_deliveries
			WHERE status = 'pending' AND next_attempt_at <= $1 AND NOT (channel_id = ANY($2::uuid[]))
			ORDER BY next_attempt_at, id LIMIT 100 FOR UPDATE SKIP LOCKED`, now, busy)
		if err != nil {
			return err
		}
		var pick []string
		seen := map[string]bool{}
		var id, ch string
		_, err = pgx.ForEachRow(rows, []any{&id, &ch}, func() error {
			if !seen[ch] && len(pick) < free {
				seen[ch] = true
				pick = append(pick, id)
			}
			return nil
		})
		if err != nil || len(pick) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, `UPDATE notification_deliveries d SET next_attempt_at = $2
			FROM notification_channels c WHERE d.id = ANY($1::uuid[]) AND c.id = d.channel_id
			RETURNING d.id::text, d.idempotency_key, d.channel_id::text, c.name, d.kind, d.severity, d.title, d.body, d.link,
				d.payload, d.event_id, d.event_type, d.event_at, coalesce(d.entity_id::text, ''), d.attempts,
				c.kind, c.url_ref, c.secret_ref, to_char(c.quiet_start, 'HH24:MI'), to_char(c.quiet_end, 'HH24:MI'),
				c.timezone, c.enabled`, pick, lease)
		if err != nil {
			return err
		}
		got, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
			c := claimed{lease: lease}
			err := r.Scan(&c.id, &c.key, &c.channelID, &c.channel, &c.kind, &c.severity, &c.title, &c.body, &c.link,
				&c.payload, &c.event.ID, &c.event.Type, &c.event.At, &c.event.EntityID, &c.attempts,
				&c.channelKind, &c.urlRef, &c.secretRef, &c.quietStart, &c.quietEnd, &c.timezone, &c.enabled)
			return c, err
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("claim deliveries: %w", err)
	}
	for _, c := range got {
		w.mu.Lock()
		w.busy[c.channelID] = true
		w.mu.Unlock()
		started := w.life.Go("notify-send", func(ctx context.Context) {
			defer func() {
				w.mu.Lock()
				delete(w.busy, c.channelID)
				w.mu.Unlock()
				w.Wake()
			}()
			w.deliver(ctx, c)
		})
		if !started {
			// Stopping: the lease runs out and the delivery is due again.
			w.mu.Lock()
			delete(w.busy, c.channelID)
			w.mu.Unlock()
		}
	}
	return nil
}

// errLost is a claim another claimer took over after its lease ran out.
var errLost = errors.New("the delivery's lease ran out and another claimer has it")

// deliver makes one attempt at c, or suppresses or defers it.
func (w *Worker) deliver(ctx context.Context, c claimed) {
	log := w.o.Logger.With().Str("delivery", c.id).Str("channel", c.channel).Str("kind", c.kind).Logger()
	// What is written after the attempt must be written even when the api is stopping: an
	// attempt that was made and not recorded would be made again.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	now := w.o.Now()
	if !c.enabled {
		w.settle(wctx, log, c, "the channel is disabled")
		return
	}
	if reason, err := w.silenced(wctx, c, now); err != nil {
		log.Warn().Err(err).Msg("notifications: could not read the incident's mute; sending")
	} else if reason != "" {
		w.settle(wctx, log, c, reason)
		return
	}
	if c.quietStart != nil && c.quietEnd != nil {
		if q, err := ParseQuiet(*c.quietStart, *c.quietEnd, c.timezone); err == nil {
			if end, in := q.Until(now); in {
				// Nothing is dropped: it is sent when the window ends.
				if w.guarded(wctx, log, c, `UPDATE notification_deliveries SET next_attempt_at = $3 WHERE `+leased, end) {
					w.observe(c, ResultDeferred, 0, "")
				}
				return
			}
		}
	}
	target, err := resolveTarget(wctx, w.o.Pool, w.o.Secrets, c.channelKind, c.urlRef, c.secretRef)
	start := time.Now()
	code := 0
	if err == nil {
		code, err = w.o.Sender.Send(ctx, target, Message{ID: c.key, Kind: c.kind, Severity: c.severity, Title: c.title,
			Body: c.body, Link: c.link, Event: c.event, Payload: c.payload})
	}
	elapsed := time.Since(start)
	if err != nil && ctx.Err() != nil {
		// Stopped mid-send: due again at once, at the next start, without an attempt counted.
		if w.guarded(wctx, log, c, `UPDATE notification_deliveries SET next_attempt_at = $3 WHERE `+leased, now) {
			w.observe(c, ResultReleased, 0, "")
		}
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	w.attempts.WithLabelValues(c.channelKind, outcome).Observe(elapsed.Seconds())
	msg := clip(RedactError(err, target.URL, target.Secret))
	result, err := w.record(wctx, c, code, msg, elapsed)
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
		log.Warn().Str("error", msg).Int("attempt", c.attempts+1).Str("result", result).Msg("notification not delivered")
	}
	w.observe(c, result, c.attempts+1, msg)
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

// leased is the condition of every write after a claim: the delivery is still pending and
// still ours ($1 its id, $2 the lease).
const leased = `id = $1 AND status = 'pending' AND next_attempt_at = $2`

// guarded runs one leased update ($3 onward are args) and reports whether it applied.
func (w *Worker) guarded(ctx context.Context, log zerolog.Logger, c claimed, sql string, args ...any) bool {
	tag, err := w.o.Pool.Exec(ctx, sql, append([]any{c.id, c.lease}, args...)...)
	if err == nil && tag.RowsAffected() == 0 {
		err = errLost
	}
	if err != nil {
		log.Warn().Err(err).Msg("notifications: could not update a delivery")
		return false
	}
	return true
}

// settle suppresses a delivery: recorded with its reason, never sent.
func (w *Worker) settle(ctx context.Context, log zerolog.Logger, c claimed, reason string) {
	if w.guarded(ctx, log, c, `UPDATE notification_deliveries SET status = 'suppressed', last_error = $3 WHERE `+leased, reason) {
		w.observe(c, ResultSuppressed, 0, reason)
	}
}

// silenced says why an incident's notification is not to be sent, or "": the incident (its
// signal) is muted, or resolved while a mute still ran (an operator who muted it does not
// want to hear about it), or acknowledged and this is only an update. The incident itself
// is never touched.
func (w *Worker) silenced(ctx context.Context, c claimed, now time.Time) (string, error) {
	if !strings.HasPrefix(c.kind, "incident.") {
		return "", nil
	}
	var p struct {
		IncidentID string `json:"incident_id"`
	}
	if json.Unmarshal(c.payload, &p) != nil || !ids.IsUUID(p.IncidentID) {
		return "", nil
	}
	var status string
	var until *time.Time
	err := w.o.Pool.QueryRow(ctx, `SELECT status, muted_until FROM signals WHERE id = $1::uuid`, p.IncidentID).Scan(&status, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	switch {
	case until != nil && until.After(now) && (status == "muted" || status == "resolved"):
		return "the incident is muted until " + until.UTC().Format(time.RFC3339), nil
	case status == "acknowledged" && c.kind == KindIncidentUpdated:
		return "the incident is acknowledged", nil
	}
	return "", nil
}

// record writes an attempt and its consequences in one transaction: the delivery sent, due
// again after the next back-off, or failed; the channel's last success or error; its failing
// signal raised (after the last attempt) or resolved (on a success).
func (w *Worker) record(ctx context.Context, c claimed, code int, errMsg string, elapsed time.Duration) (string, error) {
	now := w.o.Now()
	attempts := c.attempts + 1
	ok := errMsg == ""
	result := ResultFailed
	switch {
	case ok:
		result = ResultSent
	case attempts <= len(w.o.Retry):
		result = ResultRetry
	}
	err := pg.InTx(ctx, w.o.Pool, func(tx pgx.Tx) error {
		var tag interface{ RowsAffected() int64 }
		var err error
		switch result {
		case ResultSent:
			tag, err = tx.Exec(ctx, `UPDATE notification_deliveries SET status = 'sent', attempts = $3, sent_at = $4,
				last_error = NULL WHERE `+leased, c.id, c.lease, attempts, now)
		case ResultRetry:
			tag, err = tx.Exec(ctx, `UPDATE notification_deliveries SET attempts = $3, next_attempt_at = $4, last_error = $5
				WHERE `+leased, c.id, c.lease, attempts, now.Add(w.o.Retry[attempts-1]), errMsg)
		default:
			tag, err = tx.Exec(ctx, `UPDATE notification_deliveries SET status = 'failed', attempts = $3, last_error = $4
				WHERE `+leased, c.id, c.lease, attempts, errMsg)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errLost
		}
		var status *int
		var errText *string
		if code != 0 {
			status = &code
		}
		if !ok {
			errText = &errMsg
		}
		if _, err := tx.Exec(ctx, `INSERT INTO notification_attempts (delivery_id, at, ok, status_code, error, duration_ms)
			VALUES ($1, $2, $3, $4, $5, $6)`, c.id, now, ok, status, errText, elapsed.Milliseconds()); err != nil {
			return err
		}
		if ok {
			if _, err := tx.Exec(ctx, `UPDATE notification_channels SET last_ok_at = $2, last_error = NULL WHERE id = $1`,
				c.channelID, now); err != nil {
				return err
			}
			_, err := w.signals.Resolve(ctx, tx, FailingKey(c.channelID), "a delivery to the channel succeeded")
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE notification_channels SET last_error = $2 WHERE id = $1`, c.channelID, errMsg); err != nil {
			return err
		}
		if attempts <= len(w.o.Retry) {
			return nil
		}
		_, err = w.signals.Raise(ctx, tx, signals.Signal{
			Kind: SignalFailing, DedupKey: FailingKey(c.channelID), Severity: signals.SeverityWarning,
			Summary: fmt.Sprintf("notification channel %s is failing: %s", c.channel, errMsg),
			Details: map[string]any{"channel_id": c.channelID, "channel": c.channel, "delivery_id": c.id,
				"kind": c.kind, "attempts": attempts, "error": errMsg},
		})
		return err
	})
	return result, err
}

// resolveTarget resolves a channel's references for one send.
func resolveTarget(ctx context.Context, q pg.Querier, s Secrets, kind, urlRef string, secretRef *string) (Target, error) {
	t := Target{Kind: kind}
	u, err := s.Resolve(ctx, q, urlRef)
	if err != nil {
		return t, err
	}
	t.URL = u
	if secretRef != nil {
		if t.Secret, err = s.Resolve(ctx, q, *secretRef); err != nil {
			return t, err
		}
	}
	if kind == ChannelWebhook && t.Secret == "" {
		return t, errors.New("the webhook has no signing secret")
	}
	return t, nil
}
