package stack

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// PackageTB stands in for a testing.TB where a package's shared stack needs one (pgtest.New):
// Cleanup collects what RunCleanups runs, in reverse order, once every test and benchmark is
// done; Fatalf and friends panic with an error that Recover turns into the builder's error.
// Any other testing.TB method is not used by those helpers (the embedded nil TB would panic).
type PackageTB struct {
	testing.TB
	name     string
	mu       sync.Mutex
	cleanups []func()
}

// NewPackageTB is a PackageTB named name (its temporary directories are "oikos-"+name+"-*").
func NewPackageTB(name string) *PackageTB { return &PackageTB{name: name} }

type stackError struct{ err error }

// Recover, deferred by a function that builds a stack on a PackageTB, turns a PackageTB's
// Fatal into that function's error (*err); any other panic goes on.
func Recover(err *error) {
	if p := recover(); p != nil {
		se, ok := p.(stackError)
		if !ok {
			panic(p)
		}
		*err = se.err
	}
}

func (p *PackageTB) Helper()             {}
func (p *PackageTB) Name() string        { return p.name }
func (p *PackageTB) Logf(string, ...any) {}
func (p *PackageTB) Log(...any)          {}
func (p *PackageTB) Fatalf(format string, a ...any) {
	panic(stackError{fmt.Errorf(format, a...)})
}
func (p *PackageTB) Fatal(a ...any) { panic(stackError{errors.New(fmt.Sprint(a...))}) }
func (p *PackageTB) Errorf(format string, a ...any) {
	panic(stackError{fmt.Errorf(format, a...)})
}
func (p *PackageTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

// TempDir makes a directory removed at teardown.
func (p *PackageTB) TempDir() string {
	d, err := os.MkdirTemp("", "oikos-"+p.name+"-")
	if err != nil {
		p.Fatalf("temp dir: %v", err)
	}
	p.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// RunCleanups runs the collected cleanups, newest first.
func (p *PackageTB) RunCleanups() {
	p.mu.Lock()
	fs := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
