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
	sharedOnce.Do(func() {
		sharedLab, sharedErr = buildStack(sharedTB)
		if sharedErr == nil {
			sharedErr = sharedLab.prestart(sharedTB, testScripts(), true)
		}
	})
	if sharedErr != nil {
		tb.Fatalf("the e2e stack did not start: %v", sharedErr)
	}
	return sharedLab
}

var (
	benchOnce  sync.Once
	benchStack *stack
	benchErr   error
	benchTB    = &pkgTB{}
)

// benchLab is the benchmarks' stack: its own database, api, simulator and only the
// benchmarks' agents.
func benchLab(tb testing.TB) *stack {
	tb.Helper()
	benchOnce.Do(func() {
		benchStack, benchErr = buildStack(benchTB)
		if benchErr == nil {
			benchErr = benchStack.prestart(benchTB, benchScripts(), false)
		}
	})
	if benchErr != nil {
		tb.Fatalf("the benchmark stack did not start: %v", benchErr)
	}
	return benchStack
}

func teardownShared() {
	benchTB.runCleanups()
	sharedTB.runCleanups()
}

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
func (p *pkgTB) Name() string        { return "e2e-chat" }
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
	d, err := os.MkdirTemp("", "oikos-e2e-chat-")
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
