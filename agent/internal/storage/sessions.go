package storage

// The sessions read model (agent/internal/sessionsapi): the list of sessions with their
// counts, one session's transcript with the tool calls of each message, and the deletion of a
// session with everything that hangs off it.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/oikos-hq/oikos/shared/ids"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Session list limits.
const (
	DefaultSessionLimit = 50
	MaxSessionLimit     = 200
	// titleLen is the longest title, in characters (the goal's title has the same bound).
	titleLen = 80
	// titlePrefix is how much of a message's text the title is made from.
	titlePrefix = 320
)

// ErrBadCursor is a session list cursor that SessionCursor.String did not write.
var ErrBadCursor = errors.New("malformed cursor; pass next_cursor from the previous page unchanged")

// SessionCursor is the keyset of the session list: created_at descending, then id descending.
// id breaks created_at ties, so the order is total and no session is dropped or repeated at a
// page boundary.
type SessionCursor struct {
	CreatedAt time.Time
	ID        string
}

// String encodes the cursor, opaque to clients: base64url of "<created_at>|<id>".
func (c SessionCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID))
}

// ParseSessionCursor decodes SessionCursor.String; anything else is ErrBadCursor.
func ParseSessionCursor(s string) (SessionCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return SessionCursor{}, ErrBadCursor
	}
	// The time holds no '|'; the id (a client's string) may.
	ts, id, ok := strings.Cut(string(b), "|")
	if !ok || id == "" {
		return SessionCursor{}, ErrBadCursor
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return SessionCursor{}, ErrBadCursor
	}
	return SessionCursor{CreatedAt: at, ID: id}, nil
}

// SessionFilter selects sessions for ListSessions. Empty slices and zero values do not
// filter; the values of one slice are alternatives (IN), the fields together all apply.
type SessionFilter struct {
	Outcomes []string
	Statuses []string
	Blockers []string
	// Entity is an entity's uuid or slug: the sessions with an agent_activity row about it
	// (a uuid matches entity_id, or entity when a tool named the entity by its id; a slug
	// matches entity).
	Entity string
	// Since keeps sessions created at or after it.
	Since time.Time
	// After continues the list after this cursor (nil: the first page).
	After *SessionCursor
	// Limit is the page size, clamped to 1..MaxSessionLimit (0: DefaultSessionLimit).
	Limit int
}

// SessionSummary is one row of the session list.
type SessionSummary struct {
	ID              string
	Title           string
	Status          string
	Outcome         string
	Blocker         string
	Goal            string
	CreatedAt       time.Time
	ClosedAt        *time.Time
	MessageCount    int64
	ToolCallCount   int64
	DurationSeconds int64
}

// SessionPage is one page of the session list; Next is nil on the last page.
type SessionPage struct {
	Items []SessionSummary
	Next  *SessionCursor
}

// qListSessions computes the counts, the duration (closed_at, or now for an open session,
// minus created_at, in whole seconds) and the first assistant text (the title of a session
// that has none yet) per row in the same statement, from the (session_id, ...) indexes of
// session_messages and tool_calls: one round trip per page, however many sessions it holds.
const qListSessions = `SELECT s.id, s.title, s.status, s.outcome, s.blocker, s.goal, s.created_at, s.closed_at,
	(SELECT count(*) FROM session_messages m WHERE m.session_id = s.id),
	(SELECT count(*) FROM tool_calls c WHERE c.session_id = s.id),
	GREATEST(0, floor(extract(epoch FROM COALESCE(s.closed_at, now()) - s.created_at)))::bigint,
	CASE WHEN s.title = '' THEN COALESCE((SELECT ` + firstTextSQL + ` FROM session_messages m
		WHERE m.session_id = s.id AND m.role = 'assistant' AND m.content ~ '\S' ORDER BY m.id LIMIT 1), '') ELSE '' END
	FROM agent_sessions s`

// firstTextSQL is the start of a message's text, titlePrefix (320) characters, enough for a
// title (titleOf cuts it); a constant so that the statement is one (storage_test.go checks
// the two agree).
const firstTextSQL = `left(ltrim(m.content, E' \t\r\n'), 320)`

// ListSessions lists sessions newest first (created_at DESC, id DESC) by keyset pages.
func ListSessions(ctx context.Context, q pg.Querier, f SessionFilter) (SessionPage, error) {
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultSessionLimit
	case limit > MaxSessionLimit:
		limit = MaxSessionLimit
	}
	sql, args := listSessionsQuery(f, limit)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	page := SessionPage{Items: []SessionSummary{}}
	for rows.Next() {
		var s SessionSummary
		var first string
		if err := rows.Scan(&s.ID, &s.Title, &s.Status, &s.Outcome, &s.Blocker, &s.Goal, &s.CreatedAt, &s.ClosedAt,
			&s.MessageCount, &s.ToolCallCount, &s.DurationSeconds, &first); err != nil {
			return SessionPage{}, fmt.Errorf("list sessions: %w", err)
		}
		if s.Title == "" {
			s.Title = titleOf(first)
		}
		page.Items = append(page.Items, s)
	}
	if err := rows.Err(); err != nil {
		return SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		last := page.Items[limit-1]
		page.Next = &SessionCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return page, nil
}

// listSessionsQuery is qListSessions with f's filters and keyset position, one page of
// limit (and one more, which says whether a next page exists); queries.go registers the
// variants it produces.
func listSessionsQuery(f SessionFilter, limit int) (string, []any) {
	var where []string
	var args []any
	add := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(f.Outcomes) > 0 {
		where = append(where, "s.outcome = ANY("+add(f.Outcomes)+"::text[])")
	}
	if len(f.Statuses) > 0 {
		where = append(where, "s.status = ANY("+add(f.Statuses)+"::text[])")
	}
	if len(f.Blockers) > 0 {
		where = append(where, "s.blocker = ANY("+add(f.Blockers)+"::text[])")
	}
	if f.Entity != "" {
		if ids.IsUUID(f.Entity) {
			ref := strings.ToLower(f.Entity)
			where = append(where, "EXISTS (SELECT 1 FROM agent_activity a WHERE a.session_id = s.id AND (a.entity_id = "+
				add(ref)+"::uuid OR lower(a.entity) = "+add(ref)+"::text))")
		} else {
			where = append(where, "EXISTS (SELECT 1 FROM agent_activity a WHERE a.session_id = s.id AND a.entity = "+add(f.Entity)+")")
		}
	}
	if !f.Since.IsZero() {
		where = append(where, "s.created_at >= "+add(f.Since))
	}
	if f.After != nil {
		where = append(where, "(s.created_at, s.id) < ("+add(f.After.CreatedAt)+"::timestamptz, "+add(f.After.ID)+"::text)")
	}
	sql := qListSessions
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY s.created_at DESC, s.id DESC LIMIT " + add(limit+1)
	return sql, args
}

// SessionTitle is a session's title: its own (set from the goal) or, before a goal is set,
// the first assistant text of its transcript cut to 80 characters, else "".
func SessionTitle(s Session, transcript []TranscriptMessage) string {
	if s.Title != "" {
		return s.Title
	}
	for _, m := range transcript {
		if m.Role == "assistant" && strings.TrimSpace(m.Content) != "" {
			// The same prefix the list's statement takes (firstTextSQL), so both agree.
			r := []rune(strings.TrimLeft(m.Content, " \t\r\n"))
			return titleOf(string(r[:min(len(r), titlePrefix)]))
		}
	}
	return ""
}

// titleOf makes a title of a message's text: whitespace runs (newlines too) become one space,
// and a text longer than 80 characters is cut to 79 and an ellipsis, as a goal's title is.
func titleOf(text string) string {
	r := []rune(strings.Join(strings.Fields(text), " "))
	if len(r) > titleLen {
		return strings.TrimRightFunc(string(r[:titleLen-1]), unicode.IsSpace) + "…"
	}
	return string(r)
}

// TranscriptMessage is one message of a session's transcript with the tool calls it made.
type TranscriptMessage struct {
	ID        int64
	Role      string
	Content   string
	CreatedAt time.Time
	Calls     []TranscriptCall
}

// TranscriptCall is one tool call of a message.
type TranscriptCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
	Result    string
	IsError   bool
}

// Transcript lists a session's messages in id order, each with the tool calls it made
// (tool_calls.message_id) in started_at order, one entry per call, in one statement. Calls
// without a message (an MCP session's) belong to no message; ToolCalls lists them.
func Transcript(ctx context.Context, q pg.Querier, session string) ([]TranscriptMessage, error) {
	rows, err := q.Query(ctx, qTranscript, session)
	if err != nil {
		return nil, fmt.Errorf("read transcript of %s: %w", session, err)
	}
	defer rows.Close()
	out := []TranscriptMessage{}
	for rows.Next() {
		var m TranscriptMessage
		var cid, name, result *string
		var args []byte
		var isErr *bool
		if err := rows.Scan(&m.ID, &m.Role, &m.Content, &m.CreatedAt, &cid, &name, &args, &result, &isErr); err != nil {
			return nil, fmt.Errorf("read transcript of %s: %w", session, err)
		}
		if n := len(out); n == 0 || out[n-1].ID != m.ID {
			m.Calls = []TranscriptCall{}
			out = append(out, m)
		}
		if cid != nil {
			last := &out[len(out)-1]
			last.Calls = append(last.Calls, TranscriptCall{ID: *cid, Name: *name, Arguments: args, Result: *result, IsError: *isErr})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read transcript of %s: %w", session, err)
	}
	return out, nil
}

const qTranscript = `SELECT m.id, m.role, m.content, m.created_at, c.id, c.name, c.arguments, c.result, c.is_error
		FROM session_messages m LEFT JOIN tool_calls c ON c.message_id = m.id AND c.session_id = m.session_id
		WHERE m.session_id = $1 ORDER BY m.id, c.started_at, c.id`

// DeletedSession is what DeleteSession removed with the session (by cascade).
type DeletedSession struct {
	Messages  int64 `json:"messages"`
	ToolCalls int64 `json:"tool_calls"`
}

// DeleteSession deletes a session; its messages, tool calls, plan steps, questions and
// activity go with it (ON DELETE CASCADE). It answers how many messages and calls went, and
// ErrNotFound for a session that does not exist. Callers hold the session's row lock (the
// GetSession lock), which also keeps new messages and calls out until they commit.
func DeleteSession(ctx context.Context, q pg.Querier, id string) (DeletedSession, error) {
	var d DeletedSession
	var n int64
	// Every part of the statement sees the same snapshot, so the counts are those before the
	// delete.
	err := q.QueryRow(ctx, qDeleteSession, id).Scan(&n, &d.Messages, &d.ToolCalls)
	if err != nil {
		return d, fmt.Errorf("delete session %s: %w", id, err)
	}
	if n == 0 {
		return DeletedSession{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return d, nil
}

const qDeleteSession = `WITH gone AS (DELETE FROM agent_sessions WHERE id = $1 RETURNING id)
		SELECT (SELECT count(*) FROM gone),
		       (SELECT count(*) FROM session_messages WHERE session_id = $1),
		       (SELECT count(*) FROM tool_calls WHERE session_id = $1)`

// ReadSnapshot makes tx (just begun, before any query) a read-only REPEATABLE READ
// transaction, so the several reads of one answer see one snapshot.
func ReadSnapshot(ctx context.Context, tx pg.Querier) error {
	if _, err := tx.Exec(ctx, qReadSnapshot); err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	return nil
}

const qReadSnapshot = `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`
