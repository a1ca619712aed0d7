package startstop_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// loop is a run function that records that it started and that it returned.
type loop struct {
	started, returned chan struct{}
}

func newLoop() *loop { return &loop{started: make(chan struct{}), returned: make(chan struct{})} }

func (l *loop) run(ctx context.Context) {
	close(l.started)
	<-ctx.Done()
	close(l.returned)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Stop cancels the loop's context and returns only after the loop returned; a second Stop
// returns at once.
func TestStopWaitsAndIsSafeTwice(t *testing.T) {
	t.Parallel()
	var lc startstop.Lifecycle
	l := newLoop()
	if err := lc.Start(context.Background(), zerolog.Nop(), "loop", l.run); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.started, "the loop to start")
	if !lc.Running() {
		t.Error("not running after Start")
	}
	lc.Stop()
	if !closed(l.returned) {
		t.Fatal("Stop returned before the loop did")
	}
	lc.Stop()
	if lc.Running() {
		t.Error("running after Stop")
	}
}

// Stop before Start does nothing and makes a later Start fail: no goroutine may start that
// no Stop will wait for.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	var lc startstop.Lifecycle
	lc.Stop()
	lc.Stop()
	ran := false
	if err := lc.Start(context.Background(), zerolog.Nop(), "loop", func(context.Context) { ran = true }); !errors.Is(err, startstop.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
	lc.Stop()
	if ran {
		t.Error("the loop ran although Start failed")
	}
	if lc.Go("late", func(context.Context) { ran = true }) || ran {
		t.Error("Go started a goroutine after Stop")
	}
}

// A second Start is refused; the first loop keeps running until Stop.
func TestStartTwice(t *testing.T) {
	t.Parallel()
	var lc startstop.Lifecycle
	l := newLoop()
	if err := lc.Start(context.Background(), zerolog.Nop(), "loop", l.run); err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(context.Background(), zerolog.Nop(), "loop", func(context.Context) { t.Error("second loop ran") }); !errors.Is(err, startstop.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	lc.Stop()
	if !closed(l.returned) {
		t.Fatal("the first loop did not end with Stop")
	}
}

// Concurrent Stops all wait for the goroutines: none returns while one still runs.
func TestConcurrentStop(t *testing.T) {
	t.Parallel()
	var lc startstop.Lifecycle
	release := make(chan struct{})
	var finished atomic.Bool
	started := make(chan struct{})
	if err := lc.Start(context.Background(), zerolog.Nop(), "loop", func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		<-release // a loop that takes its time to wind down
		finished.Store(true)
	}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, "the loop to start")
	var wg sync.WaitGroup
	var early atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc.Stop()
			if !finished.Load() {
				early.Add(1)
			}
		}()
	}
	close(release)
	wg.Wait()
	if n := early.Load(); n > 0 {
		t.Errorf("%d of 8 concurrent Stops returned before the loop ended", n)
	}
}

// Goroutines started by Go share Start's context and are waited for; Go from inside the
// loop works (workers started by a scheduling loop).
func TestGoIsWaitedFor(t *testing.T) {
	t.Parallel()
	var lc startstop.Lifecycle
	const workers = 5
	var done atomic.Int32
	ready := make(chan struct{}, workers)
	if err := lc.Start(context.Background(), zerolog.Nop(), "loop", func(ctx context.Context) {
		for range workers {
			lc.Go("worker", func(ctx context.Context) {
				ready <- struct{}{}
				<-ctx.Done()
				done.Add(1)
			})
		}
		<-ctx.Done()
	}); err != nil {
		t.Fatal(err)
	}
	for range workers {
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			t.Fatal("workers did not start")
		}
	}
	lc.Stop()
	if n := done.Load(); n != workers {
		t.Errorf("Stop returned with %d of %d workers done", n, workers)
	}
}

// A panic in the loop is recovered and logged, and Stop still returns.
func TestPanicIsRecovered(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	var lc startstop.Lifecycle
	if err := lc.Start(context.Background(), zerolog.New(&buf), "boom-loop", func(context.Context) { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	lc.Stop()
	if s := buf.String(); !strings.Contains(s, "boom-loop") || !strings.Contains(s, "recovered panic") {
		t.Errorf("log %q does not report the recovered panic", s)
	}
}

// The parent context ending ends the loop too; Stop afterwards returns at once.
func TestParentContextEnds(t *testing.T) {
	t.Parallel()
	var lc startstop.Lifecycle
	l := newLoop()
	ctx, cancel := context.WithCancel(context.Background())
	if err := lc.Start(ctx, zerolog.Nop(), "loop", l.run); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitClosed(t, l.returned, "the loop to end with its parent context")
	lc.Stop()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A panicking goroutine is recovered, logged and reported by Err; Stop still waits for the
// goroutines that keep running, and the process goes on.
func TestPanicIsReportedAndStopWaits(t *testing.T) {
	t.Parallel()
	var buf safeBuffer
	var lc startstop.Lifecycle
	if lc.Err() != nil {
		t.Fatal("Err before any panic")
	}
	release := make(chan struct{})
	finished := make(chan struct{})
	if err := lc.Start(context.Background(), zerolog.New(&buf), "waiting-loop", func(ctx context.Context) {
		<-ctx.Done()
		<-release // keeps running after its context ended
		close(finished)
	}); err != nil {
		t.Fatal(err)
	}
	panicked := make(chan struct{})
	if !lc.Go("boom-worker", func(context.Context) { defer close(panicked); panic("boom") }) {
		t.Fatal("Go refused while running")
	}
	<-panicked
	deadline := time.Now().Add(5 * time.Second)
	for lc.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	var pe *safego.PanicError
	if err := lc.Err(); !errors.As(err, &pe) || pe.Goroutine != "boom-worker" || pe.Value != "boom" || !strings.Contains(err.Error(), "boom-worker panicked: boom") {
		t.Fatalf("Err after the panic: %v", err)
	}
	if !lc.Running() {
		t.Fatal("a panicking worker stopped the lifecycle")
	}
	stopped := make(chan struct{})
	go func() { lc.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a goroutine was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return once the goroutine did")
	}
	select {
	case <-finished:
	default:
		t.Fatal("Stop returned before the goroutine finished")
	}
	if s := buf.String(); !strings.Contains(s, "boom-worker") || !strings.Contains(s, "recovered panic") {
		t.Errorf("log %q does not report the recovered panic", s)
	}
}

// safeBuffer is a bytes.Buffer the logging goroutines and the test share.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// part records its Start and Stop calls in log; fail makes Start fail.
type fakePart struct {
	name string
	fail bool
	log  *[]string
}

func (p fakePart) Start(context.Context) error {
	*p.log = append(*p.log, "start "+p.name)
	if p.fail {
		return errors.New(p.name + " failed")
	}
	return nil
}

func (p fakePart) Stop() { *p.log = append(*p.log, "stop "+p.name) }

func TestStartAll(t *testing.T) {
	var log []string
	stop, err := startstop.StartAll(context.Background(), fakePart{"a", false, &log}, fakePart{"b", false, &log})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if got, want := strings.Join(log, ","), "start a,start b,stop b,stop a"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}

	log = nil
	stop, err = startstop.StartAll(context.Background(), fakePart{"a", false, &log}, fakePart{"b", false, &log}, fakePart{"c", true, &log}, fakePart{"d", false, &log})
	if err == nil || err.Error() != "c failed" {
		t.Fatalf("err = %v", err)
	}
	stop() // nothing more to stop
	if got, want := strings.Join(log, ","), "start a,start b,start c,stop b,stop a"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
