package checkrun

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/probeparse"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/remote"
)

// blockingExec holds every command until its context ends, like a hung host.
type blockingExec struct {
	mu    sync.Mutex
	calls int
}

func (b *blockingExec) Exec(ctx context.Context, _ remote.Target, _ string, _ io.Writer) (remote.Result, error) {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	<-ctx.Done()
	return remote.Result{}, ctx.Err()
}

func (b *blockingExec) Probe(ctx context.Context, t remote.Target, cmd string) (remote.Result, error) {
	return b.Exec(ctx, t, cmd, nil)
}

func (b *blockingExec) OpenConnections() int { return 1 }

type machineResolver struct{}

func (machineResolver) Resolve(_ context.Context, slug string) (remote.Target, remote.Entity, error) {
	return remote.Target{Slug: slug, Addr: "127.0.0.1:22", User: "root", Kind: remote.KindMachine,
		Wrap: func(c string) (string, error) { return c, nil }}, remote.Entity{}, nil
}

func (m machineResolver) ResolveRunsOn(ctx context.Context, slug string) (remote.Target, error) {
	t, _, err := m.Resolve(ctx, slug)
	return t, err
}

// startLoop runs r's scheduling loop as Start does, without loading definitions (the test
// put its entries in place).
func startLoop(t *testing.T, r *Runner) {
	t.Helper()
	if err := r.life.Start(context.Background(), zerolog.Nop(), "check-scheduler", r.loop); err != nil {
		t.Fatal(err)
	}
}

// A check that falls due while its previous run is still running is skipped and counted —
// never silently dropped — and the skipped runs never pile up as concurrent runs.
func TestOverrunIsCountedAndSkipped(t *testing.T) {
	t.Parallel()
	exec := &blockingExec{}
	reg := metrics.NewRegistry()
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), Metrics: reg}, exec)
	d := &checkDef{ID: "c1", Slug: "check:host.a.ssh-script.cpu", TargetID: "t1", TargetSlug: "host:a", Kind: "ssh-script",
		Interval: 50 * time.Millisecond, Timeout: time.Hour, spec: probeparse.Spec{Script: "cpu", OS: "linux"}}
	e := &entry{}
	e.def.Store(d)
	e.base, e.due = time.Now(), time.Now()
	r.entries[d.ID] = e
	r.queue = append(r.queue, e)

	startLoop(t, r)
	waitFor(t, 10*time.Second, "three overruns", func() (bool, string) {
		v := reg.Value("oikos_scheduler_checks_overrun_total", "kind", "ssh-script/cpu")
		return v >= 3, fmt.Sprintf("overruns so far: %v", v)
	})
	r.life.Stop() // the loop and the worker
	exec.mu.Lock()
	calls := exec.calls
	exec.mu.Unlock()
	if calls != 1 {
		t.Errorf("%d runs started; the overrunning ones must be skipped", calls)
	}
	if st := r.Status(); st.OverrunsTotal < 3 || st.RunsTotal != 1 {
		t.Errorf("status %+v", st)
	}
}

// Stop is safe twice and before Start; a Start after Stop fails instead of running a loop
// nobody stops.
func TestStopBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop()}, &blockingExec{})
	r.Stop()
	r.Stop()
	if err := r.life.Start(context.Background(), zerolog.Nop(), "check-scheduler", r.loop); err == nil {
		t.Error("the loop started after Stop")
	}
}

// Lag quantiles are computed over the recorded runs.
func TestLagQuantiles(t *testing.T) {
	t.Parallel()
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop()}, &blockingExec{})
	for i := 1; i <= 100; i++ {
		r.recordLag(time.Duration(i) * time.Millisecond)
	}
	p50, p99, mx, n := r.lagQuantiles()
	if n != 100 || p50 != 0.05 || p99 != 0.099 || mx != 0.1 {
		t.Errorf("p50 %v p99 %v max %v n %d", p50, p99, mx, n)
	}
}
