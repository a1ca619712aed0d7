package pg

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
)

// DefaultConnectTimeout bounds a connection attempt when the database URL names none
// (connect_timeout): a database host that drops packets instead of refusing them would
// otherwise hold every request that needs a new connection for the kernel's TCP timeout, and
// the api must answer 503 quickly while the database is away, not hang.
const DefaultConnectTimeout = 3 * time.Second

// IsUnavailable reports whether err says the database cannot be reached or is going away
// (refused or reset connections, a server shutting down or starting up, a connection lost
// mid-statement), as opposed to an error of the statement itself. Callers answer such an
// error as "try again later" (the api's 503) and never as a failure of what was asked.
//
// Only the driver's errors count: a network failure is the database's when pgx raised it
// (a connect error, a server's connection-class SQLSTATE, or one of pgconn's I/O errors,
// which all carry SafeToRetry). The same refused or reset connection to another peer (the
// agent behind the api, a webhook, an SSH host) says nothing about the database, and the
// api must not answer it as "database unavailable".
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		// A caller that gave up (a client that went away) says nothing about the database.
		return false
	}
	var te *timeoutError
	if errors.As(err, &te) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-03: admin/crash shutdown, cannot connect now.
		return len(pe.Code) == 5 && (pe.Code[:2] == "08" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03")
	}
	if errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	// pgconn wraps a failed read or write of its connection in an error that says whether
	// a retry is safe; nothing else in Oikos has that method.
	var driver interface{ SafeToRetry() bool }
	if !errors.As(err, &driver) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne *net.OpError
	return errors.As(err, &ne)
}

// Availability is what a daemon knows of its database's reachability: since when it has
// been unreachable and the last error that said so. It learns passively, from the pool's own
// connection attempts and statements (Tracer) and from whoever calls Observe (the health
// endpoint's ping), so it costs nothing while the database answers: the /healthz of every
// daemon reads it to say why it is unhealthy.
type Availability struct {
	log  zerolog.Logger
	down atomic.Bool

	mu      sync.Mutex
	since   time.Time
	lastErr string
	// upAt is when the database last became reachable again after an outage (zero: never
	// lost), and outage how long that outage lasted, for the logs and /healthz.
	upAt   time.Time
	outage time.Duration
}

// NewAvailability returns an Availability that starts out reachable.
func NewAvailability(log zerolog.Logger) *Availability { return &Availability{log: log} }

// AvailabilityState is a snapshot of Availability, as /healthz reports it.
type AvailabilityState struct {
	Reachable bool `json:"reachable"`
	// UnreachableSince is when the current outage began (nil while reachable).
	UnreachableSince *time.Time `json:"unreachable_since,omitempty"`
	// LastError is the error that last said the database was unreachable.
	LastError string `json:"last_error,omitempty"`
	// RecoveredAt and LastOutageSeconds describe the last outage once it is over.
	RecoveredAt       *time.Time `json:"recovered_at,omitempty"`
	LastOutageSeconds float64    `json:"last_outage_seconds,omitempty"`
}

// Observe records the outcome of talking to the database: nil means it answered; an error
// IsUnavailable accepts means it did not. Any other error says nothing about reachability.
func (a *Availability) Observe(err error) {
	if err == nil {
		if !a.down.Load() {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.down.Load() {
			return
		}
		now := time.Now()
		a.upAt, a.outage = now, now.Sub(a.since)
		a.down.Store(false)
		a.log.Info().Dur("outage", a.outage).Time("unreachable_since", a.since).Msg("database reachable again")
		return
	}
	if !IsUnavailable(err) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErr = err.Error()
	if a.down.Load() {
		return
	}
	a.since = time.Now()
	a.down.Store(true)
	a.log.Warn().Err(err).Msg("database unreachable; answering 503 and retrying until it is back")
}

// Reachable reports whether the database answered the last time anything asked.
func (a *Availability) Reachable() bool { return !a.down.Load() }

// State is a snapshot for /healthz.
func (a *Availability) State() AvailabilityState {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := AvailabilityState{Reachable: !a.down.Load()}
	if !s.Reachable {
		since := a.since
		s.UnreachableSince, s.LastError = &since, a.lastErr
	} else if !a.upAt.IsZero() {
		up := a.upAt
		s.RecoveredAt, s.LastOutageSeconds = &up, a.outage.Seconds()
	}
	return s
}

// Ping pings db with timeout and records the outcome; it returns the ping's error.
func (a *Availability) Ping(ctx context.Context, db interface{ Ping(context.Context) error }, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := db.Ping(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		// A ping that got no answer in time is an unreachable database as far as a client
		// waiting on it can tell.
		err = &timeoutError{err}
	}
	a.Observe(err)
	return err
}

type timeoutError struct{ err error }

func (e *timeoutError) Error() string { return "no answer in time: " + e.err.Error() }
func (e *timeoutError) Unwrap() error { return e.err }

// Tracer is the pgx tracer that feeds a: every connection attempt's outcome and every
// statement that failed because the connection did. Connect and ConnectWith install it.
func (a *Availability) Tracer() pgx.QueryTracer { return tracer{a} }

type tracer struct{ a *Availability }

func (t tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (t tracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	// A statement that ran proves the database is back; one that failed on its connection
	// proves it is gone. A statement's own error (a constraint, a syntax error) is neither.
	if d.Err == nil || IsUnavailable(d.Err) {
		t.a.Observe(d.Err)
	}
}

func (t tracer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return ctx
}

func (t tracer) TraceConnectEnd(_ context.Context, d pgx.TraceConnectEndData) {
	t.a.Observe(d.Err)
}
