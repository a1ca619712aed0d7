// Package auth holds the api's bearer tokens and what each role may do.
//
// A token is "oik_" followed by 32 random bytes in base64url. Only its SHA-256 (hex) is
// stored, so the api_tokens table never holds a usable secret; the plaintext is shown once,
// by Create. Verification looks the hash up and compares it in constant time.
//
// Roles follow the security model of docs/architecture.md: an operator may do everything, an
// agent may read and write facts and knowledge and decide nothing of its own (it reaches the
// decision routes only to relay an operator's chat message the api recorded, which the
// execution service proves; see PermDecide), a readonly token may only read. The grants are
// one small table (grants) so that a route states the permission it needs and the table
// alone says who has it; refusals says why a role lacking one is refused.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/authstore"
)

// Role is what a token is allowed to do.
type Role string

// The three roles.
const (
	RoleOperator Role = "operator"
	RoleAgent    Role = "agent"
	RoleReadonly Role = "readonly"
)

// Permission is a class of request a route belongs to.
type Permission string

// Permissions a route may require.
const (
	// PermRead: any GET.
	PermRead Permission = "read"
	// PermWrite: mutations of the graph, knowledge and signal state.
	PermWrite Permission = "write"
	// PermDecide: the decision routes (an approval's decision, an assent to a session's
	// plan). An operator decides directly, any way. An agent's token holds it only to relay an
	// operator's chat message: it may approve (chat_assent, typed_confirmation) or assent to a
	// plan naming the message the api recorded from an operator's token (POST /chat), and the
	// execution service proves that record (same session, operator token, newer than what it
	// grants, the deterministic detection of shared/policy, not used before) before anything
	// changes; a message id an agent merely asserts decides nothing. A readonly token never
	// decides.
	PermDecide Permission = "decide"
	// PermTrust: adding a machine to the fleet and vouching for its SSH host key, after which
	// the scheduler dials it and trusts it. An operator's alone: no relay applies.
	PermTrust Permission = "trust"
)

// refusals says, per permission, why a role without it is refused: the one place the detail
// of a guard's 403 comes from (Forbidden).
var refusals = map[Permission]string{
	PermRead:  "reading needs a token of role operator, agent or readonly",
	PermWrite: "a readonly token may only read; changes need an operator's or an agent's token",
	PermDecide: "only an operator's token may decide an approval (an agent's only by relaying an operator's chat " +
		"message the api recorded and proves); a readonly token cannot approve, deny, revoke or assent",
	PermTrust: "only an operator's token may add a machine or vouch for its host key",
}

// Forbidden is the error for a role that lacks p: it wraps ErrForbidden and says why.
func Forbidden(r Role, p Permission) error {
	why, ok := refusals[p]
	if !ok {
		why = "the role does not hold that permission"
	}
	return fmt.Errorf("%w: role %s may not %s: %s", ErrForbidden, r, p, why)
}

// grants is the whole role model: which role holds which permission.
var grants = map[Role]map[Permission]bool{
	RoleOperator: {PermRead: true, PermWrite: true, PermDecide: true, PermTrust: true},
	// The agent holds PermDecide only to relay; the execution service proves every relay.
	RoleAgent:    {PermRead: true, PermWrite: true, PermDecide: true},
	RoleReadonly: {PermRead: true},
}

// Can reports whether the role holds the permission. Unknown roles hold nothing.
func (r Role) Can(p Permission) bool { return grants[r][p] }

// ParseRole returns the role named s, or ErrInvalidRole.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if _, ok := grants[r]; !ok {
		return "", fmt.Errorf("%w: %q (want operator, agent or readonly)", ErrInvalidRole, s)
	}
	return r, nil
}

// Principal is who made a request.
type Principal struct {
	// Name is the token's name; audit rows and events carry it as the actor.
	Name string
	// Role is the token's role.
	Role Role
}

// Errors returned by the store.
var (
	// ErrUnauthenticated: no token, a malformed one, an unknown one or a revoked one. The
	// caller answers 401 without saying which, so a guesser learns nothing.
	ErrUnauthenticated = errors.New("missing, unknown or revoked bearer token")
	// ErrForbidden: the token is valid but its role lacks the permission.
	ErrForbidden = errors.New("token role lacks the permission")
	// ErrInvalidRole: a role name that is not operator, agent or readonly.
	ErrInvalidRole = errors.New("invalid role")
	// ErrInvalidName: an empty or over-long token name.
	ErrInvalidName = errors.New("invalid token name")
	// ErrNameTaken: a token of that name exists already.
	ErrNameTaken = authstore.ErrNameTaken
	// ErrNotFound: no token of that name.
	ErrNotFound = errors.New("no such token")
)

// Prefix starts every token Create issues, so a leaked one is recognisable in logs and by
// secret scanners.
const Prefix = "oik_"

// Names of the tokens the api keeps from its environment (EnsureToken).
const (
	// BootstrapOperatorName holds OIKOS_OPERATOR_TOKEN, role operator.
	BootstrapOperatorName = "bootstrap-operator"
	// AgentTokenName holds OIKOS_AGENT_TOKEN, role agent: Nomos, the agent's own loop, whose
	// audit rows and events carry this name as the actor.
	AgentTokenName = "nomos"
)

// Bounds on a presented token. Generated tokens are 47 characters; an operator-chosen
// OIKOS_OPERATOR_TOKEN may be any string in this range (CheckToken).
const (
	minTokenLen = 16
	maxTokenLen = 512
)

// lastUsedResolution bounds how often Verify writes last_used_at: once a minute per token is
// enough to spot a stale token, and a write per request would double the cost of every call.
const lastUsedResolution = time.Minute

// Store issues, verifies and revokes the tokens of api_tokens (through authstore).
type Store struct {
	db *authstore.Store
}

// NewStore returns a store over db (a pool).
func NewStore(db storage.DB) *Store { return &Store{db: authstore.New(db)} }

// Hash returns the stored form of a token: hex SHA-256.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken returns a fresh random token.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func checkName(name string) error {
	if strings.TrimSpace(name) == "" || len(name) > 200 {
		return fmt.Errorf("%w: %q (1 to 200 characters)", ErrInvalidName, name)
	}
	return nil
}

// Create issues a new token and returns its plaintext, which is never stored or shown again.
func (s *Store) Create(ctx context.Context, name string, role Role) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return "", err
	}
	token, err := NewToken()
	if err != nil {
		return "", err
	}
	err = s.db.InsertToken(ctx, name, string(role), Hash(token))
	if errors.Is(err, ErrNameTaken) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("create token %q: %w", name, err)
	}
	return token, nil
}

// Verify returns the principal a token stands for, or ErrUnauthenticated.
func (s *Store) Verify(ctx context.Context, token string) (Principal, error) {
	_, p, err := s.Identify(ctx, token)
	return p, err
}

// Identify is Verify that also returns the token's id (what a dashboard session refers to).
func (s *Store) Identify(ctx context.Context, token string) (string, Principal, error) {
	p, id, err := s.identify(ctx, token)
	return id, p, err
}

func (s *Store) identify(ctx context.Context, token string) (Principal, string, error) {
	if len(token) < minTokenLen || len(token) > maxTokenLen {
		return Principal{}, "", ErrUnauthenticated
	}
	want := Hash(token)
	t, err := s.db.TokenByHash(ctx, want)
	id, name, role, stored, lastUsed, revoked := t.ID, t.Name, t.Role, t.Hash, t.LastUsedAt, t.Revoked
	if errors.Is(err, authstore.ErrNotFound) {
		return Principal{}, "", ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, "", fmt.Errorf("verify token: %w", err)
	}
	// The index lookup found the row by hash; the constant-time comparison is the check that
	// decides, so no timing difference depends on how much of a guess was right.
	if subtle.ConstantTimeCompare([]byte(stored), []byte(want)) != 1 || revoked {
		return Principal{}, "", ErrUnauthenticated
	}
	if lastUsed == nil || time.Since(*lastUsed) > lastUsedResolution {
		if err := s.db.TouchToken(ctx, id); err != nil {
			return Principal{}, "", fmt.Errorf("record token use: %w", err)
		}
	}
	return Principal{Name: name, Role: Role(role)}, id, nil
}

// Ensured says what EnsureToken did.
type Ensured string

// EnsureToken's outcomes.
const (
	// EnsuredUnchanged: the token was in place already (under the name, or as an active
	// token of the role under another name); nothing was written.
	EnsuredUnchanged Ensured = "unchanged"
	// EnsuredCreated: no token had the name; one was created.
	EnsuredCreated Ensured = "created"
	// EnsuredReplaced: the name held another value, another role or a revoked token; it now
	// holds this one, active, and a previous value stops working.
	EnsuredReplaced Ensured = "replaced"
)

// CheckToken reports whether token is one Verify can accept: minTokenLen to maxTokenLen
// characters. It is the whole rule for OIKOS_OPERATOR_TOKEN, which predates the prefix.
func CheckToken(token string) error {
	if len(token) < minTokenLen || len(token) > maxTokenLen {
		return fmt.Errorf("must be %d to %d characters (try `oikos token create` for a generated one)", minTokenLen, maxTokenLen)
	}
	return nil
}

// minIssuedBody is the least number of characters after Prefix a well-formed token has:
// 32 base64url or hex characters are at least 128 random bits (Create's have 43).
const minIssuedBody = 32

// CheckIssued reports whether token has the form of a token Oikos issues: Prefix followed by
// at least 32 base64url characters (A-Z a-z 0-9 - _; hex qualifies), within CheckToken's
// bounds. Create's tokens and those `oikos-local up` generates have it; a token configured
// for a daemon (OIKOS_AGENT_TOKEN) must have it, so a placeholder or a pasted fragment is
// refused at start rather than accepted as a weak secret.
func CheckIssued(token string) error {
	body, ok := strings.CutPrefix(token, Prefix)
	if !ok {
		return fmt.Errorf("must start with %q (an Oikos token, such as `oikos token create` prints)", Prefix)
	}
	if len(body) < minIssuedBody {
		return fmt.Errorf("must be %q followed by at least %d characters, got %d", Prefix, minIssuedBody, len(body))
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("may hold only A-Z, a-z, 0-9, '-' and '_' after %q; found %q at %d", Prefix, c, len(Prefix)+i)
		}
	}
	return CheckToken(token)
}

// EnsureToken makes sure token is an active token of role under name: the bootstrap of a
// token configured in the environment (OIKOS_OPERATOR_TOKEN as BootstrapOperatorName,
// OIKOS_AGENT_TOKEN as AgentTokenName). It is idempotent: the same token again changes
// nothing. A different token, another role or a revoked token under the name is replaced, so
// the previous value stops working and a revoked bootstrap token comes back while it stays
// configured. A token already held by another name is accepted when that token is active and
// of role, and refused otherwise (it is never promoted, demoted or moved). The token must pass
// CheckToken; callers with a stricter rule (CheckIssued) apply it first.
//
// Like Create and Revoke (and EnsureOperator, which it replaces) it writes no audit row; the
// api logs its outcome at start when it is not EnsuredUnchanged.
func (s *Store) EnsureToken(ctx context.Context, name string, role Role, token string) (Ensured, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return "", err
	}
	if err := CheckToken(token); err != nil {
		return "", err
	}
	h := Hash(token)
	held, err := s.db.TokenByHash(ctx, h)
	holder, heldRole, revoked := held.Name, held.Role, held.Revoked
	switch {
	case err == nil && holder != name:
		if Role(heldRole) == role && !revoked {
			return EnsuredUnchanged, nil
		}
		return "", fmt.Errorf("the value equals token %q, which is not an active %s token", holder, role)
	case err == nil && Role(heldRole) == role && !revoked:
		return EnsuredUnchanged, nil
	case err != nil && !errors.Is(err, authstore.ErrNotFound):
		return "", fmt.Errorf("look up token %q: %w", name, err)
	}
	existed, err := s.db.UpsertToken(ctx, name, string(role), h)
	if err != nil {
		return "", fmt.Errorf("ensure token %q: %w", name, err)
	}
	if existed {
		return EnsuredReplaced, nil
	}
	return EnsuredCreated, nil
}

// Revoke disables the named token for good.
func (s *Store) Revoke(ctx context.Context, name string) error {
	err := s.db.RevokeToken(ctx, name)
	if errors.Is(err, authstore.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("revoke token %q: %w", name, err)
	}
	return nil
}

// Info describes a token without its secret.
type Info struct {
	Name       string     `json:"name"`
	Role       Role       `json:"role"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// List returns every token, by name.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	rows, err := s.db.Tokens(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]Info, 0, len(rows))
	for _, t := range rows {
		out = append(out, Info{Name: t.Name, Role: Role(t.Role), CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt})
	}
	return out, nil
}
