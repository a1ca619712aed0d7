// Package ratelimit is a token bucket per key (the dashboard's sign-in keys it by client
// address), in bounded memory.
//
// Each key has a bucket of Rate.N attempts that refills evenly, N per Rate.Per: a burst of N
// is allowed, then one attempt every Per/N. The table holds at most MaxKeys buckets. A bucket
// that has refilled completely carries no information (a new one would be the same), so when
// the table is full those are dropped first; if it is still full, every key not in it shares
// one overflow bucket. That keeps memory bounded under a flood of fresh addresses without
// giving any of them a clean slate, and without resetting a known address's bucket.
package ratelimit

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oikos-hq/oikos/shared/duration"
)

// Rate is N attempts per Per.
type Rate struct {
	N   int
	Per time.Duration
}

// String is the rate as ParseRate reads it ("10/1m").
func (r Rate) String() string { return fmt.Sprintf("%d/%s", r.N, Short(r.Per)) }

// Short writes d without the zero units time.Duration's String ends with ("1m", not "1m0s").
func Short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ParseRate reads "N/DURATION" (10/1m, 30/1h, 5/30s): N at least 1, DURATION as
// shared/duration reads it, positive.
func ParseRate(s string) (Rate, error) {
	n, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("%q is not N/DURATION (e.g. 10/1m)", s)
	}
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || count < 1 {
		return Rate{}, fmt.Errorf("%q: the count must be a whole number of at least 1 (e.g. 10/1m)", s)
	}
	d, err := duration.Parse(strings.TrimSpace(per))
	if err != nil {
		return Rate{}, fmt.Errorf("%q: %w", s, err)
	}
	if d <= 0 {
		return Rate{}, fmt.Errorf("%q: the period must be positive", s)
	}
	return Rate{N: count, Per: d}, nil
}

// DefaultMaxKeys bounds a Limiter's table when New is given none: 4096 buckets of a few
// dozen bytes each.
const DefaultMaxKeys = 4096

type bucket struct {
	tokens float64
	at     time.Time
}

// Limiter is a token bucket per key. Safe for concurrent use.
type Limiter struct {
	rate     Rate
	maxKeys  int
	mu       sync.Mutex
	buckets  map[string]*bucket
	overflow bucket
	swept    time.Time
	now      func() time.Time
}

// New returns a limiter allowing r per key, over at most maxKeys keys (<= 0:
// DefaultMaxKeys). A rate with N < 1 or Per <= 0 is a programming error: callers parse it
// with ParseRate.
func New(r Rate, maxKeys int) *Limiter {
	if r.N < 1 || r.Per <= 0 {
		panic(fmt.Sprintf("ratelimit: invalid rate %s", r))
	}
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Limiter{rate: r, maxKeys: maxKeys, buckets: map[string]*bucket{}, now: time.Now,
		overflow: bucket{tokens: float64(r.N)}}
}

// WithClock makes the limiter read time from now (tests).
func (l *Limiter) WithClock(now func() time.Time) *Limiter {
	l.now = now
	return l
}

// Rate is the limiter's rate.
func (l *Limiter) Rate() Rate { return l.rate }

// Len is how many keys the table holds now.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// Allow takes one attempt from key's bucket. When the bucket is empty it takes nothing and
// says how long until the next attempt is allowed (at least a second, rounded up to whole
// seconds, as Retry-After speaks).
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.maxKeys {
			l.sweep(now)
		}
		if len(l.buckets) < l.maxKeys {
			b = &bucket{tokens: float64(l.rate.N), at: now}
			l.buckets[key] = b
		} else {
			b = &l.overflow
		}
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) * float64(l.rate.Per) / float64(l.rate.N))
	secs := math.Ceil(wait.Seconds())
	if secs < 1 {
		secs = 1
	}
	return false, time.Duration(secs) * time.Second
}

func (l *Limiter) refill(b *bucket, now time.Time) {
	if el := now.Sub(b.at); el > 0 {
		b.tokens = math.Min(float64(l.rate.N), b.tokens+el.Seconds()*float64(l.rate.N)/l.rate.Per.Seconds())
	}
	b.at = now
}

// sweep drops the buckets that have refilled completely. It runs at most once a second, so a
// flood of new keys against a full table of busy ones costs one pass a second, not one a
// request.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Second {
		return
	}
	l.swept = now
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= float64(l.rate.N) {
			delete(l.buckets, k)
		}
	}
}

// AddrKey is the key of a client address: an IPv4 address itself, an IPv6 address its /64
// (one machine is commonly given a whole /64, so its addresses are one client). An invalid
// address is one key of its own, "unknown".
func AddrKey(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "unknown"
	case a.Is4():
		return a.String()
	default:
		p, _ := a.Prefix(64)
		return p.String()
	}
}
