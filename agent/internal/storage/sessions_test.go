package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// session creates a session through EnsureSession and sets its fields through SaveSession.
func session(t *testing.T, db *pgtest.DB, id string, edit func(*Session)) Session {
	t.Helper()
	ctx := context.Background()
	s, _, err := EnsureSession(ctx, db.Pool, id, "tester", "chat")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&s)
		if err := SaveSession(ctx, db.Pool, s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func exec(t *testing.T, db *pgtest.DB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func idsOf(items []SessionSummary) []string {
	out := []string{}
	for _, s := range items {
		out = append(out, s.ID)
	}
	return out
}

func TestListSessionsFilters(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	closed := time.Now()
	session(t, db, "ok", func(s *Session) { s.Status, s.Outcome, s.ClosedAt = StatusCompleted, "success", &closed })
	session(t, db, "partial", func(s *Session) {
		s.Status, s.Outcome, s.Blocker, s.ClosedAt = StatusAbandoned, "partial", "user_abandoned", &closed
	})
	session(t, db, "failed", func(s *Session) {
		s.Status, s.Outcome, s.Blocker, s.ClosedAt = StatusFailed, "failed", "tool_error", &closed
	})
	session(t, db, "open", nil)
	exec(t, db, `UPDATE agent_sessions SET created_at = now() - interval '10 days' WHERE id = 'ok'`)
	const u1 = "0190b2c4-1111-7000-8000-000000000001"
	for _, a := range []Activity{
		{SessionID: "ok", Kind: "exec", Entity: "lxc:jellyfin", EntityID: u1},
		{SessionID: "failed", Kind: "exec", Entity: "lxc:jellyfin"},
		{SessionID: "open", Kind: "read", Entity: strings.ToUpper(u1)}, // a tool named the entity by its id
		{SessionID: "partial", Kind: "read", Entity: "host:pve1"},
	} {
		if err := InsertActivity(ctx, db.Pool, a); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		f    SessionFilter
		want []string
	}{
		{SessionFilter{}, []string{"open", "failed", "partial", "ok"}},
		{SessionFilter{Outcomes: []string{"success"}}, []string{"ok"}},
		{SessionFilter{Outcomes: []string{"partial", "failed"}}, []string{"failed", "partial"}},
		{SessionFilter{Statuses: []string{StatusExecuting, StatusAbandoned}}, []string{"open", "partial"}},
		{SessionFilter{Blockers: []string{"tool_error"}}, []string{"failed"}},
		{SessionFilter{Entity: "lxc:jellyfin"}, []string{"failed", "ok"}},
		{SessionFilter{Entity: u1}, []string{"open", "ok"}},
		{SessionFilter{Entity: strings.ToUpper(u1)}, []string{"open", "ok"}},
		{SessionFilter{Entity: "lxc:nothing"}, []string{}},
		{SessionFilter{Since: time.Now().Add(-7 * 24 * time.Hour)}, []string{"open", "failed", "partial"}},
		{SessionFilter{Since: time.Now().Add(-7 * 24 * time.Hour), Entity: "lxc:jellyfin"}, []string{"failed"}},
	} {
		page, err := ListSessions(ctx, db.Pool, c.f)
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		// Sessions created in the same test may share created_at to the microsecond; compare
		// as sets, the order is tested in TestListSessionsPages.
		got := idsOf(page.Items)
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) || page.Next != nil {
			t.Errorf("%+v: got %v next %v, want %v", c.f, got, page.Next, want)
		}
	}
}

func TestListSessionsPages(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	for i := range 13 {
		session(t, db, fmt.Sprintf("s%02d", i), nil)
	}
	// Four sessions share one created_at: id alone orders them.
	exec(t, db, `UPDATE agent_sessions SET created_at = '2026-01-01T00:00:00.123456Z' WHERE id IN ('s03', 's04', 's05', 's06')`)
	exec(t, db, `UPDATE agent_sessions SET created_at = now() - interval '1 minute' * substr(id, 2)::int WHERE id IN ('s00', 's01', 's02')`)
	var want []string
	rows, err := db.Pool.Query(ctx, `SELECT id FROM agent_sessions ORDER BY created_at DESC, id DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	rows.Close()

	var got []string
	var after *SessionCursor
	pages := 0
	for {
		page, err := ListSessions(ctx, db.Pool, SessionFilter{Limit: 4, After: after})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, idsOf(page.Items)...)
		if page.Next == nil {
			if len(page.Items) != 1 {
				t.Errorf("last page holds %d", len(page.Items))
			}
			break
		}
		c, err := ParseSessionCursor(page.Next.String())
		if err != nil || !c.CreatedAt.Equal(page.Next.CreatedAt) || c.ID != page.Next.ID {
			t.Fatalf("cursor round trip: %+v -> %+v (%v)", page.Next, c, err)
		}
		after = &c
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if !slices.Equal(got, want) || pages != 4 {
		t.Fatalf("pages %d: got %v, want %v", pages, got, want)
	}
}

func TestParseSessionCursor(t *testing.T) {
	t.Parallel()
	c := SessionCursor{CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC), ID: "mcp|odd/id"}
	back, err := ParseSessionCursor(c.String())
	if err != nil || !back.CreatedAt.Equal(c.CreatedAt) || back.ID != c.ID {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	for _, bad := range []string{"", "!!", "bm9wZQ", "MjAyNi0wMS0wMXw", c.String() + "=="} {
		if _, err := ParseSessionCursor(bad); !errors.Is(err, ErrBadCursor) {
			t.Errorf("ParseSessionCursor(%q) = %v", bad, err)
		}
	}
}

func TestListSessionsCountsDurationTitle(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	session(t, db, "closed", func(s *Session) { s.Title, s.Goal, s.Status = "Fix the NAS", "Fix the NAS", StatusCompleted })
	exec(t, db, `UPDATE agent_sessions SET created_at = now() - interval '2 hours',
		closed_at = now() - interval '2 hours' + interval '3661.7 seconds' WHERE id = 'closed'`)
	session(t, db, "open", nil)
	exec(t, db, `UPDATE agent_sessions SET created_at = now() - interval '90 seconds' WHERE id = 'open'`)
	session(t, db, "quiet", nil)

	for _, m := range []struct{ s, role, text string }{
		{"closed", "user", "fix it"}, {"closed", "assistant", "on it"}, {"closed", "assistant", "done"},
		{"open", "user", "hello"},
		{"open", "assistant", "   \n "}, // blank: not a title
		{"open", "assistant", "  Looking at\nthe   jellyfin container first, then the NAS share it mounts, then the transcoder settings."},
		{"open", "assistant", "A later text"},
		{"quiet", "user", "only the operator spoke"},
	} {
		if _, err := AppendMessage(ctx, db.Pool, m.s, m.role, m.text, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range []string{"closed", "closed", "open"} {
		if err := StartToolCall(ctx, db.Pool, ToolCall{ID: fmt.Sprintf("c%d", i), SessionID: s, Name: "get_entity"}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := ListSessions(ctx, db.Pool, SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]SessionSummary{}
	for _, s := range page.Items {
		by[s.ID] = s
	}
	if c := by["closed"]; c.MessageCount != 3 || c.ToolCallCount != 2 || c.DurationSeconds != 3661 || c.Title != "Fix the NAS" {
		t.Errorf("closed: %+v", c)
	}
	wantTitle := "Looking at the jellyfin container first, then the NAS share it mounts, then the…"
	if o := by["open"]; o.MessageCount != 4 || o.ToolCallCount != 1 || o.DurationSeconds < 90 || o.DurationSeconds > 150 ||
		o.Title != wantTitle || o.ClosedAt != nil {
		t.Errorf("open: %+v\nwant title %q", o, wantTitle)
	}
	if len([]rune(wantTitle)) != 80 {
		t.Errorf("title is %d characters", len([]rune(wantTitle)))
	}
	if q := by["quiet"]; q.Title != "" || q.MessageCount != 1 || q.ToolCallCount != 0 {
		t.Errorf("quiet: %+v", q)
	}
}

func TestTranscriptAndDelete(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	session(t, db, "s", func(s *Session) { s.PlanGeneration = 1 })
	session(t, db, "other", nil)
	if err := InsertSteps(ctx, db.Pool, "s", 1, []string{"look", "write back"}); err != nil {
		t.Fatal(err)
	}
	if _, err := InsertQuestion(ctx, db.Pool, "s", "which one?", nil); err != nil {
		t.Fatal(err)
	}
	if err := InsertActivity(ctx, db.Pool, Activity{SessionID: "s", Kind: "exec", Entity: "lxc:a"}); err != nil {
		t.Fatal(err)
	}
	u, _ := AppendMessage(ctx, db.Pool, "s", "user", "go", "")
	a1, _ := AppendMessage(ctx, db.Pool, "s", "assistant", "first", "")
	a2, _ := AppendMessage(ctx, db.Pool, "s", "assistant", "second", "")
	if _, err := AppendMessage(ctx, db.Pool, "other", "assistant", "elsewhere", ""); err != nil {
		t.Fatal(err)
	}
	// a1 made "late" then "early" by id, but "early" started first; "mcp" belongs to no message.
	for _, c := range []struct {
		id  string
		msg int64
		at  string
	}{{"late", a1, "2026-01-01T00:00:02Z"}, {"early", a1, "2026-01-01T00:00:01Z"}, {"mcp", 0, "2026-01-01T00:00:03Z"}, {"next", a2, "2026-01-01T00:00:04Z"}} {
		if err := StartToolCall(ctx, db.Pool, ToolCall{ID: c.id, SessionID: "s", Name: "n_" + c.id, Arguments: json.RawMessage(`{"k":"` + c.id + `"}`)}); err != nil {
			t.Fatal(err)
		}
		if err := FinishToolCall(ctx, db.Pool, c.id, "result "+c.id, c.id == "late", ""); err != nil {
			t.Fatal(err)
		}
		var msg any
		if c.msg != 0 {
			msg = c.msg
		}
		exec(t, db, `UPDATE tool_calls SET message_id = $2, started_at = $3 WHERE id = $1`, c.id, msg, c.at)
	}

	tr, err := Transcript(ctx, db.Pool, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 3 || tr[0].ID != u || tr[1].ID != a1 || tr[2].ID != a2 {
		t.Fatalf("transcript: %+v", tr)
	}
	if len(tr[0].Calls) != 0 || tr[0].Calls == nil {
		t.Errorf("user message calls: %#v", tr[0].Calls)
	}
	c := tr[1].Calls
	if len(c) != 2 || c[0].ID != "early" || c[1].ID != "late" || !c[1].IsError || c[0].Result != "result early" ||
		string(c[0].Arguments) != `{"k": "early"}` || c[0].Name != "n_early" {
		t.Errorf("a1 calls: %+v", c)
	}
	if len(tr[2].Calls) != 1 || tr[2].Calls[0].ID != "next" {
		t.Errorf("a2 calls: %+v", tr[2].Calls)
	}
	if title := SessionTitle(Session{}, tr); title != "first" {
		t.Errorf("title fallback %q", title)
	}

	gone, err := DeleteSession(ctx, db.Pool, "s")
	if err != nil || gone.Messages != 3 || gone.ToolCalls != 4 {
		t.Fatalf("delete: %+v %v", gone, err)
	}
	for _, table := range []string{"agent_sessions WHERE id", "session_messages WHERE session_id", "tool_calls WHERE session_id",
		"plan_steps WHERE session_id", "session_questions WHERE session_id", "agent_activity WHERE session_id"} {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` = 's'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d left (%v)", table, n, err)
		}
	}
	if tr, err := Transcript(ctx, db.Pool, "other"); err != nil || len(tr) != 1 {
		t.Errorf("other session touched: %+v %v", tr, err)
	}
	if _, err := DeleteSession(ctx, db.Pool, "s"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}
