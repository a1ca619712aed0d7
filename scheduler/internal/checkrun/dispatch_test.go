package checkrun

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/probeparse"
	"github.com/oikos-hq/oikos/shared/remote"
)

// inFlightExec blocks every command until its context ends and records how many ran at once.
type inFlightExec struct {
	mu            sync.Mutex
	now, maxSoFar int
}

func (x *inFlightExec) Exec(ctx context.Context, _ remote.Target, _ string, _ io.Writer) (remote.Result, error) {
	x.mu.Lock()
	x.now++
	x.maxSoFar = max(x.maxSoFar, x.now)
	x.mu.Unlock()
	<-ctx.Done()
	x.mu.Lock()
	x.now--
	x.mu.Unlock()
	return remote.Result{}, ctx.Err()
}

func (x *inFlightExec) Probe(ctx context.Context, t remote.Target, command string) (remote.Result, error) {
	return x.Exec(ctx, t, command, nil)
}

func (x *inFlightExec) OpenConnections() int { return 1 }

// Runs go to at most Concurrency workers: with every worker busy the next due check waits
// (counted as due), no goroutine beyond the cap is started, and Stop's cancellation ends
// the workers.
func TestConcurrencyCapsWorkers(t *testing.T) {
	t.Parallel()
	exec := &inFlightExec{}
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), Concurrency: 2}, exec)
	now := time.Now()
	for i := 0; i < 5; i++ {
		d := &checkDef{ID: fmt.Sprintf("c%d", i), Slug: fmt.Sprintf("check:host.h%d.ssh-script.cpu", i), TargetID: "t", TargetSlug: "host:h",
			Kind: "ssh-script", Interval: time.Hour, Timeout: time.Hour, spec: probeparse.Spec{Script: "cpu", OS: "linux"}}
		e := &entry{}
		e.def.Store(d)
		e.base, e.due = now, now
		r.entries[d.ID] = e
		heap.Push(&r.queue, e)
	}
	startLoop(t, r)
	// Two run, one waits in the dispatcher for a worker, two wait in the queue.
	waitFor(t, 10*time.Second, "two running and two due", func() (bool, string) {
		st := r.Status()
		return st.ChecksRunning == 2 && st.ChecksDue == 2, fmt.Sprintf("running %d, due %d", st.ChecksRunning, st.ChecksDue)
	})
	exec.mu.Lock()
	peak := exec.maxSoFar
	exec.mu.Unlock()
	if peak != 2 {
		t.Errorf("%d probes ran at once with Concurrency 2", peak)
	}
	r.life.Stop()
	if r.workers != 2 {
		t.Errorf("%d workers started, want 2", r.workers)
	}
}

// A run may start early by at most half the jitter its interval allows, and never more than
// maxSlack.
func TestSlack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		interval, want time.Duration
	}{
		{50 * time.Millisecond, 1250 * time.Microsecond},
		{time.Second, 25 * time.Millisecond},
		{2 * time.Second, 50 * time.Millisecond},
		{10 * time.Second, 250 * time.Millisecond},
		{time.Minute, 500 * time.Millisecond},
		{time.Hour, 500 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := slack(tc.interval); got != tc.want {
			t.Errorf("slack(%s) = %s, want %s", tc.interval, got, tc.want)
		}
		if got := slack(tc.interval); got > min(tc.interval/20, maxJitter) {
			t.Errorf("slack(%s) = %s exceeds the jitter bound", tc.interval, got)
		}
	}
}

// Checks falling due within the slack of one that is due start in the same wake-up; one
// due later does not.
func TestDueChecksWithinSlackStartTogether(t *testing.T) {
	t.Parallel()
	exec := &inFlightExec{}
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), Concurrency: 8}, exec)
	now := time.Now()
	for i, offset := range []time.Duration{0, 10 * time.Millisecond, 40 * time.Millisecond, 10 * time.Minute} {
		d := &checkDef{ID: fmt.Sprintf("c%d", i), Slug: fmt.Sprintf("check:host.h%d.ssh-script.cpu", i), TargetID: "t", TargetSlug: "host:h",
			Kind: "ssh-script", Interval: time.Hour, Timeout: time.Hour, spec: probeparse.Spec{Script: "cpu", OS: "linux"}}
		e := &entry{}
		e.def.Store(d)
		e.base, e.due = now.Add(offset), now.Add(offset)
		r.entries[d.ID] = e
		heap.Push(&r.queue, e)
	}
	// A loop that only waits: the workers run under its context.
	if err := r.life.Start(context.Background(), zerolog.Nop(), "idle-loop", func(ctx context.Context) { <-ctx.Done() }); err != nil {
		t.Fatal(err)
	}
	r.dispatchDue(context.Background()) // what the loop does when the first falls due
	waitFor(t, 10*time.Second, "three started", func() (bool, string) {
		exec.mu.Lock()
		defer exec.mu.Unlock()
		return exec.now == 3, fmt.Sprintf("%d started", exec.now)
	})
	r.life.Stop()
	if r.workers != 3 {
		t.Errorf("%d runs started in one wake-up, want the 3 within 50 ms (not the one due in 10 min)", r.workers)
	}
}

// A unit just taken over has its checks run within 2 s, not at the next cycle its schedule
// had while another scheduler held it; checks of other units keep their schedule.
func TestAcquiredRunsTakenUnitsSoon(t *testing.T) {
	t.Parallel()
	exec := &inFlightExec{}
	held := map[string]bool{"host:host:mine": true}
	var mu sync.Mutex
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), Concurrency: 4, Holder: "s1",
		Lease: func(u string) (int64, bool) { mu.Lock(); defer mu.Unlock(); return 1, held[u] }}, exec)
	now := time.Now()
	for i, unit := range []string{"host:host:mine", "host:host:taken", "host:host:other"} {
		d := &checkDef{ID: fmt.Sprintf("c%d", i), Slug: fmt.Sprintf("check:host.h%d.ssh-script.cpu", i), TargetID: "t", TargetSlug: "host:h",
			Kind: "ssh-script", Interval: time.Hour, Timeout: time.Hour, Unit: unit, spec: probeparse.Spec{Script: "cpu", OS: "linux"}}
		e := &entry{}
		e.def.Store(d)
		e.base, e.due = now.Add(time.Hour), now.Add(time.Hour) // next cycle in an hour
		r.entries[d.ID] = e
		heap.Push(&r.queue, e)
	}
	startLoop(t, r)
	mu.Lock()
	held["host:host:taken"] = true
	mu.Unlock()
	r.Acquired([]string{"host:host:taken"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		exec.mu.Lock()
		n := exec.now
		exec.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d checks running 5 s after the unit was taken, want 1 (the taken unit's)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	exec.mu.Lock()
	defer exec.mu.Unlock()
	if exec.maxSoFar != 1 {
		t.Fatalf("%d ran, want only the taken unit's check", exec.maxSoFar)
	}
}
