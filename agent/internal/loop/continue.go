package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/tools"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// followed are the executions a chat turn left queued or running (pending approval, or not
// finished within the tool call): when one ends, its session's loop resumes (A7).
type followed struct {
	mu   sync.Mutex
	byID map[string]string // execution id -> session
}

// follow records an execution a turn handed off.
func (l *Loop) follow(session string, res tools.Result) {
	var e struct {
		ID          string `json:"id"`
		ExecutionID string `json:"execution_id"`
		Status      string `json:"status"`
	}
	if json.Unmarshal([]byte(res.Text), &e) != nil {
		return
	}
	id := e.ExecutionID
	if id == "" {
		id = e.ID
	}
	if id == "" || terminalStatus(e.Status) {
		return
	}
	l.pending.mu.Lock()
	if l.pending.byID == nil {
		l.pending.byID = map[string]string{}
	}
	l.pending.byID[id] = session
	l.pending.mu.Unlock()
}

func terminalStatus(s string) bool {
	switch s {
	case "completed", "failed", "timed_out", "interrupted", "denied", "revoked", "cancelled":
		return true
	}
	return false
}

// Continuer resumes sessions when the executions they handed off end.
type Continuer struct {
	loop *Loop
	sub  *eventbus.Subscription
	life startstop.Lifecycle
	log  zerolog.Logger
}

// NewContinuer subscribes to the execution events on bus (before it starts).
func NewContinuer(l *Loop, bus *eventbus.Bus, log zerolog.Logger) *Continuer {
	return &Continuer{loop: l, sub: bus.Subscribe(512, "execution."), log: log}
}

// Start runs it until Stop.
func (c *Continuer) Start(ctx context.Context) error {
	return c.life.Start(ctx, c.log, "loop-continuer", c.run)
}

// Stop ends it.
func (c *Continuer) Stop() {
	c.sub.Close()
	c.life.Stop()
}

func (c *Continuer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-c.sub.C:
			if !ok {
				return
			}
			c.loop.executionEvent(e)
		}
	}
}

// executionEvent resumes the session of a followed execution that ended, each on its own
// recovered goroutine (Continue), so sessions never wait on one another.
func (l *Loop) executionEvent(e eventbus.Event) {
	var p struct {
		ExecutionID string `json:"execution_id"`
		Status      string `json:"status"`
		Target      string `json:"target"`
		ExitCode    *int   `json:"exit_code"`
		Error       string `json:"error"`
	}
	if json.Unmarshal(e.Payload, &p) != nil || !terminalStatus(p.Status) {
		return
	}
	l.pending.mu.Lock()
	session, ok := l.pending.byID[p.ExecutionID]
	delete(l.pending.byID, p.ExecutionID)
	l.pending.mu.Unlock()
	if !ok || l.model == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "execution %s on %s ended: %s", p.ExecutionID, p.Target, p.Status)
	if p.ExitCode != nil {
		fmt.Fprintf(&b, " (exit code %d)", *p.ExitCode)
	}
	if p.Error != "" {
		fmt.Fprintf(&b, ": %s", p.Error)
	}
	b.WriteString(". Read it with get_execution and continue the task from where it stood.")
	l.Continue(session, b.String())
}
