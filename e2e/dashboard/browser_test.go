package dashboard_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// chromium is the browser the tests drive: Debian's package (scripts/test-deps.sh).
const chromium = "/usr/bin/chromium"

// repoPath is a path of the repository from this package's directory.
func repoPath(p ...string) string {
	return filepath.Join(append([]string{"..", ".."}, p...)...)
}

// requireBuilt fails the test unless what the browser suite needs is there: the built
// dashboard (embedded by the api at build time), the CLI, Chromium and the node modules.
func requireBuilt(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(repoPath("api", "web", "dist", "index.html")); err != nil {
		t.Fatalf("api/web/dist/index.html is missing: run make build first (it builds the dashboard the api embeds)")
	}
	if _, err := os.Stat(cliPath()); err != nil {
		t.Fatalf("bin/oikos is missing: run make build first")
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: run scripts/test-deps.sh (it installs Debian's chromium)", chromium)
	}
	if _, err := os.Stat(repoPath("e2e", "browser", "node_modules", "playwright-core")); err != nil {
		t.Fatalf("e2e/browser/node_modules is missing: run scripts/test-deps.sh (npm ci in e2e/browser)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH (node 20 or later runs the browser tests)")
	}
}

// screenshotDir is where screenshots go: $OIKOS_ARTIFACTS, else bin/artifacts/screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("OIKOS_ARTIFACTS")
	if dir == "" {
		dir = repoPath("bin", "artifacts", "screenshots")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// artifactsDir is screenshotDir, made, with earlier runs' screenshots removed.
func artifactsDir(t *testing.T) string {
	t.Helper()
	abs := screenshotDir(t)
	if err := os.MkdirAll(abs, 0o755); err != nil {
		t.Fatal(err)
	}
	// Only this run's screenshots stay (the suite writes nothing else there).
	old, _ := filepath.Glob(filepath.Join(abs, "*.png"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	return abs
}

// runNode runs a node command in e2e/browser with env added, streaming its output into the
// test log line by line; it fails the test if node fails.
func runNode(t *testing.T, timeout time.Duration, env map[string]string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = repoPath("e2e", "browser")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Let node end its browser itself on a timeout before it is killed.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			t.Log(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	start := time.Now()
	err := cmd.Run()
	_ = pw.Close()
	wg.Wait()
	if err != nil {
		t.Fatalf("node %s: %v after %s", strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("node %s passed in %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
}

// browserEnv is what the node suite reads: where the dashboard is, the tokens, the control
// server and where screenshots go.
func browserEnv(t *testing.T, w *world) map[string]string {
	return map[string]string{
		"DASH_BASE_URL":       w.currentURL(),
		"DASH_CONTROL_URL":    w.ctl.url,
		"DASH_OPERATOR_TOKEN": w.operator,
		"DASH_READONLY_TOKEN": w.readonly,
		"DASH_EXPIRING_TOKEN": w.expiring,
		"DASH_EXPIRING_NAME":  expiringName,
		"DASH_OPERATOR_NAME":  operatorName,
		"DASH_CHECK_INTERVAL": fmt.Sprint(checkInterval.Milliseconds()),
		"DASH_ARTIFACTS":      artifactsDir(t),
		"DASH_CHROMIUM":       chromium,
	}
}

// TestBrowser runs the browser suite (e2e/browser/tests/*.test.mjs, one file at a time)
// against the package's stack.
func TestBrowser(t *testing.T) {
	requireBuilt(t)
	w := shared.Get(t)
	defer w.ctl.logTo(t)()
	env := browserEnv(t, w)
	t.Logf("dashboard at %s, control at %s; screenshots go to %s", env["DASH_BASE_URL"], env["DASH_CONTROL_URL"], env["DASH_ARTIFACTS"])
	if hold := os.Getenv("OIKOS_E2E_DASH_HOLD"); hold != "" {
		holdStack(t, env, hold)
		return
	}
	runNode(t, 10*time.Minute, env, "--test", "--test-concurrency=1", "--test-reporter=spec", "tests/")
}

// holdStack keeps the stack up for a while instead of running the suite (OIKOS_E2E_DASH_HOLD
// is how long, e.g. 20m), with the suite's environment written as a shell file, so the node
// tests can be run and re-run by hand while the pages are being written:
//
//	set -a; . bin/artifacts/dash-env.sh; cd e2e/browser && node --test tests/ops.test.mjs
func holdStack(t *testing.T, env map[string]string, hold string) {
	d, err := time.ParseDuration(hold)
	if err != nil {
		t.Fatalf("OIKOS_E2E_DASH_HOLD=%q: %v", hold, err)
	}
	var b strings.Builder
	for k, v := range env {
		fmt.Fprintf(&b, "%s=%q\n", k, v)
	}
	f := filepath.Join(filepath.Dir(env["DASH_ARTIFACTS"]), "dash-env.sh")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("holding the stack for %s; its environment is in %s", d, f)
	time.Sleep(d)
}
