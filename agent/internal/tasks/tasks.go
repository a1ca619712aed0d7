// Package tasks is the agent's task model (docs/behaviours.md A3): a session works on one goal
// at a time, proposes a plan of steps in generations, advances the steps, asks the operator,
// and completes with an outcome. It also keeps the session's status honest: a task that waits
// on an approval is awaiting_input until the api decides, and the idle sweep never closes it.
//
// Every change is one transaction on the session's locked row with its audit row (shared/audit)
// and its events (shared/eventbus): task.status on every status change, task.superseded when a
// goal replaces another, task.plan and task.step for the plan.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Outcomes of complete_task.
const (
	OutcomeSuccess = "success"
	OutcomePartial = "partial"
	OutcomeFailed  = "failed"
)

// Blockers derived when a task does not succeed.
const (
	BlockerApprovalTimeout     = "approval_timeout"
	BlockerUserAbandoned       = "user_abandoned"
	BlockerClassifierOverreach = "classifier_overreach"
	BlockerModelRefusal        = "model_refusal"
	BlockerToolError           = "tool_error"
)

// Limits on what a plan may hold.
const (
	MaxSteps    = 20
	MaxStepLen  = 500
	MaxGoalLen  = 2000
	priorWindow = 24 * time.Hour
)

// ErrAlreadyComplete refuses a second completion; the session is unchanged.
var ErrAlreadyComplete = errors.New("task is already complete: do not call complete_task again; " +
	"if the operator pointed out something left undone, set a new goal or propose a new plan, which reopens the task")

// ErrInvalid is input the task model refuses; the message says what to do instead.
var ErrInvalid = errors.New("invalid")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Who is the caller of a task operation.
type Who struct {
	Session string
	Actor   string // token name
	Source  string // chat or mcp
}

// Service runs the task model on the agent's tables.
type Service struct {
	pool *storage.Pool
	now  func() time.Time
}

// New returns the service.
func New(pool *storage.Pool) *Service { return &Service{pool: pool, now: time.Now} }

// Ensure creates the session on first use (an MCP session on its first tool call, a chat
// session on its first turn) and returns it.
func (s *Service) Ensure(ctx context.Context, w Who) (storage.Session, error) {
	var out storage.Session
	err := storage.InTx(ctx, s.pool, func(tx storage.DB) error {
		sess, created, err := storage.EnsureSession(ctx, tx, w.Session, w.Actor, w.Source)
		if err != nil {
			return err
		}
		out = sess
		if !created {
			return nil
		}
		return s.record(ctx, tx, w, "task.open", nil, sess, statusEvent("", sess))
	})
	return out, err
}

// Session reads a session.
func (s *Service) Session(ctx context.Context, id string) (storage.Session, error) {
	return storage.GetSession(ctx, s.pool, id, false)
}

// Steps lists the current plan of a session.
func (s *Service) Steps(ctx context.Context, sess storage.Session) ([]storage.Step, error) {
	if sess.PlanGeneration == 0 {
		return []storage.Step{}, nil
	}
	return storage.Steps(ctx, s.pool, sess.ID, sess.PlanGeneration)
}

// GoalResult is what set_goal answers.
type GoalResult struct {
	Session    storage.Session     `json:"session"`
	Superseded string              `json:"superseded_goal,omitempty"`
	Reopened   bool                `json:"reopened,omitempty"`
	Prior      []storage.PriorTask `json:"prior_tasks"`
}

// SetGoal sets the session's goal (and the slug of the graph's task entity for it). A
// different goal replacing one emits task.superseded; a closed session is reopened. The
// answer lists the last 24 h of partial or failed tasks about the targets the goal names.
func (s *Service) SetGoal(ctx context.Context, w Who, goal, task string) (GoalResult, error) {
	goal = strings.TrimSpace(goal)
	if goal == "" {
		return GoalResult{}, invalid("goal is empty: say what the task is for in one sentence")
	}
	if len(goal) > MaxGoalLen {
		return GoalResult{}, invalid("goal is %d bytes; keep it under %d", len(goal), MaxGoalLen)
	}
	var res GoalResult
	err := s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		if sess.Closed() {
			if err := s.reopen(ctx, tx, sess, ev); err != nil {
				return "", err
			}
			res.Reopened = true
		}
		if sess.Goal != "" && !strings.EqualFold(sess.Goal, goal) {
			res.Superseded = sess.Goal
			*ev = append(*ev, event(w, "task.superseded", map[string]any{
				"session_id": sess.ID, "previous_goal": sess.Goal, "previous_task": sess.Task, "goal": goal, "task": task,
			}))
		}
		sess.Goal, sess.Title = goal, title(goal)
		if task != "" {
			sess.Task = task
		}
		prior, err := storage.PriorTasks(ctx, tx, sess.ID, s.now().Add(-priorWindow), 50)
		if err != nil {
			return "", err
		}
		res.Prior = aboutTargets(prior, goal)
		return "task.goal", nil
	})
	res.Session = s.mustRead(ctx, w.Session, err)
	return res, err
}

// PlanResult is what propose_plan answers.
type PlanResult struct {
	Generation int            `json:"generation"`
	Steps      []storage.Step `json:"steps"`
	Replaced   int64          `json:"replaced_steps,omitempty"`
	Reopened   bool           `json:"reopened,omitempty"`
}

// ProposePlan records a new plan generation: the first step researches, the last writes back
// what was learned. Earlier generations' steps become replaced.
func (s *Service) ProposePlan(ctx context.Context, w Who, steps []string) (PlanResult, error) {
	clean, err := checkPlan(steps)
	if err != nil {
		return PlanResult{}, err
	}
	var res PlanResult
	err = s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		if sess.Closed() {
			if err := s.reopen(ctx, tx, sess, ev); err != nil {
				return "", err
			}
			res.Reopened = true
		}
		sess.PlanGeneration++
		now := s.now()
		sess.PlanProposedAt = &now
		n, err := storage.ReplaceSteps(ctx, tx, sess.ID, sess.PlanGeneration)
		if err != nil {
			return "", err
		}
		if err := storage.InsertSteps(ctx, tx, sess.ID, sess.PlanGeneration, clean); err != nil {
			return "", err
		}
		res.Generation, res.Replaced = sess.PlanGeneration, n
		*ev = append(*ev, event(w, "task.plan", map[string]any{
			"session_id": sess.ID, "generation": sess.PlanGeneration, "steps": clean, "replaced_steps": n,
		}))
		return "task.plan", nil
	})
	if err != nil {
		return res, err
	}
	res.Steps, err = storage.Steps(ctx, s.pool, w.Session, res.Generation)
	return res, err
}

// stepMoves are the allowed step transitions.
var stepMoves = map[string][]string{
	storage.StepPending: {storage.StepRunning, storage.StepDone, storage.StepSkipped},
	storage.StepRunning: {storage.StepDone, storage.StepSkipped},
}

// UpdateStep moves step `number` (1-based) of the current plan to status.
func (s *Service) UpdateStep(ctx context.Context, w Who, number int, status, note string) (storage.Step, error) {
	if status != storage.StepRunning && status != storage.StepDone && status != storage.StepSkipped {
		return storage.Step{}, invalid("status %q: want running, done or skipped", status)
	}
	var out storage.Step
	err := s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		if sess.PlanGeneration == 0 {
			return "", invalid("there is no plan yet: call propose_plan first")
		}
		steps, err := storage.Steps(ctx, tx, sess.ID, sess.PlanGeneration)
		if err != nil {
			return "", err
		}
		if number < 1 || number > len(steps) {
			return "", invalid("step %d: the current plan (generation %d) has steps 1 to %d", number, sess.PlanGeneration, len(steps))
		}
		st := steps[number-1]
		ok := false
		for _, to := range stepMoves[st.Status] {
			ok = ok || to == status
		}
		if !ok {
			return "", invalid("step %d is %s; it cannot become %s (advance the next step instead)", number, st.Status, status)
		}
		if err := storage.SetStep(ctx, tx, sess.ID, sess.PlanGeneration, number-1, status, strings.TrimSpace(note)); err != nil {
			return "", err
		}
		st.Status = status
		if note != "" {
			st.Note = strings.TrimSpace(note)
		}
		out = st
		*ev = append(*ev, event(w, "task.step", map[string]any{
			"session_id": sess.ID, "generation": sess.PlanGeneration, "step": number, "status": status,
		}))
		return "task.step", nil
	})
	return out, err
}

// CompleteResult is what complete_task answers.
type CompleteResult struct {
	Session       storage.Session `json:"session"`
	ClosedSteps   int64           `json:"closed_steps"`
	StepsClosedAs string          `json:"steps_closed_as,omitempty"`
}

// Complete ends the task with an outcome and a summary: pending and running steps become done
// on success and skipped otherwise; a task that did not succeed gets a derived blocker. A
// second completion is ErrAlreadyComplete and changes nothing.
func (s *Service) Complete(ctx context.Context, w Who, outcome, summary string) (CompleteResult, error) {
	if outcome != OutcomeSuccess && outcome != OutcomePartial && outcome != OutcomeFailed {
		return CompleteResult{}, invalid("outcome %q: want success, partial or failed", outcome)
	}
	summary = strings.TrimSpace(summary)
	if summary == "" {
		return CompleteResult{}, invalid("summary is empty: say what was done and what is left")
	}
	var res CompleteResult
	err := s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		if sess.Closed() {
			return "", ErrAlreadyComplete
		}
		if sess.PlanGeneration > 0 {
			as := storage.StepDone
			if outcome != OutcomeSuccess {
				as = storage.StepSkipped
			}
			n, err := storage.CloseSteps(ctx, tx, sess.ID, sess.PlanGeneration, as)
			if err != nil {
				return "", err
			}
			res.ClosedSteps, res.StepsClosedAs = n, as
		}
		blocker := ""
		if outcome != OutcomeSuccess {
			last, err := storage.LastAssistantText(ctx, tx, sess.ID)
			if err != nil {
				return "", err
			}
			calls, err := storage.ToolCalls(ctx, tx, sess.ID)
			if err != nil {
				return "", err
			}
			blocker = DeriveBlocker(summary, last, calls)
		}
		now := s.now()
		sess.Outcome, sess.Summary, sess.Blocker, sess.ClosedAt, sess.Awaiting = outcome, summary, blocker, &now, ""
		sess.Status = storage.StatusCompleted
		if outcome == OutcomeFailed {
			sess.Status = storage.StatusFailed
		}
		return "task.complete", nil
	})
	res.Session = s.mustRead(ctx, w.Session, err)
	return res, err
}

// Question is what ask_operator answers.
type Question struct {
	ID       int64    `json:"question_id"`
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
}

// Ask records a question to the operator; the task waits for the answer (awaiting_input).
func (s *Service) Ask(ctx context.Context, w Who, question string, options []string) (Question, error) {
	question = strings.TrimSpace(question)
	if question == "" {
		return Question{}, invalid("question is empty")
	}
	var q Question
	err := s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		id, err := storage.InsertQuestion(ctx, tx, sess.ID, question, options)
		if err != nil {
			return "", err
		}
		q = Question{ID: id, Question: question, Options: options}
		if !sess.Closed() && sess.Awaiting != "approval" {
			sess.Status, sess.Awaiting = storage.StatusAwaitingInput, "question"
		}
		*ev = append(*ev, event(w, "task.question", map[string]any{"session_id": sess.ID, "question_id": id, "question": question}))
		return "task.ask", nil
	})
	return q, err
}

// AwaitApproval marks the task as waiting on a pending approval of the api.
func (s *Service) AwaitApproval(ctx context.Context, w Who, approvalID string) error {
	return s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		if sess.Closed() {
			return "", nil
		}
		sess.Status, sess.Awaiting = storage.StatusAwaitingInput, "approval"
		return "task.await_approval", nil
	})
}

// Resume moves a task that waited on a question back to executing (the caller went on). A
// task that waits on an approval stays: only the api's decision moves it.
func (s *Service) Resume(ctx context.Context, w Who) error {
	sess, err := storage.GetSession(ctx, s.pool, w.Session, false)
	if err != nil || sess.Status != storage.StatusAwaitingInput || sess.Awaiting != "question" {
		return err
	}
	return s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		if sess.Status == storage.StatusAwaitingInput && sess.Awaiting == "question" {
			sess.Status, sess.Awaiting = storage.StatusExecuting, ""
			return "task.resume", nil
		}
		return "", nil
	})
}

// Decided is the api's decision on an approval of session id (event approval.decided): a task
// waiting on it goes back to executing.
func (s *Service) Decided(ctx context.Context, session, decidedBy, decision string) error {
	w := Who{Session: session, Actor: decidedBy}
	err := s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		if sess.Status != storage.StatusAwaitingInput || sess.Awaiting != "approval" {
			return "", nil
		}
		sess.Status, sess.Awaiting = storage.StatusExecuting, ""
		return "task.approval_" + decision, nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil // an approval of a session this agent does not hold (a CLI run, another agent)
	}
	return err
}

// Reopen reopens a closed task for a follow-up (the chat loop calls it on a new operator
// message); an open task is left as it is.
func (s *Service) Reopen(ctx context.Context, w Who) (bool, error) {
	reopened := false
	err := s.change(ctx, w, func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error) {
		if !sess.Closed() {
			return "", nil
		}
		reopened = true
		return "task.reopen", s.reopen(ctx, tx, sess, ev)
	})
	return reopened, err
}

// reopen moves a closed session back to executing: outcome, blocker and closed_at cleared,
// the old plan's steps replaced (the follow-up proposes a fresh generation).
func (s *Service) reopen(ctx context.Context, tx storage.DB, sess *storage.Session, _ *[]eventbus.Event) error {
	if _, err := storage.ReplaceSteps(ctx, tx, sess.ID, sess.PlanGeneration+1); err != nil {
		return err
	}
	sess.Status, sess.Awaiting, sess.Outcome, sess.Blocker, sess.Summary, sess.ClosedAt = storage.StatusExecuting, "", "", "", "", nil
	return nil
}

// PendingApproval answers whether the api holds a pending approval for a session.
type PendingApproval func(ctx context.Context, session string) (bool, error)

// SweepIdle abandons open tasks idle since before `before` (blocker user_abandoned), except
// those waiting on an approval: by their own status, or because the api still holds a pending
// approval for the session. It returns the sessions it closed.
func (s *Service) SweepIdle(ctx context.Context, before time.Time, pending PendingApproval) ([]string, error) {
	idle, err := storage.IdleSessions(ctx, s.pool, before, 200)
	if err != nil {
		return nil, err
	}
	var closed []string
	for _, sess := range idle {
		if sess.Awaiting == "approval" {
			continue
		}
		if pending != nil {
			waits, err := pending(ctx, sess.ID)
			if err != nil {
				return closed, fmt.Errorf("pending approvals of %s: %w", sess.ID, err)
			}
			if waits {
				continue
			}
		}
		w := Who{Session: sess.ID, Actor: "agent-sweep"}
		err := s.change(ctx, w, func(tx storage.DB, cur *storage.Session, ev *[]eventbus.Event) (string, error) {
			if cur.Closed() || cur.Awaiting == "approval" || !cur.UpdatedAt.Before(before) {
				return "", nil
			}
			if cur.PlanGeneration > 0 {
				if _, err := storage.CloseSteps(ctx, tx, cur.ID, cur.PlanGeneration, storage.StepSkipped); err != nil {
					return "", err
				}
			}
			now := s.now()
			cur.Status, cur.Awaiting, cur.Blocker, cur.ClosedAt = storage.StatusAbandoned, "", BlockerUserAbandoned, &now
			if cur.Outcome == "" {
				cur.Outcome = OutcomePartial
			}
			closed = append(closed, cur.ID)
			return "task.abandon", nil
		})
		if err != nil {
			return closed, err
		}
	}
	return closed, nil
}

// change runs fn on the session's locked row; when fn names an action, the session is saved
// with its audit row, a task.status event when the status moved, and fn's events, all in one
// transaction. An empty action changes nothing.
func (s *Service) change(ctx context.Context, w Who, fn func(tx storage.DB, sess *storage.Session, ev *[]eventbus.Event) (string, error)) error {
	return storage.InTx(ctx, s.pool, func(tx storage.DB) error {
		before, err := storage.GetSession(ctx, tx, w.Session, true)
		if err != nil {
			return err
		}
		after := before
		var evs []eventbus.Event
		action, err := fn(tx, &after, &evs)
		if err != nil || action == "" {
			return err
		}
		if err := storage.SaveSession(ctx, tx, after); err != nil {
			return err
		}
		if before.Status != after.Status {
			evs = append([]eventbus.Event{statusEvent(before.Status, after)}, evs...)
		}
		return s.record(ctx, tx, w, action, before, after, evs...)
	})
}

// record writes the audit row and the events of a change.
func (s *Service) record(ctx context.Context, tx storage.DB, w Who, action string, before any, after storage.Session, evs ...eventbus.Event) error {
	actor := w.Actor
	if actor == "" {
		actor = "agent"
	}
	var b any
	if sb, ok := before.(storage.Session); ok {
		b = sb
	}
	if err := audit.Write(ctx, tx, audit.Row{Actor: actor, Action: action, CorrelationID: after.ID, Before: b, After: after}); err != nil {
		return err
	}
	for i := range evs {
		evs[i].CorrelationID = after.ID
		if evs[i].Actor == "" {
			evs[i].Actor = actor
		}
	}
	if len(evs) == 0 {
		return nil
	}
	_, err := eventbus.AppendMany(ctx, tx, evs)
	return err
}

func statusEvent(from string, sess storage.Session) eventbus.Event {
	return event(Who{}, "task.status", map[string]any{
		"session_id": sess.ID, "from": from, "status": sess.Status, "awaiting": sess.Awaiting,
		"outcome": sess.Outcome, "blocker": sess.Blocker, "goal": sess.Goal, "task": sess.Task,
	})
}

func event(w Who, typ string, payload any) eventbus.Event {
	b, err := json.Marshal(payload)
	if err != nil {
		b = []byte(`{}`)
	}
	return eventbus.Event{Type: typ, Actor: w.Actor, Payload: b}
}

// mustRead re-reads the session after a change for the answer (the zero value on error).
func (s *Service) mustRead(ctx context.Context, id string, err error) storage.Session {
	if err != nil {
		return storage.Session{}
	}
	sess, rerr := storage.GetSession(ctx, s.pool, id, false)
	if rerr != nil {
		return storage.Session{}
	}
	return sess
}

// title is a session's title from its goal: the first line, at most 80 characters.
func title(goal string) string {
	line, _, _ := strings.Cut(goal, "\n")
	r := []rune(strings.TrimSpace(line))
	if len(r) > 80 {
		return strings.TrimRightFunc(string(r[:79]), unicode.IsSpace) + "…"
	}
	return string(r)
}

// aboutTargets keeps the prior tasks whose activity concerned an entity the goal names (its
// slug, or the name after the type prefix, as a whole word).
func aboutTargets(prior []storage.PriorTask, goal string) []storage.PriorTask {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(goal), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == ':' || r == '.')
	}) {
		w = strings.Trim(w, ".:")
		words[w] = true
	}
	out := []storage.PriorTask{}
	for _, p := range prior {
		var same []string
		for _, slug := range p.Targets {
			l := strings.ToLower(slug)
			_, name, _ := strings.Cut(l, ":")
			if words[l] || (name != "" && words[name]) {
				same = append(same, slug)
			}
		}
		if len(same) > 0 {
			p.Targets = same
			out = append(out, p)
		}
		if len(out) == 5 {
			break
		}
	}
	return out
}

// AwaitingApproval lists the sessions waiting on an approval (the watcher reconciles them
// with the api after a restart, when a decision's event may have been missed).
func (s *Service) AwaitingApproval(ctx context.Context) ([]storage.Session, error) {
	return storage.AwaitingApproval(ctx, s.pool, 500)
}
