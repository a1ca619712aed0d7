package sessionsapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/agent/internal/tasks"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

const token = "oik_agent-test-token"

var jellyfinPlan = []string{"Inspect the current jellyfin config and logs", "Restart jellyfin", "Write back the findings with upsert_knowledge"}

type fixture struct {
	t     *testing.T
	db    *pgtest.DB
	tasks *tasks.Service
	h     http.Handler
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.New(t)
	return &fixture{t: t, db: db, tasks: tasks.New(db.Pool), h: New(db.Pool, token, zerolog.Nop())}
}

// response is one answer of the handler.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (f *fixture) do(method, path string, header ...string) response {
	f.t.Helper()
	req := httptest.NewRequest(method, path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func (f *fixture) get(path string, v any) {
	f.t.Helper()
	r := f.do(http.MethodGet, path)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		f.t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	r.decode(f.t, v)
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) open(id string) tasks.Who {
	f.t.Helper()
	w := tasks.Who{Session: id, Actor: "nomos", Source: "chat"}
	if _, err := f.tasks.Ensure(context.Background(), w); err != nil {
		f.t.Fatal(err)
	}
	return w
}

// task opens a session with a goal and, when outcome is set, completes it with summary.
func (f *fixture) task(id, goal, outcome, summary string) tasks.Who {
	f.t.Helper()
	ctx := context.Background()
	w := f.open(id)
	if _, err := f.tasks.SetGoal(ctx, w, goal, ""); err != nil {
		f.t.Fatal(err)
	}
	if outcome != "" {
		if _, err := f.tasks.Complete(ctx, w, outcome, summary); err != nil {
			f.t.Fatal(err)
		}
	}
	return w
}

func (f *fixture) message(session, role, content string) int64 {
	f.t.Helper()
	id, err := storage.AppendMessage(context.Background(), f.db.Pool, session, role, content, "")
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// call records a tool call through the store, made by message msg (0: none, as an MCP
// session's) and started at `at`.
func (f *fixture) call(session, id string, msg int64, at time.Time, args, result string, isErr, finish bool) {
	f.t.Helper()
	ctx := context.Background()
	if err := storage.StartToolCall(ctx, f.db.Pool, storage.ToolCall{ID: id, SessionID: session, Name: "tool_" + id, Arguments: json.RawMessage(args)}); err != nil {
		f.t.Fatal(err)
	}
	if finish {
		if err := storage.FinishToolCall(ctx, f.db.Pool, id, result, isErr, ""); err != nil {
			f.t.Fatal(err)
		}
	}
	var m any
	if msg != 0 {
		m = msg
	}
	f.exec(`UPDATE tool_calls SET message_id = $2, started_at = $3 WHERE id = $1`, id, m, at)
}

func (f *fixture) activity(session, entity, entityID string) {
	f.t.Helper()
	if err := storage.InsertActivity(context.Background(), f.db.Pool, storage.Activity{SessionID: session, Kind: "exec", Summary: "ran", Entity: entity, EntityID: entityID}); err != nil {
		f.t.Fatal(err)
	}
}

type item struct {
	ID              string     `json:"id"`
	Title           string     `json:"title"`
	Status          string     `json:"status"`
	Outcome         string     `json:"outcome"`
	Blocker         string     `json:"blocker"`
	Goal            string     `json:"goal"`
	CreatedAt       time.Time  `json:"created_at"`
	ClosedAt        *time.Time `json:"closed_at"`
	MessageCount    int        `json:"message_count"`
	ToolCallCount   int        `json:"tool_call_count"`
	DurationSeconds int64      `json:"duration_seconds"`
}

type listPage struct {
	Items      []item  `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func idsOf(items []item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

const (
	jellyfinID = "0190b2c4-1111-7000-8000-00000000000a"
	pveID      = "0190b2c4-2222-7000-8000-00000000000b"
)

// TestListFilters: every filter alone, some together, and each bad value refused naming its
// field.
func TestListFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.task("s-ok", "Fix jellyfin transcoding on lxc:jellyfin", tasks.OutcomeSuccess, "transcoding works again")
	f.task("s-partial", "Upgrade pve1", tasks.OutcomePartial, "half done; the operator cancelled the rest, abandoned")
	f.task("s-failed", "Repair the jellyfin mount", tasks.OutcomeFailed, "the mount failed with exit code 32")
	f.open("s-exec")
	w := f.open("s-await")
	if err := f.tasks.AwaitApproval(context.Background(), w, "appr-1"); err != nil {
		t.Fatal(err)
	}
	f.task("s-old", "Old cleanup", tasks.OutcomeSuccess, "cleaned")
	f.exec(`UPDATE agent_sessions SET created_at = now() - interval '10 days' WHERE id = 's-old'`)
	f.exec(`UPDATE agent_sessions SET created_at = now() - interval '2 days' WHERE id = 's-exec'`)
	f.activity("s-ok", "lxc:jellyfin", jellyfinID)
	f.activity("s-failed", "lxc:jellyfin", "")
	f.activity("s-partial", "host:pve1", pveID)
	f.activity("s-old", "host:pve1", "")

	var all listPage
	f.get("/internal/sessions", &all)
	by := map[string]item{}
	for _, it := range all.Items {
		by[it.ID] = it
	}
	if len(all.Items) != 6 || all.NextCursor != nil {
		t.Fatalf("all: %+v", all)
	}
	if p := by["s-partial"]; p.Status != "completed" || p.Outcome != "partial" || p.Blocker != "user_abandoned" {
		t.Fatalf("s-partial: %+v", p)
	}
	if p := by["s-failed"]; p.Status != "failed" || p.Outcome != "failed" || p.Blocker != "tool_error" || p.Goal != "Repair the jellyfin mount" {
		t.Fatalf("s-failed: %+v", p)
	}

	rfc := func(d time.Duration) string { return url.QueryEscape(time.Now().Add(-d).UTC().Format(time.RFC3339)) }
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"outcome=success", []string{"s-ok", "s-old"}},
		{"outcome=partial,failed", []string{"s-partial", "s-failed"}},
		{"outcome=partial&outcome=failed", []string{"s-partial", "s-failed"}},
		{"status=executing,awaiting_input", []string{"s-exec", "s-await"}},
		{"status=completed", []string{"s-ok", "s-partial", "s-old"}},
		{"status=failed", []string{"s-failed"}},
		{"status=abandoned", []string{}},
		{"blocker=tool_error", []string{"s-failed"}},
		{"blocker=user_abandoned,approval_timeout", []string{"s-partial"}},
		{"entity_id=lxc:jellyfin", []string{"s-ok", "s-failed"}},
		{"entity_id=" + jellyfinID, []string{"s-ok"}},
		{"entity_id=" + strings.ToUpper(pveID), []string{"s-partial"}},
		{"entity_id=host:pve1", []string{"s-partial", "s-old"}},
		{"entity_id=lxc:nothing", []string{}},
		{"since=7d", []string{"s-ok", "s-partial", "s-failed", "s-exec", "s-await"}},
		{"since=36h", []string{"s-ok", "s-partial", "s-failed", "s-await"}},
		{"since=90m", []string{"s-ok", "s-partial", "s-failed", "s-await"}},
		{"since=" + rfc(24*time.Hour), []string{"s-ok", "s-partial", "s-failed", "s-await"}},
		{"since=" + rfc(9*24*time.Hour), []string{"s-ok", "s-partial", "s-failed", "s-exec", "s-await"}},
		// An offset whose '+' was not escaped arrives as a space.
		{"since=" + time.Now().Add(-9*24*time.Hour).In(time.FixedZone("", 2*3600)).Format(time.RFC3339), []string{"s-ok", "s-partial", "s-failed", "s-exec", "s-await"}},
		{"outcome=success&since=7d", []string{"s-ok"}},
		{"entity_id=host:pve1&status=completed&outcome=partial&blocker=user_abandoned", []string{"s-partial"}},
		{"outcome=", []string{"s-ok", "s-partial", "s-failed", "s-exec", "s-await", "s-old"}},
	} {
		var p listPage
		f.get("/internal/sessions?"+c.query, &p)
		if got := idsOf(p.Items); !slices.Equal(sorted(got), sorted(c.want)) || p.NextCursor != nil {
			t.Errorf("%s: got %v (next %v), want %v", c.query, got, p.NextCursor, c.want)
		}
	}

	for _, c := range []struct{ query, field string }{
		{"outcome=bogus", "outcome"},
		{"outcome=success,,maybe", "outcome"},
		{"status=done", "status"},
		{"blocker=gremlins", "blocker"},
		{"entity_id=jellyfin", "entity_id"},
		{"entity_id=lxc:", "entity_id"},
		{"since=yesterday", "since"},
		{"since=-7d", "since"},
		{"since=0m", "since"},
		{"limit=0", "limit"},
		{"limit=201", "limit"},
		{"limit=ten", "limit"},
		{"cursor=!!!", "cursor"},
		{"cursor=bm9wZQ", "cursor"},
	} {
		r := f.do(http.MethodGet, "/internal/sessions?"+c.query)
		var p problemBody
		r.decode(t, &p)
		if r.status != http.StatusUnprocessableEntity || r.header.Get("Content-Type") != ProblemMediaType ||
			p.Field != c.field || p.Status != 422 || p.Type != "about:blank" || p.Title == "" || p.Detail == "" {
			t.Errorf("%s: %d %s", c.query, r.status, r.body)
		}
	}
}

// TestListPages walks the list page by page: newest first, ties on created_at broken by id,
// no session missed or repeated, next_cursor null on the last page; with a filter too.
func TestListPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 23 {
		w := f.open(fmt.Sprintf("p%02d", i))
		if i%3 == 0 {
			if _, err := f.tasks.Complete(context.Background(), w, tasks.OutcomeSuccess, "done"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Five sessions share one created_at to the microsecond; others are spread out.
	f.exec(`UPDATE agent_sessions SET created_at = '2026-11-30T10:00:00.654321Z' WHERE id IN ('p03', 'p04', 'p05', 'p06', 'p07')`)
	f.exec(`UPDATE agent_sessions SET created_at = now() - interval '1 hour' * substr(id, 2)::int WHERE id > 'p10'`)
	order := func(where string) []string {
		rows, err := f.db.Pool.Query(context.Background(), `SELECT id FROM agent_sessions `+where+` ORDER BY created_at DESC, id DESC`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}
	walk := func(query string, limit int) ([]string, []int) {
		var got []string
		var sizes []int
		cursor := ""
		for range 30 {
			path := fmt.Sprintf("/internal/sessions?limit=%d%s", limit, query)
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			var p listPage
			f.get(path, &p)
			got = append(got, idsOf(p.Items)...)
			sizes = append(sizes, len(p.Items))
			if p.NextCursor == nil {
				return got, sizes
			}
			cursor = *p.NextCursor
		}
		t.Fatal("paging does not end")
		return nil, nil
	}
	got, sizes := walk("", 5)
	if want := order(""); !slices.Equal(got, want) || !slices.Equal(sizes, []int{5, 5, 5, 5, 3}) {
		t.Fatalf("pages %v: got %v, want %v", sizes, got, want)
	}
	got, sizes = walk("&status=completed", 3)
	if want := order("WHERE status = 'completed'"); !slices.Equal(got, want) || !slices.Equal(sizes, []int{3, 3, 2}) {
		t.Fatalf("completed pages %v: got %v, want %v", sizes, got, want)
	}
	// An exact page: the last page is full and still says there is no more.
	got, sizes = walk("&status=completed", 8)
	if len(got) != 8 || !slices.Equal(sizes, []int{8}) {
		t.Fatalf("exact page %v: %v", sizes, got)
	}
	// The default limit is 50.
	var p listPage
	f.get("/internal/sessions", &p)
	if len(p.Items) != 23 || p.NextCursor != nil {
		t.Fatalf("default page: %d items, next %v", len(p.Items), p.NextCursor)
	}
}

// TestListCountsDurationTitle: counts and durations computed by the server; the title falls
// back to the first assistant text, then to "".
func TestListCountsDurationTitle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.task("done", "Fix the NAS share\nthat jellyfin mounts", tasks.OutcomeSuccess, "fixed")
	f.exec(`UPDATE agent_sessions SET created_at = now() - interval '3 hours',
		closed_at = now() - interval '3 hours' + interval '7322.9 seconds' WHERE id = 'done'`)
	f.open("chat")
	f.exec(`UPDATE agent_sessions SET created_at = now() - interval '120 seconds' WHERE id = 'chat'`)
	f.open("mute")

	f.message("done", "user", "fix the share")
	a := f.message("done", "assistant", "looking")
	f.message("done", "assistant", "fixed")
	f.message("done", "note", "task completed")
	at := time.Now()
	f.call("done", "d1", a, at, `{"ref":"nas"}`, "ok", false, true)
	f.call("done", "d2", a, at.Add(time.Second), `{}`, "ok", false, true)
	f.call("done", "d3", 0, at.Add(2*time.Second), `{}`, "", false, false)
	f.message("chat", "user", "what is up with the jellyfin box?")
	long := "Let me check the jellyfin container, its NAS mount and the transcoder; I will report back on each of them."
	f.message("chat", "assistant", long)
	f.message("chat", "assistant", "Second text")
	f.message("mute", "user", "hello?")

	var p listPage
	f.get("/internal/sessions", &p)
	by := map[string]item{}
	for _, it := range p.Items {
		by[it.ID] = it
	}
	if d := by["done"]; d.MessageCount != 4 || d.ToolCallCount != 3 || d.DurationSeconds != 7322 || d.Title != "Fix the NAS share" || d.ClosedAt == nil {
		t.Errorf("done: %+v", d)
	}
	want := []rune(long)[:79]
	if c := by["chat"]; c.MessageCount != 3 || c.ToolCallCount != 0 || c.DurationSeconds < 120 || c.DurationSeconds > 180 ||
		c.Title != strings.TrimSpace(string(want))+"…" || c.ClosedAt != nil || c.Goal != "" {
		t.Errorf("chat: %+v", c)
	}
	if m := by["mute"]; m.Title != "" || m.MessageCount != 1 || m.DurationSeconds > 60 {
		t.Errorf("mute: %+v", m)
	}
	// The answer carries exactly the documented members.
	var raw struct {
		Items []map[string]json.RawMessage `json:"items"`
	}
	f.get("/internal/sessions?limit=1", &raw)
	var keys []string
	for k := range raw.Items[0] {
		keys = append(keys, k)
	}
	if want := []string{"blocker", "closed_at", "created_at", "duration_seconds", "goal", "id", "message_count", "outcome", "status", "title", "tool_call_count"}; !slices.Equal(sorted(keys), want) {
		t.Errorf("item members %v, want %v", sorted(keys), want)
	}
}

type detail struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	CreatedAt time.Time  `json:"created_at"`
	ClosedAt  *time.Time `json:"closed_at"`
	Task      struct {
		Goal, Status, Outcome, Blocker string
	} `json:"task"`
	Plan struct {
		Generation int `json:"generation"`
		Steps      []struct {
			Index  int    `json:"index"`
			Text   string `json:"text"`
			Status string `json:"status"`
		} `json:"steps"`
	} `json:"plan"`
	Messages []struct {
		ID        int64     `json:"id"`
		Role      string    `json:"role"`
		Content   string    `json:"content"`
		CreatedAt time.Time `json:"created_at"`
		ToolCalls []struct {
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Result    string          `json:"result"`
			IsError   bool            `json:"is_error"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

// TestGetSession: one session with its task, its current plan (numbered from 1) and its
// messages with the calls each made, in order.
func TestGetSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	w := f.task("chat-1", "Fix jellyfin transcoding on lxc:jellyfin", "", "")
	if _, err := f.tasks.ProposePlan(ctx, w, []string{"Inspect the old config", "Write back the findings with upsert_knowledge"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tasks.ProposePlan(ctx, w, jellyfinPlan); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tasks.UpdateStep(ctx, w, 1, storage.StepDone, "config read"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tasks.UpdateStep(ctx, w, 2, storage.StepRunning, ""); err != nil {
		t.Fatal(err)
	}
	u := f.message("chat-1", "user", "jellyfin stutters")
	a1 := f.message("chat-1", "assistant", "Let me look.")
	a2 := f.message("chat-1", "assistant", "Restarting it.")
	n := f.message("chat-1", "note", "step 2 running")
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	// a1's calls were written "second" first but "first" started earlier.
	f.call("chat-1", "second", a1, base.Add(2*time.Second), `{"lines":200,"ref":"lxc:jellyfin"}`, "log lines…", false, true)
	f.call("chat-1", "first", a1, base.Add(time.Second), `{"ref":"lxc:jellyfin"}`, `{"state":"running"}`, false, true)
	f.call("chat-1", "restart", a2, base.Add(3*time.Second), `{"action":"restart"}`, "gate refused", true, true)

	var d detail
	f.get("/internal/sessions/chat-1", &d)
	if d.ID != "chat-1" || d.Title != "Fix jellyfin transcoding on lxc:jellyfin" || d.ClosedAt != nil || d.CreatedAt.IsZero() {
		t.Fatalf("session: %+v", d)
	}
	if d.Task.Goal != "Fix jellyfin transcoding on lxc:jellyfin" || d.Task.Status != "executing" || d.Task.Outcome != "" || d.Task.Blocker != "" {
		t.Fatalf("task: %+v", d.Task)
	}
	if d.Plan.Generation != 2 || len(d.Plan.Steps) != 3 {
		t.Fatalf("plan: %+v", d.Plan)
	}
	for i, want := range []string{"done", "running", "pending"} {
		if s := d.Plan.Steps[i]; s.Index != i+1 || s.Text != jellyfinPlan[i] || s.Status != want {
			t.Errorf("step %d: %+v", i+1, s)
		}
	}
	if len(d.Messages) != 4 || d.Messages[0].ID != u || d.Messages[1].ID != a1 || d.Messages[2].ID != a2 || d.Messages[3].ID != n {
		t.Fatalf("messages: %+v", d.Messages)
	}
	if m := d.Messages[0]; m.Role != "user" || m.Content != "jellyfin stutters" || m.ToolCalls == nil || len(m.ToolCalls) != 0 || m.CreatedAt.IsZero() {
		t.Errorf("user message: %+v", m)
	}
	c := d.Messages[1].ToolCalls
	if len(c) != 2 || c[0].ID != "first" || c[1].ID != "second" || c[0].Name != "tool_first" || c[0].Result != `{"state":"running"}` || c[0].IsError {
		t.Fatalf("a1 calls: %+v", c)
	}
	var args map[string]any
	if err := json.Unmarshal(c[1].Arguments, &args); err != nil || args["lines"] != float64(200) || args["ref"] != "lxc:jellyfin" {
		t.Errorf("arguments %s: %v", c[1].Arguments, err)
	}
	if c := d.Messages[2].ToolCalls; len(c) != 1 || c[0].ID != "restart" || !c[0].IsError || c[0].Result != "gate refused" {
		t.Errorf("a2 calls: %+v", c)
	}

	// Completing the task closes it; the answer shows the outcome and the closed steps.
	if _, err := f.tasks.Complete(ctx, w, tasks.OutcomeFailed, "the restart was refused by the gate"); err != nil {
		t.Fatal(err)
	}
	f.get("/internal/sessions/chat-1", &d)
	if d.ClosedAt == nil || d.Task.Status != "failed" || d.Task.Outcome != "failed" || d.Task.Blocker != "classifier_overreach" ||
		d.Plan.Steps[1].Status != "skipped" || d.Plan.Steps[0].Status != "done" {
		t.Fatalf("closed: %+v", d)
	}

	// A session without a goal or plan: title from the first assistant text, no steps.
	f.open("mcp-1")
	f.message("mcp-1", "assistant", "Checking the fleet.")
	var e detail
	f.get("/internal/sessions/mcp-1", &e)
	if e.Title != "Checking the fleet." || e.Plan.Generation != 0 || e.Plan.Steps == nil || len(e.Plan.Steps) != 0 || len(e.Messages) != 1 {
		t.Fatalf("mcp-1: %+v", e)
	}
	// Exactly the documented members.
	var raw map[string]json.RawMessage
	f.get("/internal/sessions/mcp-1", &raw)
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	if want := []string{"closed_at", "created_at", "id", "messages", "plan", "task", "title"}; !slices.Equal(sorted(keys), want) {
		t.Errorf("members %v, want %v", sorted(keys), want)
	}
}

// TestToolCalls lists every call in order, those of no message (an MCP session's) too; they
// appear in no message of the session's answer.
func TestToolCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.open("mcp-2")
	a := f.message("mcp-2", "assistant", "one")
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	f.call("mcp-2", "c3", 0, base.Add(3*time.Second), `{"n":3}`, "", false, false)
	f.call("mcp-2", "c1", 0, base.Add(1*time.Second), `{"n":1}`, "one", false, true)
	f.call("mcp-2", "c2", a, base.Add(2*time.Second), `{"n":2}`, "two", true, true)

	var p struct {
		Items []struct {
			ID         string          `json:"id"`
			Name       string          `json:"name"`
			Arguments  json.RawMessage `json:"arguments"`
			Result     string          `json:"result"`
			IsError    bool            `json:"is_error"`
			StartedAt  time.Time       `json:"started_at"`
			FinishedAt *time.Time      `json:"finished_at"`
		} `json:"items"`
	}
	f.get("/internal/sessions/mcp-2/tool_calls", &p)
	if len(p.Items) != 3 {
		t.Fatalf("calls: %+v", p)
	}
	for i, c := range p.Items {
		if c.ID != fmt.Sprintf("c%d", i+1) || c.Name != "tool_"+c.ID || string(c.Arguments) != fmt.Sprintf(`{"n":%d}`, i+1) ||
			!c.StartedAt.Equal(base.Add(time.Duration(i+1)*time.Second)) {
			t.Errorf("call %d: %+v", i, c)
		}
	}
	if c := p.Items[0]; c.Result != "one" || c.IsError || c.FinishedAt == nil {
		t.Errorf("c1: %+v", c)
	}
	if c := p.Items[1]; c.Result != "two" || !c.IsError {
		t.Errorf("c2: %+v", c)
	}
	if c := p.Items[2]; c.Result != "" || c.FinishedAt != nil {
		t.Errorf("c3 (unfinished): %+v", c)
	}
	var d detail
	f.get("/internal/sessions/mcp-2", &d)
	if len(d.Messages) != 1 || len(d.Messages[0].ToolCalls) != 1 || d.Messages[0].ToolCalls[0].ID != "c2" {
		t.Errorf("messages: %+v", d.Messages)
	}
	// A session without calls answers an empty list, not null.
	f.open("empty")
	r := f.do(http.MethodGet, "/internal/sessions/empty/tool_calls")
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"items":[]}` {
		t.Errorf("empty: %d %s", r.status, r.body)
	}
}

// TestDelete removes the session and everything hanging off it, with its audit row and its
// event in the same transaction.
func TestDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	w := f.task("gone", "Fix jellyfin transcoding on lxc:jellyfin", "", "")
	if _, err := f.tasks.ProposePlan(ctx, w, jellyfinPlan); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tasks.Ask(ctx, w, "Restart now?", []string{"yes", "no"}); err != nil {
		t.Fatal(err)
	}
	m := f.message("gone", "assistant", "asking")
	f.call("gone", "g1", m, time.Now(), `{}`, "ok", false, true)
	f.call("gone", "g2", 0, time.Now(), `{}`, "ok", false, true)
	f.activity("gone", "lxc:jellyfin", jellyfinID)
	f.task("kept", "Another goal", "", "")
	f.message("kept", "user", "hi")

	r := f.do(http.MethodDelete, "/internal/sessions/gone", ActorHeader, "dana")
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	for _, table := range []string{"agent_sessions WHERE id", "session_messages WHERE session_id", "tool_calls WHERE session_id",
		"plan_steps WHERE session_id", "session_questions WHERE session_id", "agent_activity WHERE session_id"} {
		if n := f.count(`SELECT count(*) FROM ` + table + ` = 'gone'`); n != 0 {
			t.Errorf("%s: %d rows left", table, n)
		}
	}
	if n := f.count(`SELECT count(*) FROM session_messages WHERE session_id = 'kept'`); n != 1 {
		t.Errorf("kept lost its messages: %d", n)
	}
	var actor, method, path string
	var before []byte
	err := f.db.Pool.QueryRow(ctx, `SELECT actor, method, path, before FROM audit_log WHERE action = 'session.delete' AND correlation_id = 'gone'`).
		Scan(&actor, &method, &path, &before)
	if err != nil || actor != "dana" || method != "DELETE" || path != "/internal/sessions/gone" {
		t.Fatalf("audit: %q %q %q %v", actor, method, path, err)
	}
	var snap storage.Session
	if err := json.Unmarshal(before, &snap); err != nil || snap.ID != "gone" || snap.Goal != "Fix jellyfin transcoding on lxc:jellyfin" {
		t.Errorf("audit before: %s %v", before, err)
	}
	var evActor string
	var payload []byte
	err = f.db.Pool.QueryRow(ctx, `SELECT actor, payload FROM events WHERE type = 'session.deleted' AND correlation_id = 'gone'`).Scan(&evActor, &payload)
	if err != nil || evActor != "dana" {
		t.Fatalf("event: %q %v", evActor, err)
	}
	var ev map[string]any
	if err := json.Unmarshal(payload, &ev); err != nil || ev["session_id"] != "gone" || ev["messages"] != float64(1) || ev["tool_calls"] != float64(2) ||
		ev["status"] != "awaiting_input" {
		t.Errorf("event payload: %s %v", payload, err)
	}

	// It is gone for every endpoint.
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/internal/sessions/gone"}, {http.MethodGet, "/internal/sessions/gone/tool_calls"}, {http.MethodDelete, "/internal/sessions/gone"},
	} {
		if r := f.do(c.method, c.path); r.status != http.StatusNotFound {
			t.Errorf("%s %s: %d", c.method, c.path, r.status)
		}
	}
	var p listPage
	f.get("/internal/sessions", &p)
	if !slices.Equal(idsOf(p.Items), []string{"kept"}) {
		t.Errorf("list after delete: %v", idsOf(p.Items))
	}
	// Without the header the actor is the agent.
	r = f.do(http.MethodDelete, "/internal/sessions/kept")
	if r.status != http.StatusNoContent {
		t.Fatalf("delete kept: %d %s", r.status, r.body)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'session.delete' AND correlation_id = 'kept' AND actor = 'agent'`); n != 1 {
		t.Errorf("audit rows of kept by agent: %d", n)
	}
	if n := f.count(`SELECT count(*) FROM events WHERE type = 'session.deleted'`); n != 2 {
		t.Errorf("session.deleted events: %d", n)
	}
}

// TestDeleteRefusedWhileAwaitingApproval: 409 and nothing changed; once the decision moved
// the task on, the session may go.
func TestDeleteRefusedWhileAwaitingApproval(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	w := f.task("waits", "Restart jellyfin", "", "")
	f.message("waits", "assistant", "waiting on the approval")
	if err := f.tasks.AwaitApproval(ctx, w, "appr-9"); err != nil {
		t.Fatal(err)
	}
	r := f.do(http.MethodDelete, "/internal/sessions/waits", ActorHeader, "dana")
	var p problemBody
	r.decode(t, &p)
	if r.status != http.StatusConflict || r.header.Get("Content-Type") != ProblemMediaType || p.Status != 409 ||
		p.Detail != "the session waits on an approval; deny or let it finish first" {
		t.Fatalf("delete while awaiting approval: %d %s", r.status, r.body)
	}
	if n := f.count(`SELECT count(*) FROM session_messages WHERE session_id = 'waits'`); n != 1 {
		t.Errorf("messages after refusal: %d", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'session.delete'`) + f.count(`SELECT count(*) FROM events WHERE type = 'session.deleted'`); n != 0 {
		t.Errorf("a refused delete left %d audit rows and events", n)
	}
	// A session waiting on a question may be deleted; so may this one after the decision.
	q := f.task("asks", "Pick a disk", "", "")
	if _, err := f.tasks.Ask(ctx, q, "Which disk?", nil); err != nil {
		t.Fatal(err)
	}
	if r := f.do(http.MethodDelete, "/internal/sessions/asks"); r.status != http.StatusNoContent {
		t.Errorf("delete awaiting a question: %d %s", r.status, r.body)
	}
	if err := f.tasks.Decided(ctx, "waits", "dana", "deny"); err != nil {
		t.Fatal(err)
	}
	if r := f.do(http.MethodDelete, "/internal/sessions/waits"); r.status != http.StatusNoContent {
		t.Errorf("delete after the decision: %d %s", r.status, r.body)
	}
}

// TestAuthAndNotFound: every endpoint needs the agent's own token; an unknown session is 404.
func TestAuthAndNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.open("s1")
	paths := []struct{ method, path string }{
		{http.MethodGet, "/internal/sessions"}, {http.MethodGet, "/internal/sessions/s1"},
		{http.MethodGet, "/internal/sessions/s1/tool_calls"}, {http.MethodDelete, "/internal/sessions/s1"},
		{http.MethodGet, "/internal/sessions/nope"}, {http.MethodGet, "/internal/elsewhere"},
	}
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, token} {
		for _, p := range paths {
			req := httptest.NewRequest(p.method, p.path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, req)
			var pb problemBody
			_ = json.Unmarshal(rec.Body.Bytes(), &pb)
			if rec.Code != http.StatusUnauthorized || rec.Header().Get("Content-Type") != ProblemMediaType || pb.Status != 401 ||
				pb.Type != "about:blank" || pb.Title != "Unauthorized" || pb.Detail == "" || rec.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%q %s %s: %d %s", auth, p.method, p.path, rec.Code, rec.Body)
			}
		}
	}
	if n := f.count(`SELECT count(*) FROM agent_sessions`); n != 1 {
		t.Fatalf("an unauthorised request changed something: %d sessions", n)
	}
	// The scheme is case-insensitive.
	r := f.do(http.MethodGet, "/internal/sessions", "Authorization", "bearer "+token)
	if r.status != http.StatusOK {
		t.Errorf("lower-case scheme: %d", r.status)
	}
	// An agent without a token refuses everyone, even an empty bearer.
	closed := New(f.db.Pool, "", zerolog.Nop())
	for _, auth := range []string{"Bearer ", "Bearer x"} {
		req := httptest.NewRequest(http.MethodGet, "/internal/sessions", nil)
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		closed.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("tokenless agent, %q: %d", auth, rec.Code)
		}
	}

	for _, p := range []struct{ method, path string }{
		{http.MethodGet, "/internal/sessions/nope"}, {http.MethodGet, "/internal/sessions/nope/tool_calls"},
		{http.MethodDelete, "/internal/sessions/nope"}, {http.MethodGet, "/internal/sessions/" + strings.Repeat("x", 300)},
	} {
		r := f.do(p.method, p.path)
		var pb problemBody
		r.decode(t, &pb)
		if r.status != http.StatusNotFound || r.header.Get("Content-Type") != ProblemMediaType || pb.Status != 404 || pb.Type != "about:blank" ||
			pb.Title == "" || !strings.Contains(pb.Detail, "no session") || pb.Field != "" {
			t.Errorf("%s %s: %d %s", p.method, p.path, r.status, r.body)
		}
	}
	// An id with a slash, escaped in the path, names one session.
	f.open("mcp/with/slash")
	f.message("mcp/with/slash", "assistant", "hi")
	var d detail
	f.get("/internal/sessions/"+url.PathEscape("mcp/with/slash"), &d)
	if d.ID != "mcp/with/slash" || len(d.Messages) != 1 {
		t.Errorf("escaped id: %+v", d)
	}
}
