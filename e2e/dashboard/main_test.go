// Package dashboard_test drives the dashboard (issue 14, docs/behaviours.md D1–D6) in real
// Chromium against the real stack: a private PostgreSQL database, the api started through
// api/app.Start serving the embedded dashboard (api/web/dist, built by `make build`), the lab
// simulator speaking SSH with the scheduler's executor and check runner on it (every check
// every few seconds), and Nomos's agent talking to a scripted model (testkit/llmsim,
// testdata/chat.yaml). The browser tests themselves are node:test files driving
// playwright-core (e2e/browser/tests); TestBrowser runs them against this stack, with a
// control server (control_test.go) through which they ask Go for faults, the CLI, api
// restarts, expired sessions and health events. TestDashboardBenchmark (OIKOS_BENCH=1)
// measures the dashboard on a 10,000-entity fleet (docs/benchmarks.md).
package dashboard_test

import (
	"testing"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
)

func TestMain(m *testing.M) { e2estack.Main(m, shared.TB) }

// world is a stack and its control server.
type world struct {
	*stack
	ctl *control
}

var shared = e2estack.NewShared("e2e-dash", "dashboard stack", func(t *e2estack.PackageTB) (*world, error) {
	s, err := buildStack(t, stackOptions{name: "e2e-dash", lab: true})
	if err != nil {
		return nil, err
	}
	c, err := startControl(t, s)
	if err != nil {
		return nil, err
	}
	return &world{stack: s, ctl: c}, nil
})
