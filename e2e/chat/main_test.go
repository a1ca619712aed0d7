// Package chat_test drives chat end to end (docs/behaviours.md A1–A12, X5, X6): a real
// PostgreSQL, the api started in-process with its seeds, the lab simulator speaking SSH with
// the scheduler's executor running what the api's gate lets through, and Nomos's agents
// started through their composition root, each talking to a scripted model (testkit/llmsim)
// or, for the golden evals, to a real provider when OIKOS_EVAL_LLM_BASE_URL is set. Clients
// talk to the api only, exactly as the dashboard would: POST /api/v1/chat with the operator's
// token, the sessions API, approvals and executions.
//
// The api reaches its agents through a router (router_test.go) that sends each session's
// turns to the agent started for it, so every eval runs against its own script with one api.
// The tests share one stack (lab) and the benchmarks another (benchLab), each built on first
// use and torn down when the tests and benchmarks are over.
package chat_test

import (
	"testing"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
)

func TestMain(m *testing.M) { e2estack.Main(m, bench.TB, shared.TB) }

var shared = e2estack.NewShared("e2e-chat", "e2e stack", func(t *e2estack.PackageTB) (*stack, error) {
	s, err := buildStack(t)
	if err == nil {
		err = s.prestart(t, testScripts(), true)
	}
	return s, err
})

// lab returns the package's stack, building it on first use; a stack that failed to build
// fails every test that asks for it.
func lab(tb testing.TB) *stack {
	tb.Helper()
	return shared.Get(tb)
}

var bench = e2estack.NewShared("e2e-chat", "benchmark stack", func(t *e2estack.PackageTB) (*stack, error) {
	s, err := buildStack(t)
	if err == nil {
		err = s.prestart(t, benchScripts(), false)
	}
	return s, err
})

// benchLab is the benchmarks' stack: its own database, api, simulator and only the
// benchmarks' agents.
func benchLab(tb testing.TB) *stack {
	tb.Helper()
	return bench.Get(tb)
}
