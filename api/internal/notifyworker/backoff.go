package notifyworker

import (
	"math/rand/v2"
	"net/http"
	"time"
)

// Backoff is the wait after a failed attempt when no explicit Retry schedule is set: Initial
// after the first failure, doubling after each further one up to Max, each wait spread by
// ±Jitter (a fraction) so that the deliveries of a target that comes back, and the channels
// of two apis, do not retry in lockstep; a delivery still failing GiveUpAfter after it was
// queued fails. There is no limit on attempts: a target that is down for ten minutes (or an
// hour) gets its backlog once it answers again, within Max of that.
type Backoff struct {
	Initial, Max time.Duration
	Jitter       float64
	GiveUpAfter  time.Duration
}

// DefaultBackoff: 5 s, 10 s, 20 s, ... capped at 5 min, ±20 %, giving up after a day.
var DefaultBackoff = Backoff{Initial: 5 * time.Second, Max: 5 * time.Minute, Jitter: 0.2, GiveUpAfter: 24 * time.Hour}

// withDefaults fills the zero members from DefaultBackoff (Jitter 0 stays 0: tests want
// exact waits; a negative one is taken as 0).
func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max <= 0 {
		b.Max = max(DefaultBackoff.Max, b.Initial)
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.GiveUpAfter <= 0 {
		b.GiveUpAfter = DefaultBackoff.GiveUpAfter
	}
	b.Jitter = min(max(b.Jitter, 0), 1)
	return b
}

// Delay is the wait after the failed attempt number attempt (1 for the first); r in [0, 1)
// draws the jitter. Never more than Max.
func (b Backoff) Delay(attempt int, r float64) time.Duration {
	d := b.Initial
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 {
		d = time.Duration(float64(d) * (1 - b.Jitter + 2*b.Jitter*r))
	}
	return min(d, b.Max)
}

// randFloat is the default jitter source.
func randFloat() float64 { return rand.Float64() }

// DefaultFailingAfter is how many attempts in a row must fail before a channel counts as
// failing (its signal, event and the notification to the other channels).
const DefaultFailingAfter = 5

// permanent reports whether an answer's status means the same request will never succeed,
// so it is not retried: a 4xx other than 408 (request timeout) and 429 (too many requests),
// which say "later". A 5xx, a timeout, a refused connection are retried.
func permanent(code int) bool {
	return code >= 400 && code <= 499 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}
