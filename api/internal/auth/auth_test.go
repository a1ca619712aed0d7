package auth_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestRoleGrants(t *testing.T) {
	t.Parallel()
	cases := []struct {
		role auth.Role
		perm auth.Permission
		want bool
	}{
		{auth.RoleOperator, auth.PermRead, true},
		{auth.RoleOperator, auth.PermWrite, true},
		{auth.RoleOperator, auth.PermDecide, true},
		{auth.RoleOperator, auth.PermTrust, true},
		{auth.RoleAgent, auth.PermRead, true},
		{auth.RoleAgent, auth.PermWrite, true},
		// The agent reaches the decision routes only to relay; the execution service proves
		// each relay (api/internal/execution, TestRelay*).
		{auth.RoleAgent, auth.PermDecide, true},
		{auth.RoleReadonly, auth.PermRead, true},
		{auth.RoleReadonly, auth.PermWrite, false},
		{auth.RoleReadonly, auth.PermDecide, false},
		// Adding machines and vouching for host keys: no relay, an operator's alone.
		{auth.RoleAgent, auth.PermTrust, false},
		{auth.RoleReadonly, auth.PermTrust, false},
		{auth.Role("root"), auth.PermRead, false},
	}
	for _, c := range cases {
		if got := c.role.Can(c.perm); got != c.want {
			t.Errorf("%s can %s = %v, want %v", c.role, c.perm, got, c.want)
		}
	}
	if _, err := auth.ParseRole("admin"); !errors.Is(err, auth.ErrInvalidRole) {
		t.Errorf("ParseRole(admin) = %v, want ErrInvalidRole", err)
	}
}

// TestForbidden: a refusal wraps ErrForbidden and says why; for deciding, that only an
// operator's token decides (an agent's only relaying a proved message).
func TestForbidden(t *testing.T) {
	t.Parallel()
	for _, r := range []auth.Role{auth.RoleReadonly, auth.Role("root")} {
		err := auth.Forbidden(r, auth.PermDecide)
		if !errors.Is(err, auth.ErrForbidden) || !strings.Contains(err.Error(), "role "+string(r)+" may not decide") ||
			!strings.Contains(err.Error(), "only an operator's token may decide an approval") {
			t.Errorf("%s: %v", r, err)
		}
	}
	if err := auth.Forbidden(auth.RoleReadonly, auth.PermWrite); !errors.Is(err, auth.ErrForbidden) ||
		!strings.Contains(err.Error(), "role readonly may not write") {
		t.Errorf("write: %v", err)
	}
}

func TestCreateVerifyRevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	s := auth.NewStore(db.Pool)

	tok, err := s.Create(ctx, "ci", auth.RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, auth.Prefix) || len(tok) != 47 {
		t.Fatalf("token %q: want oik_ + 43 chars", tok)
	}
	var stored string
	if err := db.Pool.QueryRow(ctx, `SELECT token_hash FROM api_tokens WHERE name = 'ci'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == tok || stored != auth.Hash(tok) {
		t.Fatalf("stored %q: want the sha256 of the token, never the token", stored)
	}
	p, err := s.Verify(ctx, tok)
	if err != nil || p.Name != "ci" || p.Role != auth.RoleAgent {
		t.Fatalf("Verify = %+v, %v", p, err)
	}
	var used bool
	if err := db.Pool.QueryRow(ctx, `SELECT last_used_at IS NOT NULL FROM api_tokens WHERE name = 'ci'`).Scan(&used); err != nil || !used {
		t.Fatalf("last_used_at not recorded (%v)", err)
	}
	for _, bad := range []string{"", "short", tok + "x", tok[:len(tok)-1] + "A", strings.Repeat("a", 600)} {
		if bad == tok {
			continue
		}
		if _, err := s.Verify(ctx, bad); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("Verify(%q) = %v, want ErrUnauthenticated", bad, err)
		}
	}
	if _, err := s.Create(ctx, "ci", auth.RoleOperator); !errors.Is(err, auth.ErrNameTaken) {
		t.Errorf("duplicate name: %v", err)
	}
	if _, err := s.Create(ctx, "x", auth.Role("root")); !errors.Is(err, auth.ErrInvalidRole) {
		t.Errorf("bad role: %v", err)
	}
	if _, err := s.Create(ctx, " ", auth.RoleAgent); !errors.Is(err, auth.ErrInvalidName) {
		t.Errorf("blank name: %v", err)
	}
	if err := s.Revoke(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, tok); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("revoked token verified: %v", err)
	}
	if err := s.Revoke(ctx, "nobody"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("revoke unknown: %v", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].RevokedAt == nil {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

// TestEnsureToken: the bootstrap of the tokens the api keeps from its environment, for the
// operator's (any 16 to 512 characters) and the agent's, against the real table.
func TestEnsureToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	s := auth.NewStore(db.Pool)

	ensure := func(name string, role auth.Role, tok string, want auth.Ensured) {
		t.Helper()
		got, err := s.EnsureToken(ctx, name, role, tok)
		if err != nil || got != want {
			t.Fatalf("EnsureToken(%s, %s) = %q, %v; want %q", name, role, got, err, want)
		}
	}
	verify := func(tok, name string, role auth.Role) {
		t.Helper()
		p, err := s.Verify(ctx, tok)
		if err != nil || p.Name != name || p.Role != role {
			t.Fatalf("Verify = %+v, %v; want %s/%s", p, err, name, role)
		}
	}
	count := func(where string, args ...any) int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM api_tokens WHERE `+where, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, err := s.EnsureToken(ctx, auth.BootstrapOperatorName, auth.RoleOperator, "too-short"); err == nil ||
		!strings.Contains(err.Error(), "16 to 512 characters") {
		t.Fatalf("short token: %v", err)
	}
	if _, err := s.EnsureToken(ctx, "x", auth.Role("root"), "demo-operator-token-0001"); !errors.Is(err, auth.ErrInvalidRole) {
		t.Errorf("bad role: %v", err)
	}
	if _, err := s.EnsureToken(ctx, " ", auth.RoleAgent, "demo-operator-token-0001"); !errors.Is(err, auth.ErrInvalidName) {
		t.Errorf("blank name: %v", err)
	}
	if n := count("true"); n != 0 {
		t.Fatalf("refused calls wrote %d tokens", n)
	}

	// The operator's, as OIKOS_OPERATOR_TOKEN has always been: idempotent.
	const op1, op2 = "demo-operator-token-0001", "demo-operator-token-0002"
	ensure(auth.BootstrapOperatorName, auth.RoleOperator, op1, auth.EnsuredCreated)
	ensure(auth.BootstrapOperatorName, auth.RoleOperator, op1, auth.EnsuredUnchanged)
	verify(op1, auth.BootstrapOperatorName, auth.RoleOperator)

	// The agent's: created, then unchanged across restarts (nothing written: the row's
	// xmin, its last writer, stays the same).
	agent1, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	ensure(auth.AgentTokenName, auth.RoleAgent, agent1, auth.EnsuredCreated)
	var xmin1, xmin2 string
	if err := db.Pool.QueryRow(ctx, `SELECT xmin::text FROM api_tokens WHERE name = $1`, auth.AgentTokenName).Scan(&xmin1); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ensure(auth.AgentTokenName, auth.RoleAgent, agent1, auth.EnsuredUnchanged)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT xmin::text FROM api_tokens WHERE name = $1`, auth.AgentTokenName).Scan(&xmin2); err != nil {
		t.Fatal(err)
	}
	if xmin1 != xmin2 {
		t.Errorf("ensuring the same token rewrote the row (xmin %s → %s)", xmin1, xmin2)
	}
	verify(agent1, auth.AgentTokenName, auth.RoleAgent)
	if count("token_hash = $1", auth.Hash(agent1)) != 1 || count("token_hash LIKE 'oik_%'") != 0 {
		t.Error("the agent token is not stored as its hash alone")
	}

	// A different value under the same name replaces the old one, which stops working.
	agent2, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	ensure(auth.AgentTokenName, auth.RoleAgent, agent2, auth.EnsuredReplaced)
	if _, err := s.Verify(ctx, agent1); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("replaced agent token still valid: %v", err)
	}
	verify(agent2, auth.AgentTokenName, auth.RoleAgent)
	ensure(auth.BootstrapOperatorName, auth.RoleOperator, op2, auth.EnsuredReplaced)
	if _, err := s.Verify(ctx, op1); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("replaced bootstrap token still valid: %v", err)
	}

	// A revoked bootstrap token comes back while it stays configured.
	if err := s.Revoke(ctx, auth.AgentTokenName); err != nil {
		t.Fatal(err)
	}
	ensure(auth.AgentTokenName, auth.RoleAgent, agent2, auth.EnsuredReplaced)
	verify(agent2, auth.AgentTokenName, auth.RoleAgent)

	// The name held by a token of another role (made by hand) is taken over with the role.
	if err := s.Revoke(ctx, auth.AgentTokenName); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM api_tokens WHERE name = $1`, auth.AgentTokenName); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, auth.AgentTokenName, auth.RoleReadonly); err != nil {
		t.Fatal(err)
	}
	ensure(auth.AgentTokenName, auth.RoleAgent, agent2, auth.EnsuredReplaced)
	verify(agent2, auth.AgentTokenName, auth.RoleAgent)

	// A value another name holds is accepted only as an active token of the same role, and
	// then left where it is: never promoted, demoted or moved.
	ro, err := s.Create(ctx, "viewer", auth.RoleReadonly)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureToken(ctx, auth.BootstrapOperatorName, auth.RoleOperator, ro); err == nil ||
		!strings.Contains(err.Error(), `token "viewer", which is not an active operator token`) {
		t.Errorf("EnsureToken promoted a readonly token: %v", err)
	}
	if _, err := s.EnsureToken(ctx, auth.AgentTokenName, auth.RoleAgent, op2); err == nil ||
		!strings.Contains(err.Error(), `token "bootstrap-operator", which is not an active agent token`) {
		t.Errorf("EnsureToken demoted the operator's token: %v", err)
	}
	ci, err := s.Create(ctx, "ci", auth.RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	ensure(auth.AgentTokenName, auth.RoleAgent, ci, auth.EnsuredUnchanged)
	verify(ci, "ci", auth.RoleAgent)
	verify(agent2, auth.AgentTokenName, auth.RoleAgent)
	if err := s.Revoke(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureToken(ctx, auth.AgentTokenName, auth.RoleAgent, ci); err == nil {
		t.Error("EnsureToken revived another name's revoked token")
	}
	verify(op2, auth.BootstrapOperatorName, auth.RoleOperator)
	if n := count("role = 'operator'"); n != 1 {
		t.Errorf("operator tokens = %d, want 1", n)
	}
	if n := count("name = $1", auth.AgentTokenName); n != 1 {
		t.Errorf("%s tokens = %d, want 1", auth.AgentTokenName, n)
	}
}

// TestCheckIssued: the form of a token a daemon is configured with (OIKOS_AGENT_TOKEN).
func TestCheckIssued(t *testing.T) {
	t.Parallel()
	gen, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{gen, "oik_" + strings.Repeat("0123456789abcdef", 4), "oik_" + strings.Repeat("A-_z", 8)} {
		if err := auth.CheckIssued(ok); err != nil {
			t.Errorf("CheckIssued(%q) = %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"":                                     `must start with "oik_"`,
		"demo-operator-token-0001":             `must start with "oik_"`,
		"OIK_" + strings.Repeat("a", 40):       `must start with "oik_"`,
		"oik_changeme":                         "at least 32 characters, got 8",
		"oik_" + strings.Repeat("a", 31):       "at least 32 characters, got 31",
		"oik_" + strings.Repeat("a", 40) + " ": `found ' ' at 44`,
		"oik_" + strings.Repeat("a", 40) + "=": `found '=' at 44`,
		"oik_" + strings.Repeat("a", 600):      "16 to 512 characters",
	} {
		if err := auth.CheckIssued(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckIssued(%q) = %v, want an error containing %q", bad, err, want)
		}
	}
}
