package chat_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Token names: approvals name the operator who decided by them, and relays the agent token.
const (
	operatorName = "e2e-chat-operator"
	readonlyName = "e2e-chat-readonly"
	// agentName is the api's name of OIKOS_AGENT_TOKEN (auth.AgentTokenName): the token every
	// agent of the stack calls the api with, as Nomos does.
	agentName = "nomos"
)

// stack is the package's world: database, api, lab simulator with the scheduler's executor,
// and the router through which the api reaches the agents the tests start.
type stack struct {
	db     *pgtest.DB
	api    *apiapp.Server
	apiURL string
	client *e2estack.Client
	router *router
	sim    *labsim.Sim
	simDir string
	log    zerolog.Logger
	logs   *syncBuffer // every line the api and the scheduler's parts logged (secrets_test.go)
	// secretsKey is the scheduler's OIKOS_SECRETS_KEY (the api runs without one).
	secretsKey string

	operator, readonly, agentToken string // tokens

	agents map[string]*scripted // the prestarted agents by name (agents_test.go)
}

// buildStack starts everything but the agents; t's Cleanup (the package's PackageTB) stops
// it in reverse order.
func buildStack(t *e2estack.PackageTB) (s *stack, err error) {
	defer e2estack.Recover(&err)
	ctx := context.Background()
	// Every line is kept, so a test can look for what must never be logged.
	s = &stack{logs: &syncBuffer{}}
	var out io.Writer = s.logs
	if os.Getenv("OIKOS_E2E_CHAT_LOG") != "" {
		out = zerolog.MultiLevelWriter(s.logs, zerolog.ConsoleWriter{Out: os.Stderr})
	}
	s.log = zerolog.New(out).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	var key [32]byte
	_, _ = rand.Read(key[:])
	s.secretsKey = base64.StdEncoding.EncodeToString(key[:])
	s.db = pgtest.New(t)

	// The router first: the api is configured with its URL (OIKOS_AGENT_URL), the agents are
	// started later, one per script.
	s.router, err = startRouter(t)
	if err != nil {
		return nil, err
	}
	var tok [24]byte
	_, _ = rand.Read(tok[:])
	s.agentToken = "oik_" + hex.EncodeToString(tok[:])
	if s.api, s.apiURL, err = e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: s.db.URL, SeedOnStart: true, Demo: true,
		AgentToken: s.agentToken, AgentURL: s.router.url}, s.log); err != nil {
		return nil, err
	}
	s.client = &e2estack.Client{URL: s.apiURL, HTTP: httpClient}
	if err := e2estack.MintTokens(ctx, s.api,
		e2estack.Token{Name: operatorName, Role: "operator", Into: &s.operator},
		e2estack.Token{Name: readonlyName, Role: "readonly", Into: &s.readonly},
	); err != nil {
		return nil, err
	}

	// The lab simulator serving the seeded inventory over SSH, and the scheduler's executor
	// running gated executions on it (e2e/agent wires it the same way).
	s.simDir = t.TempDir()
	if s.sim, err = e2estack.StartLab(ctx, t, s.db, e2estack.LabOptions{StateDir: s.simDir, SchedulerID: "e2e-chat-scheduler",
		Concurrency: 16, Log: s.log, SecretsKey: s.secretsKey}); err != nil {
		return nil, err
	}
	return s, nil
}

// ---------------------------------------------------------------------------- agents

// agentProc is one agent started in-process through its composition root.
type agentProc struct {
	url   string
	model string
	proc  *e2estack.Agent
	gone  chan struct{} // closed when stop is called
	once  sync.Once
}

// agentOpts configures startAgent.
type agentOpts struct {
	BaseURL, Model, APIKey string
}

// startAgent starts an agent on a free port, talking to the model at o.BaseURL and to the api
// with the agent token; the test's cleanup stops it. An agent that starts follows again the
// handed-off executions of every chat session in the database (loop.Recover), so a test
// starts one only while no other test's session waits on an execution: the package's agents
// are started before any test runs (agents_test.go).
func (s *stack) startAgent(tb testing.TB, o agentOpts) *agentProc {
	tb.Helper()
	a, err := s.launchAgent(o)
	if err != nil {
		tb.Fatalf("agent: %v", err)
	}
	tb.Cleanup(a.stop)
	return a
}

// launchAgent is startAgent without a test; the caller stops it.
func (s *stack) launchAgent(o agentOpts) (*agentProc, error) {
	p, err := e2estack.LaunchAgent(map[string]string{
		"OIKOS_DATABASE_URL": s.db.URL,
		"OIKOS_AGENT_ADDR":   "127.0.0.1:0",
		"OIKOS_API_URL":      s.apiURL,
		"OIKOS_AGENT_TOKEN":  s.agentToken,
		"OIKOS_SCHEMA_WAIT":  "30s",
		"OIKOS_LLM_BASE_URL": o.BaseURL,
		"OIKOS_LLM_MODEL":    o.Model,
		"OIKOS_LLM_API_KEY":  o.APIKey,
		// The slow-first-token wire mode delays every answer by less than a second: the
		// status event must come before it ends.
		"OIKOS_LLM_STATUS_AFTER": "150ms",
		// The context window every agent fits its requests to (default 8192); the budget
		// tests enforce the same window in llmsim (budget_test.go).
		"OIKOS_LLM_CONTEXT_TOKENS": os.Getenv("OIKOS_E2E_LLM_CONTEXT_TOKENS"),
	}, s.log)
	if err != nil {
		return nil, err
	}
	return &agentProc{url: p.URL, model: o.Model, proc: p, gone: make(chan struct{})}, nil
}

// stop cancels the agent's context and waits for RunConfig to return (a turn still streaming
// holds the HTTP server's shutdown for up to its 10 s grace).
func (a *agentProc) stop() {
	a.once.Do(func() {
		close(a.gone)
		a.proc.Stop(40 * time.Second)
	})
}

// ---------------------------------------------------------------------------- the api over HTTP

var httpClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 128}, Timeout: 5 * time.Minute}

// execution is the part of the api's execution the tests read.
type execution struct {
	ID           string  `json:"id"`
	Target       string  `json:"target"`
	Command      string  `json:"command"`
	RiskClass    string  `json:"risk_class"`
	Status       string  `json:"status"`
	AuthorisedBy string  `json:"authorised_by"`
	ApprovalID   *string `json:"approval_id"`
	SessionID    *string `json:"session_id"`
	RequestedBy  string  `json:"requested_by"`
	ExitCode     *int    `json:"exit_code"`
}

// executions lists the executions of a session, oldest first.
func (s *stack) executions(tb testing.TB, session string) []execution {
	tb.Helper()
	var page struct {
		Items []execution `json:"items"`
	}
	e2estack.OK(tb, &page)(s.client.API(tb, s.operator).ListExecutions(tb.Context(),
		&apiclient.ListExecutionsParams{SessionId: &session, Limit: apiclient.Ptr(500)}))
	for i, j := 0, len(page.Items)-1; i < j; i, j = i+1, j-1 {
		page.Items[i], page.Items[j] = page.Items[j], page.Items[i]
	}
	return page.Items
}

// approval is the part of the api's approval the tests read.
type approval struct {
	ID          string    `json:"id"`
	ExecutionID string    `json:"execution_id"`
	SessionID   *string   `json:"session_id"`
	Target      string    `json:"target"`
	Command     string    `json:"command"`
	RiskClass   string    `json:"risk_class"`
	Status      string    `json:"status"`
	RequestedBy string    `json:"requested_by"`
	RequestedAt time.Time `json:"requested_at"`
	DecidedBy   *string   `json:"decided_by"`
	RelayedBy   *string   `json:"relayed_by"`
	Via         *string   `json:"via"`
	MessageID   *string   `json:"message_id"`
}

// approvals lists every approval of a session (any status), oldest first.
func (s *stack) approvals(tb testing.TB, session string) []approval {
	tb.Helper()
	var page struct {
		Items []approval `json:"items"`
	}
	e2estack.OK(tb, &page)(s.client.API(tb, s.operator).ListApprovals(tb.Context(), &apiclient.ListApprovalsParams{
		SessionId: &session, Status: apiclient.Ptr("pending,approved,denied,revoked,expired"), Limit: apiclient.Ptr(200)}))
	for i, j := 0, len(page.Items)-1; i < j; i, j = i+1, j-1 {
		page.Items[i], page.Items[j] = page.Items[j], page.Items[i]
	}
	return page.Items
}

// pendingApprovals lists a session's pending approvals.
func (s *stack) pendingApprovals(tb testing.TB, session string) []approval {
	tb.Helper()
	var out []approval
	for _, a := range s.approvals(tb, session) {
		if a.Status == "pending" {
			out = append(out, a)
		}
	}
	return out
}

// window is one row of approval_windows (no api route lists them).
type window struct {
	ID, Kind, SessionID, OpenedBy, Via, Target string
}

func (s *stack) windows(tb testing.TB, session string) []window {
	tb.Helper()
	rows, err := s.db.Pool.Query(context.Background(), `SELECT w.id::text, w.kind, COALESCE(w.session_id, ''), w.opened_by, w.via,
		COALESCE(e.slug, '') FROM approval_windows w LEFT JOIN entities e ON e.id = w.target_id
		WHERE w.session_id = $1 ORDER BY w.opened_at`, session)
	if err != nil {
		tb.Fatalf("approval windows: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (window, error) {
		var w window
		err := r.Scan(&w.ID, &w.Kind, &w.SessionID, &w.OpenedBy, &w.Via, &w.Target)
		return w, err
	})
	if err != nil {
		tb.Fatalf("approval windows: %v", err)
	}
	return out
}

// decide decides an approval with the operator's token through the api.
func (s *stack) decide(tb testing.TB, id, decision string) {
	tb.Helper()
	e2estack.OK(tb, nil)(s.client.API(tb, s.operator).DecideApproval(tb.Context(), id,
		apiclient.DecisionRequest{Decision: apiclient.DecisionRequestDecision(decision), Via: "api"}))
}

// cliPath is bin/oikos of the repository (make build), or "" when it is not built.
func cliPath() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	p := filepath.Join(wd, "..", "..", "bin", "oikos")
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p
	}
	return ""
}

// ---------------------------------------------------------------------------- sessions

// sessionView is GET /api/v1/sessions/{id}.
type sessionView struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Task  struct {
		Goal    string `json:"goal"`
		Status  string `json:"status"`
		Outcome string `json:"outcome"`
		Blocker string `json:"blocker"`
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
		ID        int64  `json:"id"`
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []call `json:"tool_calls"`
	} `json:"messages"`
}

// call is one tool call of a transcript.
type call struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Result    string          `json:"result"`
	IsError   bool            `json:"is_error"`
}

func (s *stack) session(tb testing.TB, id string) sessionView {
	tb.Helper()
	var v sessionView
	e2estack.OK(tb, &v)(s.client.API(tb, s.operator).GetSession(tb.Context(), id))
	return v
}

// sessionIfAny is session, or an empty view for a session that does not exist yet.
func (s *stack) sessionIfAny(tb testing.TB, id string) sessionView {
	tb.Helper()
	var v sessionView
	st, raw := e2estack.Answer(tb, &v)(s.client.API(tb, s.operator).GetSession(tb.Context(), id))
	switch st {
	case http.StatusOK:
	case http.StatusNotFound:
		return sessionView{ID: id}
	default:
		tb.Fatalf("GET /api/v1/sessions/%s: %d %s", id, st, raw)
	}
	return v
}

// calls lists a session's tool calls in transcript order.
func (v sessionView) calls() []call {
	var out []call
	for _, m := range v.Messages {
		out = append(out, m.ToolCalls...)
	}
	return out
}

// names are the names of calls.
func names(cs []call) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// lastAssistant is the text of the session's last assistant message with text.
func (v sessionView) lastAssistant() string {
	for i := len(v.Messages) - 1; i >= 0; i-- {
		if v.Messages[i].Role == "assistant" && strings.TrimSpace(v.Messages[i].Content) != "" {
			return v.Messages[i].Content
		}
	}
	return ""
}

// messageRow is one row of session_messages, read straight from the database (the sessions
// API does not show a message's status).
type messageRow struct {
	ID                         int64
	Role, Content, Status, Fin string
	APIMessageID               string
	CreatedAt                  time.Time
}

func (s *stack) messageRows(tb testing.TB, session string) []messageRow {
	tb.Helper()
	rows, err := s.db.Pool.Query(context.Background(), `SELECT id, role, content, status, finish_reason,
		COALESCE(api_message_id::text, ''), created_at FROM session_messages WHERE session_id = $1 ORDER BY id`, session)
	if err != nil {
		tb.Fatalf("session_messages: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (messageRow, error) {
		var m messageRow
		err := r.Scan(&m.ID, &m.Role, &m.Content, &m.Status, &m.Fin, &m.APIMessageID, &m.CreatedAt)
		return m, err
	})
	if err != nil {
		tb.Fatalf("session_messages: %v", err)
	}
	return out
}

// waitContinuation waits until the session's loop resumed on its own (A7: it stored a note
// beyond the notesBefore it had) and finished that turn: its last message is a complete
// assistant answer that asks for no tool, newer than the newest note.
func (s *stack) waitContinuation(tb testing.TB, session string, notesBefore int, within time.Duration) {
	tb.Helper()
	s.eventually(tb, within, "session "+session+" resumes and finishes its turn", func() (bool, string) {
		rows := s.messageRows(tb, session)
		notes, lastNote := 0, int64(-1)
		for _, m := range rows {
			if m.Role == "note" {
				notes++
				lastNote = m.ID
			}
		}
		if notes <= notesBefore {
			return false, fmt.Sprintf("%d notes", notes)
		}
		// The answer that ends a turn: complete and not asking for tools. (A message that
		// asks for tools is complete before its calls are recorded, so its finish reason,
		// tool_calls, tells it apart, not the count of its calls.)
		last := rows[len(rows)-1]
		if last.Role != "assistant" || last.Status != "complete" || last.ID < lastNote || last.Fin == "tool_calls" {
			return false, fmt.Sprintf("last message %d %s %s %s", last.ID, last.Role, last.Status, last.Fin)
		}
		var calls int
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tool_calls WHERE message_id = $1`, last.ID).Scan(&calls); err != nil {
			return false, err.Error()
		}
		if calls > 0 {
			return false, "the last message calls tools"
		}
		return true, ""
	})
}

func (s *stack) noteCount(tb testing.TB, session string) int {
	tb.Helper()
	n := 0
	for _, m := range s.messageRows(tb, session) {
		if m.Role == "note" {
			n++
		}
	}
	return n
}

// eventually re-checks cond on every outbox notification (and at least every 100 ms) until
// it holds, or fails the test after within.
func (s *stack) eventually(tb testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	e2estack.Eventually(tb, s.db.URL, within, 100*time.Millisecond, what, cond)
}

// writeGuestFile writes a file into a simulated guest's own file system (its sandbox
// directory), as if someone had put it there.
func (s *stack) writeGuestFile(tb testing.TB, host string, vmid int, path, content string) {
	tb.Helper()
	p := s.guestPath(host, vmid, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// guestPath is where a simulated guest keeps path (labsim's state directory holds each
// guest's file system under guests/<host>/<vmid>).
func (s *stack) guestPath(host string, vmid int, path string) string {
	return filepath.Join(s.simDir, "guests", host, strconv.Itoa(vmid), filepath.FromSlash(strings.TrimPrefix(path, "/")))
}

// newSession is a distinct session id for a test.
func newSession(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "e2e-chat-" + prefix + "-" + hex.EncodeToString(b[:])
}
