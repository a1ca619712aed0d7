package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/pg"
)

// Message statuses (migrations/sql/00008_agent_chat.sql).
const (
	MessageStreaming   = "streaming"
	MessageComplete    = "complete"
	MessageInterrupted = "interrupted"
)

// Message is one transcript row with the tool calls it made.
type Message struct {
	ID           int64      `json:"id"`
	Role         string     `json:"role"`
	Content      string     `json:"content"`
	Turn         string     `json:"turn,omitempty"`
	Status       string     `json:"status"`
	FinishReason string     `json:"finish_reason,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	Calls        []ToolCall `json:"tool_calls,omitempty"`
}

// StartAssistant opens an assistant message of a turn (status streaming) and returns its id.
func StartAssistant(ctx context.Context, q pg.Querier, session, turn string) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, qStartAssistant,
		session, turn).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("open assistant message: %w", err)
	}
	return id, nil
}

const qStartAssistant = `INSERT INTO session_messages (session_id, role, turn, status) VALUES ($1, 'assistant', $2, 'streaming') RETURNING id`

// FinishMessage stores a message's final text, status and finish reason.
func FinishMessage(ctx context.Context, q pg.Querier, id int64, content, status, finish string) error {
	_, err := q.Exec(ctx, qFinishMessage, id, content, status, finish)
	return err
}

const qFinishMessage = `UPDATE session_messages SET content = $2, status = $3, finish_reason = $4 WHERE id = $1`

// DeleteEmpty removes an assistant message that ended with no text and no tool call (an
// empty turn leaves no empty bubble).
func DeleteEmpty(ctx context.Context, q pg.Querier, id int64) error {
	_, err := q.Exec(ctx, qDeleteEmpty, id)
	return err
}

const qDeleteEmpty = `DELETE FROM session_messages m WHERE m.id = $1 AND m.content = ''
		AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.message_id = m.id)`

// InterruptStreaming marks every message still streaming as interrupted (at start: a turn
// that a restart cut short is recorded as such and never replayed as finished).
func InterruptStreaming(ctx context.Context, q pg.Querier) (int64, error) {
	tag, err := q.Exec(ctx, qInterruptStreaming)
	return tag.RowsAffected(), err
}

const qInterruptStreaming = `UPDATE session_messages SET status = 'interrupted', finish_reason = 'interrupted' WHERE status = 'streaming'`

// AddMessage stores a finished message of a turn (a user message, a note) and returns its id.
func AddMessage(ctx context.Context, q pg.Querier, session, role, content, turn, apiMessageID string) (int64, time.Time, error) {
	var id int64
	var at time.Time
	err := q.QueryRow(ctx, qAddMessage, session, role, content, turn, apiMessageID).Scan(&id, &at)
	return id, at, err
}

const qAddMessage = `INSERT INTO session_messages (session_id, role, content, turn, api_message_id) VALUES ($1, $2, $3, $4, $5)
		RETURNING id, created_at`

// LastUserAt is when the session's latest user message was stored (zero when none).
func LastUserAt(ctx context.Context, q pg.Querier, session string) (time.Time, error) {
	var at *time.Time
	err := q.QueryRow(ctx, qLastUserAt, session).Scan(&at)
	if err != nil || at == nil {
		return time.Time{}, err
	}
	return *at, nil
}

const qLastUserAt = `SELECT max(created_at) FROM session_messages WHERE session_id = $1 AND role = 'user'`

// History is the session's last `limit` messages in order, each with its tool calls.
func History(ctx context.Context, q pg.Querier, session string, limit int) ([]Message, error) {
	rows, err := q.Query(ctx, qHistoryMessages, session, limit)
	if err != nil {
		return nil, err
	}
	var out []Message
	index := map[int64]int{}
	for rows.Next() {
		var m Message
		if err := rows.Scan(&m.ID, &m.Role, &m.Content, &m.Turn, &m.Status, &m.FinishReason, &m.CreatedAt); err != nil {
			rows.Close()
			return nil, err
		}
		index[m.ID] = len(out)
		out = append(out, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(out) == 0 {
		return out, err
	}
	crow, err := q.Query(ctx, qHistoryCalls, session, out[0].ID)
	if err != nil {
		return nil, err
	}
	defer crow.Close()
	for crow.Next() {
		var c ToolCall
		var mid int64
		var args []byte
		if err := crow.Scan(&c.ID, &mid, &c.Name, &args, &c.Result, &c.IsError); err != nil {
			return nil, err
		}
		c.Arguments = json.RawMessage(args)
		if i, ok := index[mid]; ok {
			out[i].Calls = append(out[i].Calls, c)
		}
	}
	return out, crow.Err()
}

const (
	qHistoryMessages = `SELECT id, role, content, turn, status, finish_reason, created_at FROM (
		SELECT * FROM session_messages WHERE session_id = $1 ORDER BY id DESC LIMIT $2) m ORDER BY id`
	qHistoryCalls = `SELECT id, message_id, name, arguments, result, is_error FROM tool_calls
		WHERE session_id = $1 AND message_id >= $2 ORDER BY started_at, id`
)

// HandedOff lists, for the open chat sessions, the results of tool calls that left an
// execution queued or running (render approval or execution) in the last day: after a
// restart the loop follows them again.
func HandedOff(ctx context.Context, q pg.Querier) ([]ToolCall, error) {
	rows, err := q.Query(ctx, qHandedOff)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ToolCall
	for rows.Next() {
		var c ToolCall
		if err := rows.Scan(&c.ID, &c.SessionID, &c.Result, &c.Render); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

const qHandedOff = `SELECT c.id, c.session_id, c.result, c.render FROM tool_calls c
		JOIN agent_sessions s ON s.id = c.session_id
		WHERE s.source = 'chat' AND s.status IN ('executing', 'awaiting_input') AND c.render IN ('approval', 'execution')
		  AND NOT c.is_error AND c.finished_at > now() - interval '1 day'
		ORDER BY c.started_at`

// Reported says whether a session already holds a note about execution id (its end was
// brought back to the loop).
func Reported(ctx context.Context, q pg.Querier, session, id string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, qReported, session, id).Scan(&ok)
	return ok, err
}

const qReported = `SELECT EXISTS (SELECT 1 FROM session_messages WHERE session_id = $1 AND role = 'note'
		AND position($2 in content) > 0)`

// ToolResult is the full recorded result of one tool call of a session, and the tool's name
// (ErrNotFound when the session has no such call): get_output pages it.
func ToolResult(ctx context.Context, q pg.Querier, session, id string) (name, result string, err error) {
	err = q.QueryRow(ctx, qToolResult, session, id).Scan(&name, &result)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", ErrNotFound
	}
	return name, result, err
}

const qToolResult = `SELECT name, result FROM tool_calls WHERE session_id = $1 AND id = $2`
