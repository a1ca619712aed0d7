package loop

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/safego"
)

// lockedBuffer is the log the loop's goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// bareLoop is a loop without a task model, database or model: a turn that gets past its
// first event panics (a nil task service), which is what the tests below need.
func bareLoop(t *testing.T, log *lockedBuffer) *Loop {
	t.Helper()
	l := &Loop{log: zerolog.New(log), actor: "nomos"}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

// Stop waits for a turn still running, and the turn's own panic is answered as an error event.
func TestStopWaitsForARunningTurn(t *testing.T) {
	t.Parallel()
	var log lockedBuffer
	l := bareLoop(t, &log)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var names []string
	sink := func(e Event) {
		mu.Lock()
		names = append(names, e.Name)
		mu.Unlock()
		if e.Name == "session" {
			close(entered)
			<-release
		}
	}
	turned := make(chan struct{})
	go func() {
		defer close(turned)
		l.Turn(context.Background(), TurnRequest{SessionID: "s1", Message: "hi", MessageID: "m1"}, sink)
	}()
	<-entered
	stopped := make(chan struct{})
	go func() { l.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a turn was running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	for _, c := range []chan struct{}{stopped, turned} {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("Stop or the turn did not return once the turn could go on")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(names, ","); got != "session,error,done" {
		t.Errorf("events %s, want session,error,done", got)
	}
	// After Stop a turn runs nothing and says why.
	var after []Event
	l.Turn(context.Background(), TurnRequest{SessionID: "s2", MessageID: "m2"}, func(e Event) { after = append(after, e) })
	if len(after) != 3 || after[1].Name != "error" || !strings.Contains(after[1].Data.(map[string]any)["message"].(string), "shutting down") {
		t.Errorf("a turn after Stop: %+v", after)
	}
}

// A panic in a resumed session's turn (Continue) is recovered, logged and reported by Err;
// the agent goes on, and Stop waits for it.
func TestContinuePanicIsRecoveredAndReported(t *testing.T) {
	t.Parallel()
	var log lockedBuffer
	l := bareLoop(t, &log)
	if l.Err() != nil {
		t.Fatal("Err before any panic")
	}
	l.Continue("s1", "execution e1 ended")
	deadline := time.Now().Add(10 * time.Second)
	for l.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	var pe *safego.PanicError
	if err := l.Err(); !errors.As(err, &pe) || pe.Goroutine != "loop-continue" {
		t.Fatalf("Err after the panic: %v", err)
	}
	if s := log.String(); !strings.Contains(s, "recovered panic") || !strings.Contains(s, "loop-continue") {
		t.Errorf("log %q does not report the panic", s)
	}
	if !l.life.Running() {
		t.Fatal("the panic stopped the loop")
	}
	l.Stop()
	l.Continue("s1", "too late") // runs nothing, says so in the log
	if s := log.String(); !strings.Contains(s, "not continued") {
		t.Errorf("log %q does not say the session was not continued", s)
	}
}
