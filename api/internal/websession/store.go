// Package websession is the dashboard's sign-in: an api token, pasted once, exchanged for an
// HttpOnly, SameSite=Strict session cookie, so the browser's fetch and EventSource calls carry
// no token in a URL or in script (D6).
//
// A session stands for the token it was opened with: it has that token's name and role, and
// it ends at its expiry, at sign-out, or when the token is revoked (checked on every request,
// like a bearer token). Only the SHA-256 of the cookie's secret is stored (web_sessions), so
// the table never holds a usable credential. Sign-in and sign-out are audited and emit
// session.signed_in / session.signed_out, each in its own transaction.
//
// A cookie rides along with any request the browser makes to the api, even one a foreign
// page started, so the guard (api/internal/request) admits a cookie-authenticated mutation
// only from the api's own origin; SameSite=Strict already keeps the cookie off cross-site
// requests in current browsers, and the Origin check covers the rest.
package websession

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/ratelimit"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/authstore"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// CookieName is the session cookie's name.
const CookieName = "oikos_session"

// DefaultTTL is how long a session lasts when OIKOS_SESSION_TTL does not say.
const DefaultTTL = 12 * time.Hour

// keepExpired is how long an ended session's row is kept (for the audit trail's sake the
// audit rows stay forever; the row itself is only a credential check).
const keepExpired = 7 * 24 * time.Hour

// Reason is why a cookie was not accepted. Each is an auth.ErrUnauthenticated (a 401), with a
// detail that tells the person in front of the dashboard what happened.
type Reason string

// The reasons a cookie fails.
const (
	ErrNoSession  Reason = "not signed in: no session cookie"
	ErrUnknown    Reason = "the session is not known (it may belong to another installation); sign in again"
	ErrExpired    Reason = "the session expired; sign in again"
	ErrSignedOut  Reason = "the session was signed out; sign in again"
	ErrRevokedKey Reason = "the token this session was opened with was revoked; sign in with another token"
)

func (r Reason) Error() string { return string(r) }

// Is makes every Reason an auth.ErrUnauthenticated, so the api answers 401.
func (r Reason) Is(target error) bool { return target == auth.ErrUnauthenticated }

// Session is one signed-in session.
type Session struct {
	ID        string
	Principal auth.Principal
	ExpiresAt time.Time
}

// Store opens, checks and ends sessions.
type Store struct {
	db     *authstore.Store
	tokens *auth.Store
	ttl    time.Duration
	now    func() time.Time
	// limit bounds sign-in attempts per client address (WithSignInLimit); nil: none.
	limit *ratelimit.Limiter
}

// New returns a store; ttl <= 0 means DefaultTTL.
func New(pool *storage.Pool, tokens *auth.Store, ttl time.Duration) *Store {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Store{db: authstore.New(pool), tokens: tokens, ttl: ttl, now: time.Now}
}

// TTL is how long a new session lasts.
func (s *Store) TTL() time.Duration { return s.ttl }

// Meta is who asks, for the audit row: the request's method, path, correlation id and user
// agent.
type Meta struct {
	Method, Path, CorrelationID, UserAgent string
}

// Start verifies token and opens a session for it. It returns the cookie's secret (shown to
// the browser once, never stored) and the session. A token Verify refuses is
// auth.ErrUnauthenticated.
func (s *Store) Start(ctx context.Context, token string, m Meta) (string, Session, error) {
	tokenID, p, err := s.tokens.Identify(ctx, token)
	if err != nil {
		return "", Session{}, err
	}
	secret, err := newSecret()
	if err != nil {
		return "", Session{}, err
	}
	ua := m.UserAgent
	if len(ua) > 300 {
		ua = ua[:300]
	}
	sess := Session{Principal: p, ExpiresAt: s.now().Add(s.ttl).UTC().Truncate(time.Microsecond)}
	err = s.db.InTx(ctx, func(tx *authstore.Store) error {
		// Rows of sessions long over are dropped here rather than by a sweep of their own:
		// sign-ins are rare and the delete is an index range.
		if err := tx.DropSessionsBefore(ctx, s.now().Add(-keepExpired)); err != nil {
			return fmt.Errorf("drop old sessions: %w", err)
		}
		var err error
		if sess.ID, err = tx.InsertSession(ctx, hash(secret), tokenID, sess.ExpiresAt, ua); err != nil {
			return fmt.Errorf("open session: %w", err)
		}
		return record(ctx, tx, p.Name, "session.create", "session.signed_in", m, sess)
	})
	if err != nil {
		return "", Session{}, err
	}
	return secret, sess, nil
}

// Verify returns the session a cookie's secret stands for, or a Reason.
func (s *Store) Verify(ctx context.Context, secret string) (Session, error) {
	if secret == "" {
		return Session{}, ErrNoSession
	}
	if len(secret) > 128 {
		return Session{}, ErrUnknown
	}
	row, err := s.db.SessionBySecret(ctx, hash(secret))
	sess := Session{ID: row.ID, ExpiresAt: row.ExpiresAt}
	name, role, signedOut, tokenRevoked := row.TokenName, row.TokenRole, row.SignedOut, row.TokenRevoked
	switch {
	case errors.Is(err, authstore.ErrNotFound):
		return Session{}, ErrUnknown
	case err != nil:
		return Session{}, fmt.Errorf("verify session: %w", err)
	case signedOut:
		return Session{}, ErrSignedOut
	case tokenRevoked:
		return Session{}, ErrRevokedKey
	case !s.now().Before(sess.ExpiresAt):
		return Session{}, ErrExpired
	}
	sess.Principal = auth.Principal{Name: name, Role: auth.Role(role)}
	return sess, nil
}

// End signs a session out: the row is revoked, so a copy of the cookie is dead too. A secret
// that names no live session ends nothing and is no error (a stale tab may always sign out).
func (s *Store) End(ctx context.Context, secret string, m Meta) error {
	if secret == "" || len(secret) > 128 {
		return nil
	}
	return s.db.InTx(ctx, func(tx *authstore.Store) error {
		row, err := tx.EndSession(ctx, hash(secret))
		if errors.Is(err, authstore.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("end session: %w", err)
		}
		sess := Session{ID: row.ID, ExpiresAt: row.ExpiresAt}
		return record(ctx, tx, row.TokenName, "session.revoke", "session.signed_out", m, sess)
	})
}

// payload is what the audit row and the event say of a session: never its secret.
type payload struct {
	SessionID string    `json:"session_id"`
	ExpiresAt time.Time `json:"expires_at"`
	UserAgent string    `json:"user_agent,omitempty"`
}

func record(ctx context.Context, tx *authstore.Store, actor, action, event string, m Meta, sess Session) error {
	p := payload{SessionID: sess.ID, ExpiresAt: sess.ExpiresAt, UserAgent: m.UserAgent}
	if err := storage.WriteAudit(ctx, tx.DB(), audit.Row{Actor: actor, Action: action, Method: m.Method, Path: m.Path,
		CorrelationID: m.CorrelationID, After: p}); err != nil {
		return err
	}
	if _, err := storage.AppendEvent(ctx, tx.DB(), eventbus.Event{Type: event, CorrelationID: m.CorrelationID, Actor: actor}, p); err != nil {
		return fmt.Errorf("event %s: %w", event, err)
	}
	return nil
}

func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random session secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
