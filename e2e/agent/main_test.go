// Package agent_test drives the agent's MCP endpoint end to end: a real PostgreSQL, the api
// started in-process with its seeds, the lab simulator speaking SSH with the scheduler's
// executor running what the api's gate lets through, and the agent itself started through its
// composition root. External clients (the official Go and TypeScript MCP SDKs) talk to /mcp
// over loopback HTTP exactly as Claude Code or Codex would.
//
// The whole package shares one stack (sharedStack): it is built on first use and torn down
// when the tests and benchmarks are over.
package agent_test

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	teardownShared()
	os.Exit(code)
}

var (
	sharedOnce sync.Once
	sharedLab  *stack
	sharedErr  error
	sharedTB   = &pkgTB{}
)

// lab returns the package's stack, building it on first use; a stack that failed to build
// fails every test that asks for it.
func lab(tb testing.TB) *stack {
	tb.Helper()
	sharedOnce.Do(func() { sharedLab, sharedErr = buildStack(sharedTB) })
	if sharedErr != nil {
		tb.Fatalf("the e2e stack did not start: %v", sharedErr)
	}
	return sharedLab
}

func teardownShared() { sharedTB.runCleanups() }

// pkgTB stands in for a testing.TB where the package's stack needs one (pgtest.New): Cleanup
// collects what teardownShared runs, in reverse order, once every test and benchmark is done;
// Fatalf and friends panic with a stackError that buildStack turns into its error. Any other
// testing.TB method is not used by those helpers (the embedded nil TB would panic).
type pkgTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

type stackError struct{ err error }

func (p *pkgTB) Helper()             {}
func (p *pkgTB) Name() string        { return "e2e-agent" }
func (p *pkgTB) Logf(string, ...any) {}
func (p *pkgTB) Log(...any)          {}
func (p *pkgTB) Fatalf(format string, a ...any) {
	panic(stackError{fmt.Errorf(format, a...)})
}
func (p *pkgTB) Fatal(a ...any) { panic(stackError{errors.New(fmt.Sprint(a...))}) }
func (p *pkgTB) Errorf(format string, a ...any) {
	panic(stackError{fmt.Errorf(format, a...)})
}
func (p *pkgTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

// TempDir makes a directory removed at teardown.
func (p *pkgTB) TempDir() string {
	d, err := os.MkdirTemp("", "oikos-e2e-agent-")
	if err != nil {
		p.Fatalf("temp dir: %v", err)
	}
	p.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (p *pkgTB) runCleanups() {
	p.mu.Lock()
	fs := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
