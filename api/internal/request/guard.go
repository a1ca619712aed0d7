package request

import (
	"context"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

// ctxPrincipal is the one context key of the verified principal, whichever guard set it, so
// a route guarded twice (a mounted group, then the route) looks the token up once.
const ctxPrincipal = "oikos.principal"

// ctxViaCookie marks a request admitted by the dashboard's session cookie.
const ctxViaCookie = "oikos.via_cookie"

// SessionCookie is the dashboard session's cookie (api/internal/websession sets it).
const SessionCookie = "oikos_session"

// Public is the permission of a route that needs no credential (the dashboard's sign-in):
// Mount adds no guard to it. A route's zero Perm is not public: Can refuses it.
const Public auth.Permission = "public"

// Verifier says whom a bearer token stands for; *auth.Store is the api's.
type Verifier interface {
	Verify(ctx context.Context, token string) (auth.Principal, error)
}

// SessionVerifier says whom a dashboard session cookie's secret stands for. A Verifier that
// is one too admits requests that carry the cookie and no Authorization header.
type SessionVerifier interface {
	VerifySession(ctx context.Context, secret string) (auth.Principal, error)
}

// Guard is a middleware that admits a request only with a valid bearer token whose role has
// perm. It returns auth.ErrUnauthenticated, auth.Forbidden's error (it wraps
// auth.ErrForbidden and says why the role is refused) or the verifier's own failure, for
// whoever renders errors to answer 401, 403 or 500, and puts the principal on the context
// (Principal). A request a guard already admitted is only
// checked for perm, without a second token lookup.
func Guard(v Verifier, perm auth.Permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, ok := Principal(c)
			if !ok {
				var err error
				if p, err = authenticate(c, v); err != nil {
					return err
				}
			}
			if !p.Role.Can(perm) {
				return auth.Forbidden(p.Role, perm)
			}
			c.Set(ctxPrincipal, p)
			return next(c)
		}
	}
}

// authenticate finds who the request stands for: its bearer token, or else (when v can
// check sessions) its session cookie. A cookie-authenticated request that changes something
// must come from the api's own origin (SameOrigin): a cookie rides along with requests any
// page starts, a bearer token only with those a client chose to send.
func authenticate(c echo.Context, v Verifier) (auth.Principal, error) {
	req := c.Request()
	if h := req.Header.Get(echo.HeaderAuthorization); h != "" {
		tok, ok := cutBearer(h)
		if !ok {
			return auth.Principal{}, auth.ErrUnauthenticated
		}
		return v.Verify(req.Context(), tok)
	}
	sv, ok := v.(SessionVerifier)
	if !ok {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	ck, err := req.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	p, err := sv.VerifySession(req.Context(), ck.Value)
	if err != nil {
		return auth.Principal{}, err
	}
	if err := SameOrigin(req); err != nil {
		return auth.Principal{}, err
	}
	c.Set(ctxViaCookie, true)
	return p, nil
}

// ViaCookie reports whether the request was admitted by the session cookie.
func ViaCookie(c echo.Context) bool {
	v, _ := c.Get(ctxViaCookie).(bool)
	return v
}

// Principal is who the request's token stands for; ok is false before a guard admitted it.
func Principal(c echo.Context) (p auth.Principal, ok bool) {
	p, ok = c.Get(ctxPrincipal).(auth.Principal)
	return p, ok
}

// cutBearer returns the token of an Authorization header of the Bearer scheme (the scheme's
// name is case-insensitive, RFC 9110).
func cutBearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}
