package websession

import (
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/ratelimit"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// DefaultSignInRate is OIKOS_SIGNIN_RATE's default: a burst of 10 sign-in attempts per
// client address, then one every 6 s. An operator signs in a few times a day; a script
// guessing tokens gets 14,400 guesses a day per address against a 2^190 token space.
var DefaultSignInRate = ratelimit.Rate{N: 10, Per: time.Minute}

// WithSignInLimit makes the store refuse sign-in attempts beyond l's rate per client address
// (request.ClientAddr: the peer, or what a trusted proxy says) with a 429 and Retry-After.
// Without it sign-ins are not limited (the package's own tests).
func (s *Store) WithSignInLimit(l *ratelimit.Limiter) *Store {
	s.limit = l
	return s
}

func (s *Store) admitAttempt(c echo.Context) error {
	if s.limit == nil {
		return nil
	}
	addr := request.ClientAddr(c.Request())
	ok, wait := s.limit.Allow(ratelimit.AddrKey(addr))
	if ok {
		return nil
	}
	secs := int(wait / time.Second)
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	r := s.limit.Rate()
	return request.Errorf(http.StatusTooManyRequests, "rate-limited", "",
		"too many sign-in attempts from %s: at most %d per %s; try again in %s", addrText(addr), r.N, ratelimit.Short(r.Per),
		ratelimit.Short(time.Duration(secs)*time.Second))
}

func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return "this address"
	}
	return a.String()
}
