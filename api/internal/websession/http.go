package websession

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// Verifier is what the api's guard checks credentials with: bearer tokens through the token
// store, session cookies through this store (request.SessionVerifier).
type Verifier struct {
	Tokens   *auth.Store
	Sessions *Store
}

// Verify checks a bearer token.
func (v Verifier) Verify(ctx context.Context, token string) (auth.Principal, error) {
	return v.Tokens.Verify(ctx, token)
}

// VerifySession checks a session cookie's secret.
func (v Verifier) VerifySession(ctx context.Context, secret string) (auth.Principal, error) {
	if v.Sessions == nil {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	s, err := v.Sessions.Verify(ctx, secret)
	return s.Principal, err
}

// view is the body of GET and POST /api/v1/session (WebSession in api/openapi.yaml).
type view struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// Routes are the sign-in endpoints, mounted with the api's other routes.
func (s *Store) Routes() []request.Route {
	return []request.Route{
		request.POST("/session", request.Public, s.signIn),
		request.GET("/session", auth.PermRead, s.current),
		request.DELETE("/session", request.Public, s.signOut),
	}
}

func meta(c echo.Context) Meta {
	r := c.Request()
	return Meta{Method: r.Method, Path: r.URL.Path, CorrelationID: request.CorrelationID(c), UserAgent: r.UserAgent()}
}

func (s *Store) cookie(c echo.Context, value string, expires time.Time) {
	ck := &http.Cookie{Name: request.SessionCookie, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: request.OverTLS(c.Request())}
	if value == "" {
		ck.MaxAge = -1
	} else {
		ck.Expires = expires
		ck.MaxAge = int(time.Until(expires).Seconds())
	}
	c.SetCookie(ck)
}

func (s *Store) signIn(c echo.Context) error {
	// Every attempt counts, the refused ones first among them: the limit is what keeps a
	// script from guessing tokens at the speed of the network.
	if err := s.admitAttempt(c); err != nil {
		return err
	}
	// A sign-in from a foreign page would plant the attacker's session in the victim's
	// browser (login CSRF); only the dashboard's own page may sign in.
	if err := request.SameOrigin(c.Request()); err != nil {
		return err
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := request.DecodeJSON(c, &body); err != nil {
		return err
	}
	tok := strings.TrimSpace(body.Token)
	if tok == "" {
		return request.Unprocessable("token", "paste an api token (oik_...); `oikos token create` makes one")
	}
	secret, sess, err := s.Start(c.Request().Context(), tok, meta(c))
	if err != nil {
		return err
	}
	s.cookie(c, secret, sess.ExpiresAt)
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusOK, view{Name: sess.Principal.Name, Role: string(sess.Principal.Role), ExpiresAt: &sess.ExpiresAt})
}

func (s *Store) current(c echo.Context) error {
	p, _ := request.Principal(c)
	v := view{Name: p.Name, Role: string(p.Role)}
	if request.ViaCookie(c) {
		ck, err := c.Cookie(request.SessionCookie)
		if err != nil {
			return auth.ErrUnauthenticated
		}
		sess, err := s.Verify(c.Request().Context(), ck.Value)
		if err != nil {
			return err
		}
		v.ExpiresAt = &sess.ExpiresAt
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusOK, v)
}

func (s *Store) signOut(c echo.Context) error {
	ck, err := c.Cookie(request.SessionCookie)
	if err == nil && ck.Value != "" {
		if err := request.SameOrigin(c.Request()); err != nil {
			return err
		}
		if err := s.End(c.Request().Context(), ck.Value, meta(c)); err != nil {
			return err
		}
	}
	s.cookie(c, "", time.Time{})
	return c.NoContent(http.StatusNoContent)
}
