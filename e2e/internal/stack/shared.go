package stack

import (
	"os"
	"sync"
	"testing"

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Main runs a package's tests and benchmarks (pgtest.Run), then tears down the packages'
// shared stacks in the order given, and exits.
func Main(m *testing.M, teardown ...*PackageTB) {
	code := pgtest.Run(m)
	for _, t := range teardown {
		t.RunCleanups()
	}
	os.Exit(code)
}

// Shared is a stack a package's tests share: built on first use on its PackageTB, torn down
// when that PackageTB's cleanups run (Main).
type Shared[T any] struct {
	TB    *PackageTB
	what  string
	build func(*PackageTB) (T, error)
	once  sync.Once
	v     T
	err   error
}

// NewShared is a shared stack named what (in the failure of a test that asks for a stack
// that did not build), built by build on a PackageTB named name.
func NewShared[T any](name, what string, build func(*PackageTB) (T, error)) *Shared[T] {
	return &Shared[T]{TB: NewPackageTB(name), what: what, build: build}
}

// Get returns the stack, building it on first use; a stack that failed to build fails every
// test that asks for it.
func (s *Shared[T]) Get(tb testing.TB) T {
	tb.Helper()
	s.once.Do(func() { s.v, s.err = s.build(s.TB) })
	if s.err != nil {
		tb.Fatalf("the %s did not start: %v", s.what, s.err)
	}
	return s.v
}
