package ratelimit

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time                  { return c.t }
func (c *clock) advance(d time.Duration)         { c.t = c.t.Add(d) }
func newClock() *clock                           { return &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }
func limiter(r Rate, max int, c *clock) *Limiter { return New(r, max).WithClock(c.now) }

// TestBucket: a burst of N, then one attempt every Per/N, with the wait said in whole seconds.
func TestBucket(t *testing.T) {
	c := newClock()
	l := limiter(Rate{N: 3, Per: time.Minute}, 0, c)
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("attempt %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait != 20*time.Second {
		t.Fatalf("4th attempt: ok=%v wait=%s, want refused for 20s", ok, wait)
	}
	// Another key has its own bucket.
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key was refused")
	}
	c.advance(15 * time.Second)
	if ok, wait := l.Allow("a"); ok || wait != 5*time.Second {
		t.Fatalf("after 15s: ok=%v wait=%s, want refused for 5s", ok, wait)
	}
	c.advance(5 * time.Second)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("after 20s one attempt is allowed again")
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("only one attempt refilled")
	}
	// A refused attempt takes nothing: waiting the said time is enough.
	c.advance(19*time.Second + 100*time.Millisecond)
	if ok, wait := l.Allow("a"); ok || wait != time.Second {
		t.Fatalf("0.9s short: ok=%v wait=%s, want refused for 1s (rounded up)", ok, wait)
	}
	c.advance(time.Second)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("the said wait was not enough")
	}
	// An idle hour refills to the burst, not beyond it.
	c.advance(time.Hour)
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("attempt %d after an idle hour refused", i+1)
		}
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("an idle hour filled the bucket beyond N")
	}
}

// TestBoundedMemory: the table never holds more than MaxKeys buckets; full buckets are
// dropped to make room, and past that, new keys share one overflow bucket, while a known
// key keeps its own (a flood of new addresses resets nobody).
func TestBoundedMemory(t *testing.T) {
	c := newClock()
	l := limiter(Rate{N: 2, Per: time.Minute}, 3, c)
	for _, k := range []string{"a", "b", "c"} {
		l.Allow(k)
		l.Allow(k)
	}
	if l.Len() != 3 {
		t.Fatalf("%d keys, want 3", l.Len())
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("a's bucket is empty")
	}
	// The table is full of empty buckets: new keys share the overflow bucket (N attempts in all).
	if ok, _ := l.Allow("x"); !ok {
		t.Fatal("the first new key past the bound was refused")
	}
	if ok, _ := l.Allow("y"); !ok {
		t.Fatal("the second new key past the bound was refused")
	}
	if ok, _ := l.Allow("z"); ok {
		t.Fatal("new keys past the bound got more than one bucket's worth")
	}
	if l.Len() != 3 {
		t.Fatalf("%d keys after the flood, want 3", l.Len())
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("the flood reset a known key's bucket")
	}
	// Once buckets have refilled completely, they make room for new keys.
	c.advance(time.Minute)
	if ok, _ := l.Allow("w"); !ok {
		t.Fatal("a new key after the others refilled was refused")
	}
	if l.Len() != 1 {
		t.Fatalf("%d keys after the sweep, want 1 (the full buckets dropped, w added)", l.Len())
	}
	// Ten thousand addresses leave at most MaxKeys buckets.
	for i := 0; i < 10000; i++ {
		l.Allow(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String())
	}
	if l.Len() > 3 {
		t.Fatalf("%d keys, want at most 3", l.Len())
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]Rate{
		"10/1m": {10, time.Minute}, " 30 / 1h ": {30, time.Hour}, "5/30s": {5, 30 * time.Second}, "100/1d": {100, 24 * time.Hour},
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"10": "N/DURATION", "0/1m": "at least 1", "x/1m": "whole number", "10/soon": "soon", "10/-1m": "10/-1m", "": "N/DURATION",
	} {
		if _, err := ParseRate(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseRate(%q): %v, want an error mentioning %q", in, err, wantErr)
		}
	}
}

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"::ffff:192.0.2.7":     "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":      "2001:db8:1:3::/64",
		"fe80::1%eth0":         "fe80::/64",
	} {
		if got := AddrKey(netip.MustParseAddr(in)); got != want {
			t.Errorf("AddrKey(%s) = %s, want %s", in, got, want)
		}
	}
	if got := AddrKey(netip.Addr{}); got != "unknown" {
		t.Errorf("AddrKey(invalid) = %s", got)
	}
}

func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Minute: "1m", time.Hour: "1h", 90 * time.Second: "1m30s", 20 * time.Second: "20s",
		36 * time.Hour: "36h", time.Hour + time.Minute: "1h1m"} {
		if got := Short(d); got != want {
			t.Errorf("Short(%s) = %s, want %s", d, got, want)
		}
	}
	if s := (Rate{N: 10, Per: time.Minute}).String(); s != "10/1m" {
		t.Errorf("Rate.String = %s", s)
	}
}
