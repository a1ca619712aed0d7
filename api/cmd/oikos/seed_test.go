package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// runCLI runs one subcommand with the given environment and returns its exit code and output.
func runCLI(t *testing.T, run func(context.Context, *cliEnv, []string) int, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &cliEnv{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}
	code := run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

func TestRunSeed(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	env := map[string]string{"OIKOS_DATABASE_URL": db.URL}
	entities := func() int {
		var n int
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM entities`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if code, _, _ := runCLI(t, runSeed, env, "extra"); code != 2 {
		t.Errorf("stray argument: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, runSeed, env, "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
	if code, _, stderr := runCLI(t, runSeed, map[string]string{}); code != 1 || !strings.Contains(stderr, "OIKOS_DATABASE_URL") {
		t.Errorf("no database: exit %d, stderr %q", code, stderr)
	}

	// A bad inventory fails naming file and line, and writes nothing.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad-inventory.yaml")
	inv := string(seeds.Inventory())
	if err := os.WriteFile(bad, []byte(strings.Replace(inv, "{type: lxc, name: jellyfin,", "{type: spaceship, name: jellyfin,", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, runSeed, env, "--inventory", bad)
	line := strings.Count(inv[:strings.Index(inv, "{type: lxc, name: jellyfin,")], "\n") + 1
	if code != 1 || !strings.Contains(stderr, fmt.Sprintf("%s:%d", bad, line)) || !strings.Contains(stderr, "spaceship:jellyfin") {
		t.Errorf("bad inventory: exit %d, stderr %q", code, stderr)
	}
	if n := entities(); n != 0 {
		t.Errorf("a failed seed wrote %d entities", n)
	}

	code, stdout, stderr := runCLI(t, runSeed, env, "--demo")
	if code != 0 || !strings.Contains(stdout, "seeded: created ") {
		t.Fatalf("seed: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	n := entities()
	code, stdout, _ = runCLI(t, runSeed, env, "--demo")
	if code != 0 || !strings.Contains(stdout, "created 0, updated 0") || entities() != n {
		t.Errorf("re-seed: exit %d, stdout %q", code, stdout)
	}
	if code, stdout, _ := runCLI(t, runSeed, env, "--diff", "--demo"); code != 0 || !strings.Contains(stdout, "no drift") {
		t.Errorf("diff after seed: exit %d, stdout %q", code, stdout)
	}

	// Drift: the file now says a different vmid.
	drift := filepath.Join(dir, "drift.yaml")
	if err := os.WriteFile(drift, []byte(strings.Replace(inv, "name: jellyfin, attributes: {vmid: 101,", "name: jellyfin, attributes: {vmid: 1101,", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCLI(t, runSeed, env, "--diff", "--inventory", drift)
	if code != 1 || !strings.Contains(stdout, "lxc:jellyfin attributes.vmid: seed 1101, database 101") {
		t.Errorf("diff with drift: exit %d, stdout %q", code, stdout)
	}
}
