// Package loop is Nomos's chat loop (docs/behaviours.md A1, A2, A5, A7): a turn takes the
// operator's message (recorded by the api, which hands over its id), relays the assent it
// proves, replays the session's history, and runs the model with the tool registry until the
// model answers without tools — at most MaxIterations times, then once without tools for a
// status summary. Events stream to the caller as the chat contract names them (session, delta,
// tool_use, tool_result, approval_required, plan, task, status, error, done); status says what
// Nomos waits on while no text streams (the model's first byte, a 429 or 503 retried).
//
// A turn runs on its own context: a client that disconnects does not stop it (the sink just
// drops what it cannot deliver). One turn per session at a time; several sessions at once.
//
// Every turn, the operator's and the ones Continue resumes, runs on a goroutine of the loop's
// lifecycle (shared/startstop): Stop cancels the turns still running and waits for them, and a
// panic is recovered, logged and reported by Err.
package loop

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/budget"
	"github.com/oikos-hq/oikos/agent/internal/llm"
	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/agent/internal/tasks"
	"github.com/oikos-hq/oikos/agent/internal/tools"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/startstop"
)

//go:embed SOUL.md
var defaultSoul string

// Defaults of the loop (docs/behaviours.md A1, A2).
const (
	MaxIterations  = 40
	historyLimit   = 200
	turnTimeout    = 15 * time.Minute
	snapshotBudget = 2 << 10
)

// Event is one chat event.
type Event struct {
	Name string
	Data any
}

// Sink receives a turn's events in order. It must not block for long; a client gone away
// makes it drop events, never stop the turn.
type Sink func(Event)

// Config configures the loop.
type Config struct {
	BaseURL, Model, APIKey string
	// SoulFile overrides the embedded SOUL.md (OIKOS_SOUL_FILE).
	SoulFile string
	// AgentToken is the agent's own api token: the loop's tools and relays use it.
	AgentToken string
	// Backoff are the waits before retrying a failed or empty model answer (A1: 4 s, 8 s);
	// tests shorten them.
	Backoff []time.Duration
	// Provider is the preset named by OIKOS_LLM_PROVIDER ("" none), for messages.
	Provider string
	// FirstByte bounds the wait for the model's first byte (OIKOS_LLM_FIRST_BYTE_TIMEOUT;
	// 0: the preset's, else llm.DefaultFirstByte). StatusAfter is how long before the chat
	// hears Nomos is waiting for the model (0: 3 s).
	FirstByte, StatusAfter time.Duration
	// RetryBase is the first back-off of a 429 or 503 (0: 1 s); tests shorten it.
	RetryBase time.Duration
	// Context is the model's context window and the room kept for its answer
	// (OIKOS_LLM_CONTEXT_TOKENS, OIKOS_LLM_ANSWER_TOKENS): every request is fitted to it.
	Context budget.Config
}

// Loop runs turns.
type Loop struct {
	cfg    Config
	model  *llm.Client
	reg    *tools.Registry
	tasks  *tasks.Service
	pool   *storage.Pool
	api    *apiclient.Client
	log    zerolog.Logger
	soul   string
	actor  string
	active sync.Map // session id -> *sync.Mutex: one turn per session

	pending followed
	life    startstop.Lifecycle // every turn's goroutine
	// defs are the registry's tools as the model sees them, built once: the registry does
	// not change while the agent runs.
	defs []openai.Tool
	// budget fits every request to the context window (agent/internal/budget); callable
	// are the names of every tool of defs, which it may offer fewer of.
	budget   *budget.Budgeter
	callable []string
}

// ErrNoModel is a chat without a configured model.
var ErrNoModel = errors.New("no language model is configured: set OIKOS_LLM_MODEL and OIKOS_LLM_BASE_URL, or OIKOS_LLM_PROVIDER (ollama, llamacpp, vllm, lmstudio, openai) for a local default, and OIKOS_LLM_API_KEY if the provider needs one")

// New builds the loop. Without a model configured it still builds: every turn answers
// ErrNoModel as an error event.
func New(cfg Config, reg *tools.Registry, t *tasks.Service, pool *storage.Pool, api *apiclient.Client, log zerolog.Logger) (*Loop, error) {
	l := &Loop{cfg: cfg, reg: reg, tasks: t, pool: pool, api: api, log: log, soul: defaultSoul, actor: "nomos"}
	l.defs = l.toolDefs()
	l.budget = budget.New(cfg.Context, l.defs)
	for _, d := range l.defs {
		l.callable = append(l.callable, d.Function.Name)
	}
	if cfg.SoulFile != "" {
		b, err := os.ReadFile(cfg.SoulFile)
		if err != nil {
			return nil, fmt.Errorf("OIKOS_SOUL_FILE: %w", err)
		}
		l.soul = string(b)
	}
	if cfg.Backoff == nil {
		l.cfg.Backoff = []time.Duration{4 * time.Second, 8 * time.Second}
	}
	if cfg.BaseURL != "" && cfg.Model != "" {
		l.model = llm.New(llm.Config{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Model: cfg.Model, Provider: cfg.Provider,
			FirstByte: cfg.FirstByte, StatusAfter: cfg.StatusAfter, RetryBase: cfg.RetryBase, Log: log})
	}
	return l, nil
}

// Start opens the loop for turns until Stop (or until ctx ends). Turn and Continue run
// nothing before Start.
func (l *Loop) Start(ctx context.Context) error {
	return l.life.Start(ctx, l.log, "loop", func(ctx context.Context) { <-ctx.Done() })
}

// Stop cancels the turns still running and waits for every one to return. Safe twice.
func (l *Loop) Stop() { l.life.Stop() }

// Err reports the panics recovered in the loop's goroutines (nil when none).
func (l *Loop) Err() error { return l.life.Err() }

// Configured reports whether a model is set.
func (l *Loop) Configured() bool { return l.model != nil }

// Recover marks the messages a previous process left streaming as interrupted, and follows
// again the executions open chat sessions handed off: one that ended while the agent was
// down resumes its session now, the others when their end event arrives.
func (l *Loop) Recover(ctx context.Context) error {
	n, err := storage.InterruptStreaming(ctx, l.pool)
	if err != nil {
		return err
	}
	if n > 0 {
		l.log.Warn().Int64("messages", n).Msg("turns cut short by a restart marked interrupted")
	}
	calls, err := storage.HandedOff(ctx, l.pool)
	if err != nil {
		return err
	}
	for _, c := range calls {
		l.follow(c.SessionID, tools.Result{Text: c.Result, Render: c.Render})
	}
	if l.cfg.AgentToken == "" {
		return nil
	}
	l.pending.mu.Lock()
	ids := make(map[string]string, len(l.pending.byID))
	for id, s := range l.pending.byID {
		ids[id] = s
	}
	l.pending.mu.Unlock()
	for id, session := range ids {
		if done, err := storage.Reported(ctx, l.pool, session, id); err != nil || done {
			l.pending.mu.Lock()
			delete(l.pending.byID, id)
			l.pending.mu.Unlock()
			continue
		}
		e, err := apiclient.Decode[struct {
			Status   string `json:"status"`
			Target   string `json:"target"`
			ExitCode *int   `json:"exit_code"`
			Error    string `json:"error"`
		}](l.api.API().GetExecution(ctx, id, apiclient.As(l.cfg.AgentToken, session)...))
		if err != nil {
			l.log.Warn().Err(err).Str("execution", id).Msg("follow a handed-off execution")
			continue
		}
		if terminalStatus(e.Status) {
			payload, _ := json.Marshal(map[string]any{"execution_id": id, "status": e.Status, "target": e.Target, "exit_code": e.ExitCode, "error": e.Error})
			l.executionEvent(eventbus.Event{Type: "execution." + e.Status, CorrelationID: session, Payload: payload})
		}
	}
	return nil
}

// TurnRequest is one operator message, as the api forwards it.
type TurnRequest struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	MessageID string `json:"message_id"` // the api's record of the message
	Actor     string `json:"actor"`      // the operator's token name
	Role      string `json:"role"`       // the operator's token role
}

// Turn runs one turn to its end, sending events to sink, on a goroutine of the loop's
// lifecycle, and waits for it. The turn is detached from ctx's cancellation (a client that
// leaves does not stop it) but bounded by turnTimeout, and ended by Stop.
func (l *Loop) Turn(ctx context.Context, req TurnRequest, sink Sink) {
	done := make(chan struct{})
	if !l.life.Go("loop-turn", func(life context.Context) {
		defer close(done)
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), turnTimeout)
		defer cancel()
		defer context.AfterFunc(life, cancel)()
		l.runTurn(tctx, req, sink)
	}) {
		sink(Event{"session", map[string]any{"session_id": req.SessionID, "message_id": req.MessageID}})
		sink(Event{"error", map[string]any{"message": "the agent is shutting down; send the message again once it is back"}})
		sink(Event{"done", map[string]any{"finish_reason": "error"}})
		return
	}
	<-done
}

// runTurn is Turn on the turn's goroutine.
func (l *Loop) runTurn(ctx context.Context, req TurnRequest, sink Sink) {
	sink(Event{"session", map[string]any{"session_id": req.SessionID, "message_id": req.MessageID}})
	mu := l.lock(req.SessionID)
	mu.Lock()
	defer mu.Unlock()
	finish := "stop"
	defer func() {
		if p := recover(); p != nil {
			l.log.Error().Interface("panic", p).Str("session", req.SessionID).Msg("turn panicked")
			sink(Event{"error", map[string]any{"message": "the turn failed unexpectedly; the failure is logged"}})
			finish = "error"
		}
		sink(Event{"done", map[string]any{"finish_reason": finish}})
	}()
	finish = l.turn(ctx, req, sink, "user")
}

// Continue resumes a session's loop with a note (a queued execution finished, an approval
// was decided: A7), on its own goroutine of the loop's lifecycle, events discarded.
func (l *Loop) Continue(session, note string) {
	ok := l.life.Go("loop-continue", func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, turnTimeout)
		defer cancel()
		mu := l.lock(session)
		mu.Lock()
		defer mu.Unlock()
		l.turn(ctx, TurnRequest{SessionID: session, Message: note, Actor: "oikos"}, func(Event) {}, "note")
	})
	if !ok {
		l.log.Warn().Str("session", session).Msg("the loop is stopped: the session is not continued")
	}
}

func (l *Loop) lock(session string) *sync.Mutex {
	m, _ := l.active.LoadOrStore(session, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// turn is a turn under the session's lock; it returns the finish reason.
func (l *Loop) turn(ctx context.Context, req TurnRequest, sink Sink, role string) string {
	who := tasks.Who{Session: req.SessionID, Actor: l.actor, Source: "chat"}
	if _, err := l.tasks.Ensure(ctx, who); err != nil {
		sink(Event{"error", storeFailure("session", err)})
		return "error"
	}
	turnID := uuid.NewString()
	var notes []string
	if role == "user" {
		prevUser, err := storage.LastUserAt(ctx, l.pool, req.SessionID)
		if err != nil {
			sink(Event{"error", storeFailure("read the session", err)})
			return "error"
		}
		if reopened, err := l.tasks.Reopen(ctx, who); err == nil && reopened {
			sink(Event{"task", l.taskEvent(ctx, req.SessionID)})
		}
		notes = l.relayAssent(ctx, req, prevUser)
		if err := l.tasks.Resume(ctx, who); err != nil {
			l.log.Warn().Err(err).Msg("resume after answer")
		}
	}
	if _, _, err := storage.AddMessage(ctx, l.pool, req.SessionID, role, req.Message, turnID, req.MessageID); err != nil {
		sink(Event{"error", storeFailure("store the message", err)})
		return "error"
	}
	if l.model == nil {
		sink(Event{"error", map[string]any{"message": ErrNoModel.Error()}})
		return "error"
	}
	msgs, err := l.context(ctx, req.SessionID, notes)
	if err != nil {
		sink(Event{"error", storeFailure("build the context", err)})
		return "error"
	}
	caller := tools.Caller{Session: req.SessionID, Turn: turnID, Token: l.cfg.AgentToken, Actor: l.actor, Role: tools.RoleAgent, Source: "chat"}
	// harder is set once the server refused a request as too long: the turn's later
	// requests are fitted to the server's own figures too.
	var harder *budget.Harder
	for i := 0; i <= MaxIterations; i++ {
		withTools := i < MaxIterations
		if !withTools {
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem,
				Content: "You have used every tool iteration of this turn. Without tools, tell the operator where the task stands: what is done, what is left, what you need from them."})
		}
		mid, err := storage.StartAssistant(ctx, l.pool, req.SessionID, turnID)
		if err != nil {
			sink(Event{"error", map[string]any{"message": err.Error()}})
			return "error"
		}
		ans, err := l.askFitted(ctx, req.SessionID, msgs, withTools, &harder, sink)
		if err != nil {
			_ = storage.FinishMessage(ctx, l.pool, mid, ans.Content, storage.MessageComplete, "error")
			_ = storage.DeleteEmpty(ctx, l.pool, mid)
			sink(Event{"error", map[string]any{"message": err.Error()}})
			return "error"
		}
		if err := storage.FinishMessage(ctx, l.pool, mid, ans.Content, storage.MessageComplete, ans.Finish); err != nil {
			l.log.Error().Err(err).Msg("store assistant message")
		}
		if len(ans.Calls) == 0 {
			_ = storage.DeleteEmpty(ctx, l.pool, mid)
			return ans.Finish
		}
		assistant := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: ans.Content}
		caller.Message = mid
		results := l.runTools(ctx, caller, ans.Calls, sink)
		for i, c := range ans.Calls {
			assistant.ToolCalls = append(assistant.ToolCalls, openai.ToolCall{ID: results[i].id, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}})
		}
		msgs = append(msgs, assistant)
		for _, r := range results {
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: r.id, Content: r.text})
		}
	}
	return "length"
}

type toolOutcome struct {
	id   string
	text string
}

// runTools runs one iteration's tool calls in parallel, each on a goroutine of the loop's
// lifecycle (recovered), and answers their results in the order of the calls.
func (l *Loop) runTools(ctx context.Context, caller tools.Caller, calls []modelCall, sink Sink) []toolOutcome {
	out := make([]toolOutcome, len(calls))
	var wg sync.WaitGroup
	var sinkMu sync.Mutex
	emit := func(e Event) { sinkMu.Lock(); sink(e); sinkMu.Unlock() }
	for i, c := range calls {
		out[i].id = uuid.NewString()
		emit(Event{"tool_use", map[string]any{"id": out[i].id, "name": c.Name, "arguments": json.RawMessage(validJSON(c.Arguments))}})
	}
	for i, c := range calls {
		wg.Add(1)
		cl := caller
		cl.CallID = out[i].id
		run := func(context.Context) {
			defer wg.Done()
			res := l.reg.Call(ctx, cl, c.Name, json.RawMessage(c.Arguments))
			out[i].text = res.Text
			emit(Event{"tool_result", map[string]any{"id": out[i].id, "name": c.Name, "content": res.Text, "is_error": res.IsError, "render": res.Render}})
			l.emitFollowUps(ctx, caller.Session, c.Name, res, emit)
			if res.Render == "approval" || res.Render == "execution" {
				l.follow(caller.Session, res)
			}
		}
		if !l.life.Go("loop-tool", run) {
			run(ctx) // the loop is stopping: the turn's context ends the call soon
		}
	}
	wg.Wait()
	return out
}

// emitFollowUps sends the contract's approval_required, plan and task events a result implies.
func (l *Loop) emitFollowUps(ctx context.Context, session, name string, res tools.Result, emit func(Event)) {
	if res.IsError {
		return
	}
	switch {
	case res.Render == "approval":
		var a struct {
			ApprovalID  string `json:"approval_id"`
			ExecutionID string `json:"execution_id"`
			RiskClass   string `json:"risk_class"`
			Target      string `json:"target"`
			Command     string `json:"command"`
		}
		_ = json.Unmarshal([]byte(res.Text), &a)
		emit(Event{"approval_required", a})
	case name == "propose_plan":
		var p struct {
			Generation int `json:"generation"`
			Steps      []struct {
				Index  int    `json:"index"`
				Text   string `json:"text"`
				Status string `json:"status"`
			} `json:"steps"`
		}
		_ = json.Unmarshal([]byte(res.Text), &p)
		for i := range p.Steps {
			p.Steps[i].Index++
		}
		emit(Event{"plan", p})
	case name == "set_goal" || name == "complete_task" || name == "ask_operator":
		emit(Event{"task", l.taskEvent(ctx, session)})
	}
}

func (l *Loop) taskEvent(ctx context.Context, session string) map[string]any {
	s, err := l.tasks.Session(ctx, session)
	if err != nil {
		return map[string]any{"status": "", "goal": ""}
	}
	return map[string]any{"status": s.Status, "goal": s.Goal, "outcome": s.Outcome, "blocker": s.Blocker}
}

// toolDefs are the registry's tools as the model sees them.
func (l *Loop) toolDefs() []openai.Tool {
	var out []openai.Tool
	for _, t := range l.reg.For(tools.RoleAgent) {
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: json.RawMessage(t.Schema)}})
	}
	return out
}

func validJSON(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// storeFailure is the error event of a turn that could not read or write its session. While
// the database is away the turn stops before anything of it is stored (the session stays as
// it was) and the operator is told to send the message again once the database is back,
// rather than shown a driver's error.
func storeFailure(what string, err error) map[string]any {
	if pg.IsUnavailable(err) {
		return map[string]any{"message": "the database is unreachable, so this turn was not run (" + what +
			"); nothing of it was stored: send the message again once the database is back", "retryable": true}
	}
	return map[string]any{"message": what + ": " + err.Error()}
}
