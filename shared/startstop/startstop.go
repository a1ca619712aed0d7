// Package startstop is the Start/Stop lifecycle every long-running part of Oikos shares
// (CONTRIBUTING: "Start(ctx) error and Stop() (safe twice)"), written once:
//
//   - Start runs the part's loop on a goroutine started through shared/safego (a panic is
//     recovered and logged), under a context that Stop cancels. It succeeds once; a second
//     Start, or a Start after Stop, is an error (ErrStarted, ErrStopped) rather than a second
//     loop or a goroutine nobody waits for.
//   - Go starts further goroutines under the same context (workers, one loop per pass) that
//     Stop waits for too; after Stop it starts nothing.
//   - Stop cancels that context and waits until every goroutine started by Start and Go has
//     returned. It is safe twice, concurrently, and before Start (then a later Start fails).
//   - A goroutine that panics is recovered: the panic is logged with its stack, and Err
//     reports it (a *safego.PanicError) from then on, so the owner learns of it; the process
//     and the part's other goroutines go on.
//
// The zero Lifecycle is ready to use; embed it or keep it as a field:
//
//	type Sweeper struct {
//		life startstop.Lifecycle
//		...
//	}
//
//	func (s *Sweeper) Start(ctx context.Context) error {
//		return s.life.Start(ctx, s.log, "sweep", s.loop)
//	}
//
//	func (s *Sweeper) Stop() { s.life.Stop() }
package startstop

import (
	"context"
	"errors"
	"sync"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/safego"
)

var (
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("startstop: already started")
	// ErrStopped is returned by a Start after Stop: build a new part instead.
	ErrStopped = errors.New("startstop: already stopped")
)

type state int

const (
	idle state = iota
	running
	stopped
)

// Lifecycle runs a part's goroutines between Start and Stop. Safe for concurrent use; it
// must not be copied after first use.
type Lifecycle struct {
	mu     sync.Mutex
	state  state
	ctx    context.Context
	cancel context.CancelFunc
	log    zerolog.Logger
	wg     sync.WaitGroup
	panics []error // recovered panics, reported by Err
}

// Start runs run(ctx') on a recovered goroutine named name, where ctx' is derived from ctx
// and cancelled by Stop (or when ctx ends). run should return once ctx' is done. log
// receives a recovered panic of run or of any goroutine started by Go.
func (l *Lifecycle) Start(ctx context.Context, log zerolog.Logger, name string, run func(ctx context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case running:
		return ErrStarted
	case stopped:
		return ErrStopped
	}
	l.state = running
	l.log = log
	l.ctx, l.cancel = context.WithCancel(ctx)
	l.goLocked(name, run)
	return nil
}

// Go runs fn(ctx') on a recovered goroutine that Stop waits for, ctx' being Start's
// context. It reports false, and runs nothing, before Start and after Stop. It may be
// called from the goroutines it and Start started.
func (l *Lifecycle) Go(name string, fn func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != running {
		return false
	}
	l.goLocked(name, fn)
	return true
}

// goLocked starts fn; l.mu is held, so the WaitGroup is never added to once Stop waits.
func (l *Lifecycle) goLocked(name string, fn func(ctx context.Context)) {
	ctx := l.ctx
	log := l.log
	l.wg.Add(1)
	safego.Go(log, name, func() {
		defer l.wg.Done()
		// Recovered here, inside Done, so that a panic is logged and reported before Stop
		// returns.
		defer safego.RecoverReport(log, name, l.report)
		fn(ctx)
	})
}

// report records a recovered panic for Err.
func (l *Lifecycle) report(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.panics = append(l.panics, err)
}

// Err reports the panics recovered in the goroutines so far (joined, each a
// *safego.PanicError), or nil. After Stop it holds every one.
func (l *Lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.panics...)
}

// Running reports whether Start succeeded and Stop has not been called.
func (l *Lifecycle) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == running
}

// Stop cancels the context of the running goroutines and waits for all of them to return.
// Safe to call twice, concurrently (every call waits), and before Start.
func (l *Lifecycle) Stop() {
	l.mu.Lock()
	if l.state == running {
		l.cancel()
	}
	l.state = stopped
	l.mu.Unlock()
	l.wg.Wait()
}

// Part is a long-running part with this lifecycle: Start(ctx) error and Stop().
type Part interface {
	Start(ctx context.Context) error
	Stop()
}

// StartAll starts parts in order, as a daemon starts its parts. When one fails to start, it
// stops those already started, last first, and returns the error. Otherwise it returns stop,
// which stops them all, last first; the daemon defers it.
func StartAll(ctx context.Context, parts ...Part) (stop func(), err error) {
	started := make([]Part, 0, len(parts))
	stop = func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].Stop()
		}
	}
	for _, p := range parts {
		if err := p.Start(ctx); err != nil {
			stop()
			return func() {}, err
		}
		started = append(started, p)
	}
	return stop, nil
}
