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

// Verifier says whom a bearer token stands for; *auth.Store is the api's.
type Verifier interface {
	Verify(ctx context.Context, token string) (auth.Principal, error)
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
				tok, ok := cutBearer(c.Request().Header.Get(echo.HeaderAuthorization))
				if !ok {
					return auth.ErrUnauthenticated
				}
				var err error
				if p, err = v.Verify(c.Request().Context(), tok); err != nil {
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
