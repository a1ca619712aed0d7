// Package agent_test drives the agent's MCP endpoint end to end: a real PostgreSQL, the api
// started in-process with its seeds, the lab simulator speaking SSH with the scheduler's
// executor running what the api's gate lets through, and the agent itself started through its
// composition root. External clients (the official Go and TypeScript MCP SDKs) talk to /mcp
// over loopback HTTP exactly as Claude Code or Codex would.
//
// The whole package shares one stack (shared): it is built on first use and torn down
// when the tests and benchmarks are over.
package agent_test

import (
	"testing"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
)

func TestMain(m *testing.M) { e2estack.Main(m, shared.TB) }

var shared = e2estack.NewShared("e2e-agent", "e2e stack", buildStack)

// lab returns the package's stack, building it on first use; a stack that failed to build
// fails every test that asks for it.
func lab(tb testing.TB) *stack {
	tb.Helper()
	return shared.Get(tb)
}
