package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/syncbuf"
)

func fastRestarts(t *testing.T) {
	first, limit, stable, quick := restartFirst, restartMax, stableAfter, maxQuickExits
	restartFirst, restartMax, stableAfter, maxQuickExits = 20*time.Millisecond, 100*time.Millisecond, time.Second, 3
	t.Cleanup(func() { restartFirst, restartMax, stableAfter, maxQuickExits = first, limit, stable, quick })
}

func newTestStack(t *testing.T) (*Stack, *syncbuf.Buffer) {
	out := &syncbuf.Buffer{}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, ".local"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := &Stack{opts: Options{Root: root, Stdout: out}}
	return s, out
}

// TestSuperviseRestartsAKilledDaemon: `kill -9` of one daemon restarts it (a log line says
// so and the pids file names the new process); the others are untouched; Ctrl-C (the
// context) ends supervision and Down stops everything.
func TestSuperviseRestartsAKilledDaemon(t *testing.T) {
	fastRestarts(t)
	s, out := newTestStack(t)
	for _, name := range []string{"steady", "victim"} {
		if err := s.spawn(name, "/bin/sh", []string{"-c", "exec sleep 60"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	defer s.Down()
	steady, victim := s.children[0].cmd.Process.Pid, s.children[1].cmd.Process.Pid
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- s.Wait(ctx) }()

	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "victim restarted") {
		if time.Now().After(deadline) {
			t.Fatalf("victim was not restarted:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "victim exited (signal: killed)") {
		t.Errorf("no log line saying why it restarted:\n%s", out.String())
	}
	s.mu.Lock()
	newPid := s.children[1].cmd.Process.Pid
	s.mu.Unlock()
	if newPid == victim {
		t.Fatal("the restarted victim has the old pid")
	}
	if err := syscall.Kill(steady, 0); err != nil {
		t.Errorf("the steady daemon was disturbed: %v", err)
	}
	if err := syscall.Kill(newPid, 0); err != nil {
		t.Errorf("the restarted victim is not running: %v", err)
	}
	if pids, err := os.ReadFile(filepath.Join(s.opts.Root, ".local", "pids")); err != nil || !strings.Contains(string(pids), fmt.Sprintf("victim %d\n", newPid)) {
		t.Errorf("the pids file does not name the new victim %d: %q %v", newPid, pids, err)
	}
	cancel()
	if err := <-waited; err != nil {
		t.Fatalf("Wait after Ctrl-C: %v", err)
	}
	s.Down()
	for _, pid := range []int{steady, newPid} {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("pid %d still runs after Down", pid)
		}
	}
}

// TestSuperviseGivesUpOnADaemonFailingAtStart: one that keeps exiting right after it starts
// is restarted with back-off and then given up on, with an error naming it, so the stack is
// stopped instead of spinning.
func TestSuperviseGivesUpOnADaemonFailingAtStart(t *testing.T) {
	fastRestarts(t)
	s, out := newTestStack(t)
	if err := s.spawn("broken", "/bin/sh", []string{"-c", "echo bad config >&2; exit 3"}, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Down()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "broken keeps failing") || !strings.Contains(err.Error(), "3 times") {
		t.Fatalf("Wait: %v, want broken given up on after 3 quick exits\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "restarting it in"); n != 2 {
		t.Errorf("%d restarts logged, want 2 before giving up:\n%s", n, out.String())
	}
}
