package request

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

// Site is what the api knows of how browsers reach it, for the decisions that depend on the
// network in front of it: which client a request stands for (the sign-in's rate limit),
// which origin is its own (the session cookie's cross-origin check), and whether it came over
// TLS (the cookie's Secure flag).
//
// X-Forwarded-* headers are anyone's to write, so the api believes a header only where
// believing a lie cannot loosen anything, or from a peer the operator named a proxy:
//   - X-Forwarded-For (the client address) and X-Forwarded-Host (the host the browser asked
//     for) only from TrustedProxies (OIKOS_TRUSTED_PROXIES); without any, the client is
//     the connection's peer and the own host is the Host header;
//   - X-Forwarded-Proto: https from anyone, since all it does is make the cookie Secure and
//     require an https Origin: a client lying about it only makes its own answers stricter.
type Site struct {
	// TrustedProxies are the reverse proxies in front of the api (OIKOS_TRUSTED_PROXIES).
	TrustedProxies []netip.Prefix
	// PublicOrigin is OIKOS_PUBLIC_URL's origin (scheme://host[:port]): a page there is the
	// dashboard's own whatever Host header a proxy passes on.
	PublicOrigin string
}

type ctxSiteKey struct{}

// ParseProxies reads OIKOS_TRUSTED_PROXIES: addresses and CIDR prefixes, comma- or
// space-separated (10.0.0.5, 172.16.0.0/12, ::1).
func ParseProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR prefix", f)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or a CIDR prefix", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// OriginOf is the origin (scheme://host[:port], lower-cased, default port dropped) of an
// absolute URL, or "" when it has none.
func OriginOf(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	return scheme + "://" + hostOf(scheme, u.Host)
}

// hostOf lower-cases host and drops the scheme's default port, so "Atlas:443" over https
// and "atlas" compare equal.
func hostOf(scheme, host string) string {
	host = strings.ToLower(host)
	switch {
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		return strings.TrimSuffix(host, ":443")
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		return strings.TrimSuffix(host, ":80")
	}
	return host
}

// Middleware puts the site on every request's context, for SameOrigin, ClientAddr and
// OverTLS.
func (s *Site) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), ctxSiteKey{}, s)))
		return next(c)
	}
}

func siteOf(r *http.Request) *Site {
	if s, ok := r.Context().Value(ctxSiteKey{}).(*Site); ok && s != nil {
		return s
	}
	return &Site{}
}

func (s *Site) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func peerOf(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// fromProxy reports whether the request's peer is a trusted proxy.
func fromProxy(r *http.Request) bool {
	s := siteOf(r)
	return len(s.TrustedProxies) > 0 && s.trusted(peerOf(r))
}

// ClientAddr is the address of the client a request stands for: the connection's peer, or,
// when the peer is a trusted proxy, the nearest address in X-Forwarded-For that is not one
// (read from the right, since each proxy appends the peer it saw and only the part the
// trusted proxies appended is theirs). Invalid when the peer's address cannot be read.
func ClientAddr(r *http.Request) netip.Addr {
	peer := peerOf(r)
	s := siteOf(r)
	if !peer.IsValid() || !s.trusted(peer) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.Trim(strings.TrimSpace(hops[i]), "[]"))
		if err != nil {
			// A hop a trusted proxy wrote that is not an address: the last good one is
			// the nearest client known.
			return client
		}
		client = a.Unmap()
		if !s.trusted(client) {
			return client
		}
	}
	return client
}

// OverTLS reports whether the browser reached the api over TLS: directly, or through a proxy
// that says X-Forwarded-Proto: https (believed from anyone; see Site).
func OverTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	first, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(first), "https")
}

// ownOrigin reports whether origin (a browser's Origin, or a Referer's origin) is the api's
// own: OIKOS_PUBLIC_URL's origin, or the host the request was sent to (Host, or a trusted
// proxy's X-Forwarded-Host) over the scheme it came by (an http page may not change what is
// served over https; without TLS known, either scheme, since a proxy may terminate it
// without saying).
func ownOrigin(r *http.Request, origin string) bool {
	o := OriginOf(origin)
	if o == "" {
		return false
	}
	s := siteOf(r)
	if s.PublicOrigin != "" && o == s.PublicOrigin {
		return true
	}
	scheme, host, _ := strings.Cut(o, "://")
	if scheme != "https" && (scheme != "http" || OverTLS(r)) {
		return false
	}
	if host == hostOf(scheme, r.Host) {
		return true
	}
	if fh := r.Header.Get("X-Forwarded-Host"); fh != "" && fromProxy(r) {
		first, _, _ := strings.Cut(fh, ",")
		return host == hostOf(scheme, strings.TrimSpace(first))
	}
	return false
}

// ownOriginText names the api's own origin in a refusal.
func ownOriginText(r *http.Request) string {
	scheme := "http"
	if OverTLS(r) {
		scheme = "https"
	}
	own := scheme + "://" + strings.ToLower(r.Host)
	if p := siteOf(r).PublicOrigin; p != "" && p != own {
		own += " or " + p
	}
	return own
}

// ErrCrossOrigin is the refusal of a change made with the session cookie from a page that is
// not the dashboard's own (a 403 of problem type cross-origin). It is an auth.ErrForbidden.
var ErrCrossOrigin = fmt.Errorf("%w: cross-origin request", auth.ErrForbidden)

type crossOrigin struct{ detail string }

func (e crossOrigin) Error() string { return e.detail }
func (e crossOrigin) Is(target error) bool {
	return target == ErrCrossOrigin || target == auth.ErrForbidden
}

func refuseCrossOrigin(format string, args ...any) error {
	return crossOrigin{detail: "a change made with the session cookie must come from the dashboard's own page: " +
		fmt.Sprintf(format, args...)}
}

// SameOrigin admits a request that reads (GET, HEAD, OPTIONS), and a change only when it
// comes from the api's own origin, as the browser tells it, most trusted first:
//  1. Sec-Fetch-Site cross-site or same-site is refused (another site's page, or another
//     origin of this one: a page on another port of the same host is same-site, and its
//     requests carry a SameSite=Strict cookie, so only this check stops them);
//  2. an Origin must be the api's own (ownOrigin);
//  3. without one, Sec-Fetch-Site: same-origin is the browser vouching;
//  4. without either, the Referer's origin must be the api's own;
//  5. with none of them nothing shows where the request came from: refused.
//
// A refusal is ErrCrossOrigin, its detail naming the header and value that failed.
func SameOrigin(req *http.Request) error {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	sfs := strings.ToLower(strings.TrimSpace(req.Header.Get("Sec-Fetch-Site")))
	if sfs == "cross-site" || sfs == "same-site" {
		return refuseCrossOrigin("the browser sent it from another origin's page (Sec-Fetch-Site: %s)", sfs)
	}
	if origin := req.Header.Get("Origin"); origin != "" && origin != "null" {
		if ownOrigin(req, origin) {
			return nil
		}
		return refuseCrossOrigin("Origin %q is not %s", origin, ownOriginText(req))
	}
	if sfs == "same-origin" {
		return nil
	}
	if ref := req.Header.Get("Referer"); ref != "" {
		if ownOrigin(req, ref) {
			return nil
		}
		return refuseCrossOrigin("the request has no Origin, and its Referer %q is not a page of %s", OriginOf(ref), ownOriginText(req))
	}
	return refuseCrossOrigin("the request has no Origin, Sec-Fetch-Site or Referer to show where it came from")
}
