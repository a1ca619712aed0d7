package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oikos-hq/oikos/agent/internal/storage"
)

// gateKind says which workflow gates apply to a tool.
type gateKind int

const (
	_ gateKind = iota // zero: no gate (unnamed, so the others keep their values)
	// gateRun: a command on a machine (run). Plan-first and the retry cap apply.
	gateRun
	// gateAction: a typed action (request_execution). Plan-first applies: a typed action
	// changes something; read-only inspection goes through run.
	gateAction
	// gateTask: the task tools. Over MCP, set_goal, propose_plan, ask_operator and
	// complete_task start a new turn for the retry cap.
	gateTask
)

// RetryLimit is how many identical failing runs a turn allows (docs/behaviours.md A6): the
// next identical call is refused with an instruction to investigate.
const RetryLimit = 3

// gates holds the per-session state of the workflow rules. Nothing in it is shared between
// sessions: every key starts with the session id.
type gates struct {
	mu       sync.Mutex
	failures map[retryKey]int
	epochs   map[string]int // MCP turn counter per session
	touched  map[string]time.Time
}

type retryKey struct{ session, turn, target, command string }

func newGates() *gates {
	return &gates{failures: map[retryKey]int{}, epochs: map[string]int{}, touched: map[string]time.Time{}}
}

// runArgs are the arguments the run gates read.
type runArgs struct {
	target, command, declared string
}

func readRunArgs(c *Call) runArgs {
	return runArgs{target: argString(c.Args, "target"), command: argString(c.Args, "command"), declared: argString(c.Args, "declared_risk")}
}

// turnOf is the retry cap's turn: the chat turn, or over MCP the stretch between two task
// calls (set_goal, propose_plan, ask_operator, complete_task), which is where an MCP client
// hears from its operator.
func (g *gates) turnOf(c *Call) string {
	if c.Turn != "" {
		return c.Turn
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("mcp:%d", g.epochs[c.Session.ID])
}

func normaliseCommand(s string) string { return strings.Join(strings.Fields(s), " ") }

// before applies the gates that can refuse a call before it runs.
func (g *gates) before(ctx context.Context, c *Call) (Result, bool) {
	switch c.Tool.gate {
	case gateRun:
		a := readRunArgs(c)
		key := retryKey{c.Session.ID, g.turnOf(c), a.target, normaliseCommand(a.command)}
		g.mu.Lock()
		n := g.failures[key]
		g.mu.Unlock()
		if n >= RetryLimit {
			return Result{IsError: true, Render: "refusal", Text: fmt.Sprintf("refused (retry cap): `%s` on %s has failed %d times in this turn. "+
				"Do not run it again. Investigate why it fails instead: read the error output, then look at what holds it "+
				"(processes, locks, open files, mounts, permissions, disk space, logs: ps, lsof, fuser, journalctl, dmesg), "+
				"or tell the operator what blocks you with ask_operator. Nothing was queued.", a.command, a.target, n)}, false
		}
		return g.planFirst(ctx, c, a)
	case gateAction:
		return g.planFirst(ctx, c, runArgs{target: argString(c.Args, "target"), declared: "config_mutation"})
	}
	return Result{}, true
}

// planFirst refuses a run that is not read-only when the session has no live plan
// (docs/behaviours.md A4). The risk class is the api's own (POST /api/v1/classify), never the
// model's guess; the api's gate still decides what the run does.
func (g *gates) planFirst(ctx context.Context, c *Call, a runArgs) (Result, bool) {
	has, err := storage.HasLivePlan(ctx, c.deps.Pool, c.Session.ID)
	if err != nil {
		return Errorf("read the session's plan: %v", err), false
	}
	if has {
		return Result{}, true
	}
	risk := a.declared
	if c.Tool.gate == gateRun {
		cl, err := classify(ctx, c, a.target, a.command, a.declared)
		if err != nil {
			return apiError(err), false
		}
		if cl.ReadOnly {
			return Result{}, true
		}
		risk = cl.RiskClass
	}
	return Result{IsError: true, Render: "refusal", Text: fmt.Sprintf("refused (plan first): this is a %s step and the task has no plan. "+
		"Call propose_plan with your steps first (first step: research, read-only; last step: write back what you learned), "+
		"then run it as a step of that plan. Read-only commands need no plan. Nothing was queued.", risk)}, false
}

// after counts the failures of runs and advances the MCP turn on task calls.
func (g *gates) after(c *Call, res Result) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.touched[c.Session.ID] = time.Now()
	switch c.Tool.gate {
	case gateRun:
		if !res.IsError || res.Render == "refusal" {
			return
		}
		a := readRunArgs(c)
		turn := c.Turn
		if turn == "" {
			turn = fmt.Sprintf("mcp:%d", g.epochs[c.Session.ID])
		}
		g.failures[retryKey{c.Session.ID, turn, a.target, normaliseCommand(a.command)}]++
	case gateTask:
		if c.Turn == "" && c.Tool.Name != "update_plan_step" {
			g.epochs[c.Session.ID]++
		}
	}
	g.prune()
}

// prune forgets sessions not seen for a day, so the maps stay bounded. Called with mu held.
func (g *gates) prune() {
	if len(g.touched) < 4096 {
		return
	}
	cut := time.Now().Add(-24 * time.Hour)
	for s, at := range g.touched {
		if at.Before(cut) {
			delete(g.touched, s)
			delete(g.epochs, s)
		}
	}
	for k := range g.failures {
		if _, ok := g.touched[k.session]; !ok {
			delete(g.failures, k)
		}
	}
}
