package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func tokenCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &cliEnv{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}
	return runToken(context.Background(), e, args), out.String(), errOut.String()
}

func TestRunToken(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	env := map[string]string{"OIKOS_DATABASE_URL": db.URL}
	usage := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "usage"},
		{[]string{"mint"}, 2, "unknown subcommand"},
		{[]string{"create", "--name", "x"}, 2, "--role"},
		{[]string{"create", "--role", "root", "--name", "x"}, 2, "invalid role"},
		{[]string{"create", "--role", "agent"}, 2, "--name is required"},
		{[]string{"create", "--role", "agent", "--name", "x", "extra"}, 2, "unexpected argument"},
		{[]string{"revoke"}, 2, "--name is required"},
	}
	for _, u := range usage {
		code, _, stderr := tokenCLI(t, env, u.args...)
		if code != u.code || !strings.Contains(stderr, u.msg) {
			t.Errorf("%v: exit %d stderr %q, want %d and %q", u.args, code, stderr, u.code, u.msg)
		}
	}
	if code, _, stderr := tokenCLI(t, map[string]string{}, "create", "--role", "agent", "--name", "x"); code != 1 ||
		!strings.Contains(stderr, "OIKOS_DATABASE_URL") {
		t.Errorf("no database: exit %d, %q", code, stderr)
	}

	code, stdout, stderr := tokenCLI(t, env, "create", "--role", "agent", "--name", "nomos")
	if code != 0 || !strings.Contains(stderr, "shown only this once") {
		t.Fatalf("create: exit %d, stderr %q", code, stderr)
	}
	tok := strings.TrimSpace(stdout)
	if !strings.HasPrefix(tok, auth.Prefix) || strings.Contains(tok, "\n") {
		t.Fatalf("stdout must be exactly the token, got %q", stdout)
	}
	store := auth.NewStore(db.Pool)
	p, err := store.Verify(context.Background(), tok)
	if err != nil || p.Name != "nomos" || p.Role != auth.RoleAgent {
		t.Fatalf("printed token does not verify: %+v %v", p, err)
	}
	if code, _, stderr := tokenCLI(t, env, "create", "--role", "operator", "--name", "nomos"); code != 1 || !strings.Contains(stderr, "exists") {
		t.Errorf("duplicate name: exit %d, %q", code, stderr)
	}
	code, stdout, _ = tokenCLI(t, env, "list")
	if code != 0 || !strings.Contains(stdout, "nomos") || !strings.Contains(stdout, "agent") || strings.Contains(stdout, tok) {
		t.Errorf("list: exit %d, %q", code, stdout)
	}
	if code, _, _ := tokenCLI(t, env, "revoke", "--name", "nomos"); code != 0 {
		t.Errorf("revoke: exit %d", code)
	}
	if _, err := store.Verify(context.Background(), tok); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("revoked token still verifies: %v", err)
	}
	if code, _, stderr := tokenCLI(t, env, "revoke", "--name", "ghost"); code != 1 || !strings.Contains(stderr, "no such token") {
		t.Errorf("revoke unknown: exit %d, %q", code, stderr)
	}
}
