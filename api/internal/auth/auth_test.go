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
		{auth.RoleAgent, auth.PermRead, true},
		{auth.RoleAgent, auth.PermWrite, true},
		{auth.RoleAgent, auth.PermDecide, false},
		{auth.RoleReadonly, auth.PermRead, true},
		{auth.RoleReadonly, auth.PermWrite, false},
		{auth.RoleReadonly, auth.PermDecide, false},
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
// operator's token decides.
func TestForbidden(t *testing.T) {
	t.Parallel()
	for _, r := range []auth.Role{auth.RoleAgent, auth.RoleReadonly} {
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

func TestEnsureOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	s := auth.NewStore(db.Pool)

	if err := s.EnsureOperator(ctx, "too-short"); err == nil {
		t.Fatal("short bootstrap token accepted")
	}
	const first = "demo-operator-token-0001"
	for range 2 { // idempotent
		if err := s.EnsureOperator(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.Verify(ctx, first)
	if err != nil || p.Role != auth.RoleOperator || p.Name != auth.BootstrapOperatorName {
		t.Fatalf("Verify bootstrap = %+v, %v", p, err)
	}
	// A changed value replaces the old bootstrap token.
	const second = "demo-operator-token-0002"
	if err := s.EnsureOperator(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, first); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("replaced bootstrap token still valid: %v", err)
	}
	if _, err := s.Verify(ctx, second); err != nil {
		t.Errorf("new bootstrap token: %v", err)
	}
	// Revoked bootstrap comes back when the process restarts with it configured.
	if err := s.Revoke(ctx, auth.BootstrapOperatorName); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureOperator(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, second); err != nil {
		t.Errorf("re-ensured bootstrap token: %v", err)
	}
	// A token that belongs to a readonly name is not silently promoted.
	ro, err := s.Create(ctx, "viewer", auth.RoleReadonly)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureOperator(ctx, ro); err == nil {
		t.Error("EnsureOperator promoted a readonly token")
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM api_tokens WHERE role = 'operator'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("operator tokens = %d (%v), want 1", n, err)
	}
}
