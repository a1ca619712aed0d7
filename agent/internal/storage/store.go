// Package storage holds the agent's named queries: every statement on the agent's own tables
// (agent_sessions, session_messages, tool_calls, plan_steps, session_questions,
// agent_activity; migrations/sql/00006_agent.sql). Services call these inside their
// transactions; nothing else in the agent writes SQL. The agent never writes the api's tables.
package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/pg"
)

// ErrNotFound is a session (or step) that does not exist.
var ErrNotFound = errors.New("not found")

// Session statuses.
const (
	StatusExecuting     = "executing"
	StatusAwaitingInput = "awaiting_input"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusAbandoned     = "abandoned"
)

// Step statuses.
const (
	StepPending  = "pending"
	StepRunning  = "running"
	StepDone     = "done"
	StepSkipped  = "skipped"
	StepReplaced = "replaced"
)

// Session is one row of agent_sessions.
type Session struct {
	ID             string     `json:"id"`
	Actor          string     `json:"actor"`
	Source         string     `json:"source"`
	Title          string     `json:"title"`
	Goal           string     `json:"goal"`
	Task           string     `json:"task,omitempty"`
	Status         string     `json:"status"`
	Awaiting       string     `json:"awaiting,omitempty"`
	Outcome        string     `json:"outcome,omitempty"`
	Summary        string     `json:"summary,omitempty"`
	Blocker        string     `json:"blocker,omitempty"`
	PlanGeneration int        `json:"plan_generation"`
	PlanProposedAt *time.Time `json:"plan_proposed_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	ClosedAt       *time.Time `json:"closed_at,omitempty"`
}

// Closed reports whether the session's task has ended.
func (s Session) Closed() bool {
	return s.Status == StatusCompleted || s.Status == StatusFailed || s.Status == StatusAbandoned
}

const sessionColumns = `id, actor, source, title, goal, task, status, awaiting, outcome, summary, blocker,
	plan_generation, plan_proposed_at, created_at, updated_at, closed_at`

func scanSession(row pgx.Row) (Session, error) {
	var s Session
	err := row.Scan(&s.ID, &s.Actor, &s.Source, &s.Title, &s.Goal, &s.Task, &s.Status, &s.Awaiting, &s.Outcome,
		&s.Summary, &s.Blocker, &s.PlanGeneration, &s.PlanProposedAt, &s.CreatedAt, &s.UpdatedAt, &s.ClosedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	return s, err
}

// EnsureSession creates the session if it does not exist and returns it; created says whether
// this call created it. An existing session keeps its actor and source.
func EnsureSession(ctx context.Context, q pg.Querier, id, actor, source string) (Session, bool, error) {
	if source == "" {
		source = "chat"
	}
	s, err := scanSession(q.QueryRow(ctx, qEnsureSession, id, actor, source))
	if err == nil {
		return s, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return s, false, fmt.Errorf("create session %s: %w", id, err)
	}
	s, err = GetSession(ctx, q, id, false)
	return s, false, err
}

const qEnsureSession = `INSERT INTO agent_sessions (id, actor, source) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO NOTHING RETURNING ` + sessionColumns

// GetSession reads a session; lock takes it FOR UPDATE (the task service serialises a
// session's changes on its row).
func GetSession(ctx context.Context, q pg.Querier, id string, lock bool) (Session, error) {
	sql := qGetSession
	if lock {
		sql = qGetSessionForUpdate
	}
	s, err := scanSession(q.QueryRow(ctx, sql, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return s, fmt.Errorf("read session %s: %w", id, err)
	}
	if errors.Is(err, ErrNotFound) {
		return s, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return s, nil
}

const (
	qGetSession          = `SELECT ` + sessionColumns + ` FROM agent_sessions WHERE id = $1`
	qGetSessionForUpdate = qGetSession + ` FOR UPDATE`
)

// SaveSession writes a session's mutable fields (title, goal, task, status, awaiting, outcome,
// summary, blocker, plan_generation, closed_at) and bumps updated_at.
func SaveSession(ctx context.Context, q pg.Querier, s Session) error {
	tag, err := q.Exec(ctx, qSaveSession, s.ID, s.Title, s.Goal, s.Task, s.Status, s.Outcome, s.Summary, s.Blocker,
		s.PlanGeneration, s.ClosedAt, s.Awaiting, s.PlanProposedAt)
	if err != nil {
		return fmt.Errorf("save session %s: %w", s.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session %s: %w", s.ID, ErrNotFound)
	}
	return nil
}

const qSaveSession = `UPDATE agent_sessions SET title = $2, goal = $3, task = $4, status = $5,
		outcome = $6, summary = $7, blocker = $8, plan_generation = $9, closed_at = $10, awaiting = $11,
		plan_proposed_at = $12, updated_at = now() WHERE id = $1`

// Touch bumps a session's updated_at (the idle sweep's clock).
func Touch(ctx context.Context, q pg.Querier, id string) error {
	_, err := q.Exec(ctx, qTouch, id)
	return err
}

const qTouch = `UPDATE agent_sessions SET updated_at = now() WHERE id = $1`

// IdleSessions lists open sessions not updated since before.
func IdleSessions(ctx context.Context, q pg.Querier, before time.Time, limit int) ([]Session, error) {
	rows, err := q.Query(ctx, qIdleSessions, before, limit)
	if err != nil {
		return nil, err
	}
	return collectSessions(rows)
}

const qIdleSessions = `SELECT ` + sessionColumns + ` FROM agent_sessions
		WHERE status IN ('executing', 'awaiting_input') AND updated_at < $1 ORDER BY updated_at LIMIT $2`

func collectSessions(rows pgx.Rows) ([]Session, error) {
	defer rows.Close()
	var out []Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// PriorTask is an earlier session whose task ended partial or failed.
type PriorTask struct {
	ID       string    `json:"session_id"`
	Goal     string    `json:"goal"`
	Outcome  string    `json:"outcome"`
	Blocker  string    `json:"blocker,omitempty"`
	Summary  string    `json:"summary,omitempty"`
	ClosedAt time.Time `json:"closed_at"`
	Targets  []string  `json:"targets"`
}

// PriorTasks lists other sessions closed since `since` whose task ended partial or failed (or
// was abandoned), newest first, with the entities their activity concerned. The task service
// keeps those about the targets a new goal names.
func PriorTasks(ctx context.Context, q pg.Querier, exclude string, since time.Time, limit int) ([]PriorTask, error) {
	rows, err := q.Query(ctx, qPriorTasks, exclude, since, limit)
	if err != nil {
		return nil, fmt.Errorf("prior tasks: %w", err)
	}
	defer rows.Close()
	out := []PriorTask{}
	for rows.Next() {
		var p PriorTask
		if err := rows.Scan(&p.ID, &p.Goal, &p.Outcome, &p.Blocker, &p.Summary, &p.ClosedAt, &p.Targets); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

const qPriorTasks = `
		SELECT s.id, s.goal, s.outcome, s.blocker, s.summary, s.closed_at,
		       COALESCE(array_agg(DISTINCT a.entity) FILTER (WHERE a.entity <> ''), '{}')
		FROM agent_sessions s LEFT JOIN agent_activity a ON a.session_id = s.id
		WHERE s.id <> $1 AND s.closed_at >= $2
		  AND (s.outcome IN ('partial', 'failed') OR s.status IN ('failed', 'abandoned'))
		GROUP BY s.id ORDER BY s.closed_at DESC LIMIT $3`

// Step is one row of plan_steps.
type Step struct {
	Generation int    `json:"generation"`
	Index      int    `json:"index"`
	Text       string `json:"text"`
	Status     string `json:"status"`
	Note       string `json:"note,omitempty"`
}

// InsertSteps writes a new generation's steps, all pending.
func InsertSteps(ctx context.Context, q pg.Querier, session string, generation int, texts []string) error {
	idx := make([]int32, len(texts))
	for i := range texts {
		idx[i] = int32(i)
	}
	_, err := q.Exec(ctx, qInsertSteps, session, generation, idx, texts)
	if err != nil {
		return fmt.Errorf("insert plan steps: %w", err)
	}
	return nil
}

const qInsertSteps = `INSERT INTO plan_steps (session_id, generation, idx, text)
		SELECT $1, $2, i, t FROM unnest($3::int[], $4::text[]) AS u(i, t)`

// ReplaceSteps marks every step of generations before `generation` that is not already
// replaced as replaced; it returns how many it marked.
func ReplaceSteps(ctx context.Context, q pg.Querier, session string, generation int) (int64, error) {
	tag, err := q.Exec(ctx, qReplaceSteps, session, generation)
	return tag.RowsAffected(), err
}

const qReplaceSteps = `UPDATE plan_steps SET status = 'replaced', updated_at = now()
		WHERE session_id = $1 AND generation < $2 AND status <> 'replaced'`

// Steps lists a generation's steps in order.
func Steps(ctx context.Context, q pg.Querier, session string, generation int) ([]Step, error) {
	rows, err := q.Query(ctx, qSteps, session, generation)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Step{}
	for rows.Next() {
		var s Step
		if err := rows.Scan(&s.Generation, &s.Index, &s.Text, &s.Status, &s.Note); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

const qSteps = `SELECT generation, idx, text, status, note FROM plan_steps
		WHERE session_id = $1 AND generation = $2 ORDER BY idx`

// SetStep changes one step's status (and note, when non-empty).
func SetStep(ctx context.Context, q pg.Querier, session string, generation, index int, status, note string) error {
	tag, err := q.Exec(ctx, qSetStep, session, generation, index, status, note)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("plan step %d: %w", index+1, ErrNotFound)
	}
	return nil
}

const qSetStep = `UPDATE plan_steps SET status = $4, note = CASE WHEN $5 = '' THEN note ELSE $5 END,
		updated_at = now() WHERE session_id = $1 AND generation = $2 AND idx = $3`

// CloseSteps moves a generation's pending and running steps to status; it returns how many.
func CloseSteps(ctx context.Context, q pg.Querier, session string, generation int, status string) (int64, error) {
	tag, err := q.Exec(ctx, qCloseSteps, session, generation, status)
	return tag.RowsAffected(), err
}

const qCloseSteps = `UPDATE plan_steps SET status = $3, updated_at = now()
		WHERE session_id = $1 AND generation = $2 AND status IN ('pending', 'running')`

// InsertQuestion records a question to the operator and returns its id.
func InsertQuestion(ctx context.Context, q pg.Querier, session, question string, options []string) (int64, error) {
	if options == nil {
		options = []string{}
	}
	opts, err := json.Marshal(options)
	if err != nil {
		return 0, err
	}
	var id int64
	err = q.QueryRow(ctx, qInsertQuestion,
		session, question, opts).Scan(&id)
	return id, err
}

const qInsertQuestion = `INSERT INTO session_questions (session_id, question, options) VALUES ($1, $2, $3) RETURNING id`

// ToolCall is one row of tool_calls.
type ToolCall struct {
	ID         string          `json:"id"`
	SessionID  string          `json:"session_id"`
	Turn       string          `json:"turn,omitempty"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Result     string          `json:"result"`
	IsError    bool            `json:"is_error"`
	Render     string          `json:"render,omitempty"`
	MessageID  int64           `json:"message_id,omitempty"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// StartToolCall records a call as it starts.
func StartToolCall(ctx context.Context, q pg.Querier, c ToolCall) error {
	args := c.Arguments
	if len(args) == 0 || !json.Valid(args) {
		args = json.RawMessage(`{}`)
	}
	var msg any
	if c.MessageID != 0 {
		msg = c.MessageID
	}
	_, err := q.Exec(ctx, qStartToolCall,
		c.ID, c.SessionID, c.Turn, c.Name, []byte(args), msg)
	if err != nil {
		return fmt.Errorf("record tool call: %w", err)
	}
	return nil
}

const qStartToolCall = `INSERT INTO tool_calls (id, session_id, turn, name, arguments, message_id) VALUES ($1, $2, $3, $4, $5, $6)`

// FinishToolCall completes a call's row with its result.
func FinishToolCall(ctx context.Context, q pg.Querier, id, result string, isError bool, render string) error {
	_, err := q.Exec(ctx, qFinishToolCall,
		id, result, isError, render)
	if err != nil {
		return fmt.Errorf("complete tool call: %w", err)
	}
	return nil
}

const qFinishToolCall = `UPDATE tool_calls SET result = $2, is_error = $3, render = $4, finished_at = now() WHERE id = $1`

// ToolCalls lists a session's calls in order.
func ToolCalls(ctx context.Context, q pg.Querier, session string) ([]ToolCall, error) {
	rows, err := q.Query(ctx, qToolCalls, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []ToolCall{}
	for rows.Next() {
		var c ToolCall
		var args []byte
		if err := rows.Scan(&c.ID, &c.SessionID, &c.Turn, &c.Name, &args, &c.Result, &c.IsError, &c.Render, &c.StartedAt, &c.FinishedAt); err != nil {
			return nil, err
		}
		c.Arguments = args
		out = append(out, c)
	}
	return out, rows.Err()
}

const qToolCalls = `SELECT id, session_id, turn, name, arguments, result, is_error, render, started_at, finished_at
		FROM tool_calls WHERE session_id = $1 ORDER BY started_at, id`

// Activity is one row of agent_activity.
type Activity struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
	Kind      string    `json:"kind"`
	Summary   string    `json:"summary"`
	Entity    string    `json:"entity,omitempty"`
	EntityID  string    `json:"entity_id,omitempty"`
}

// InsertActivity records what the agent did and the entity it concerned.
func InsertActivity(ctx context.Context, q pg.Querier, a Activity) error {
	var id any
	if a.EntityID != "" {
		id = a.EntityID
	}
	_, err := q.Exec(ctx, qInsertActivity,
		a.SessionID, a.Kind, truncate(a.Summary, 500), a.Entity, id)
	if err != nil {
		return fmt.Errorf("record activity: %w", err)
	}
	return nil
}

const qInsertActivity = `INSERT INTO agent_activity (session_id, kind, summary, entity, entity_id) VALUES ($1, $2, $3, $4, $5)`

// ActivityOf lists a session's activity in order.
func ActivityOf(ctx context.Context, q pg.Querier, session string) ([]Activity, error) {
	rows, err := q.Query(ctx, qActivityOf, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Activity{}
	for rows.Next() {
		var a Activity
		if err := rows.Scan(&a.SessionID, &a.At, &a.Kind, &a.Summary, &a.Entity, &a.EntityID); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

const qActivityOf = `SELECT session_id, at, kind, summary, entity, COALESCE(entity_id::text, '')
		FROM agent_activity WHERE session_id = $1 ORDER BY id`

// LastAssistantText is the newest assistant message of a session (” when none); the blocker
// of a task is derived from it.
func LastAssistantText(ctx context.Context, q pg.Querier, session string) (string, error) {
	var s string
	err := q.QueryRow(ctx, qLastAssistantText, session).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return s, err
}

const qLastAssistantText = `SELECT content FROM session_messages WHERE session_id = $1 AND role = 'assistant'
		ORDER BY id DESC LIMIT 1`

// AppendMessage stores one transcript message and returns its id.
func AppendMessage(ctx context.Context, q pg.Querier, session, role, content, apiMessageID string) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, qAppendMessage,
		session, role, content, apiMessageID).Scan(&id)
	return id, err
}

const qAppendMessage = `INSERT INTO session_messages (session_id, role, content, api_message_id) VALUES ($1, $2, $3, $4) RETURNING id`

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// HasLivePlan reports whether the session's current plan generation has a step that is not
// replaced (a reopened task's old plan no longer counts).
func HasLivePlan(ctx context.Context, q pg.Querier, session string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, qHasLivePlan, session).Scan(&ok)
	return ok, err
}

const qHasLivePlan = `SELECT EXISTS (SELECT 1 FROM plan_steps p JOIN agent_sessions s ON s.id = p.session_id
		WHERE p.session_id = $1 AND p.generation = s.plan_generation AND p.status <> 'replaced')`

// AwaitingApproval lists the open sessions waiting on an approval.
func AwaitingApproval(ctx context.Context, q pg.Querier, limit int) ([]Session, error) {
	rows, err := q.Query(ctx, qAwaitingApproval, limit)
	if err != nil {
		return nil, err
	}
	return collectSessions(rows)
}

const qAwaitingApproval = `SELECT ` + sessionColumns + ` FROM agent_sessions
		WHERE status = 'awaiting_input' AND awaiting = 'approval' ORDER BY updated_at LIMIT $1`
