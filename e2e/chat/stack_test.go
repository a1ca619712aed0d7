package chat_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	agentapp "github.com/oikos-hq/oikos/agent/app"
	apiapp "github.com/oikos-hq/oikos/api/app"
	schedapp "github.com/oikos-hq/oikos/scheduler/app"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
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
	router *router
	sim    *labsim.Sim
	simDir string
	log    zerolog.Logger

	operator, readonly, agentToken string // tokens

	agents map[string]*scripted // the prestarted agents by name (agents_test.go)
}

// buildStack starts everything but the agents; t's Cleanup (the package's pkgTB) stops it in
// reverse order.
func buildStack(t *pkgTB) (s *stack, err error) {
	defer func() {
		if p := recover(); p != nil {
			se, ok := p.(stackError)
			if !ok {
				panic(p)
			}
			err = se.err
		}
	}()
	ctx := context.Background()
	s = &stack{log: zerolog.Nop()}
	if os.Getenv("OIKOS_E2E_CHAT_LOG") != "" {
		s.log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
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
	api, err := apiapp.Start(ctx, apiapp.Config{DatabaseURL: s.db.URL, Addr: "127.0.0.1:0", SeedOnStart: true,
		AgentToken: s.agentToken, AgentURL: s.router.url}, s.log)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	t.Cleanup(api.Stop)
	s.api, s.apiURL = api, "http://"+api.Addr().String()
	if s.operator, err = api.Auth.Create(ctx, operatorName, "operator"); err != nil {
		return nil, err
	}
	if s.readonly, err = api.Auth.Create(ctx, readonlyName, "readonly"); err != nil {
		return nil, err
	}

	// The lab simulator serving the seeded inventory over SSH, and the scheduler's executor
	// running gated executions on it (e2e/agent wires it the same way).
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	fleet, err := labsim.FleetFromInventory(seeds.Inventory())
	if err != nil {
		return nil, err
	}
	s.simDir = t.TempDir()
	s.sim, err = labsim.New(fleet, labsim.Options{
		StateDir:       s.simDir,
		Listen:         func(string) string { return "127.0.0.1:0" },
		AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()},
	})
	if err != nil {
		return nil, err
	}
	if err := s.sim.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(s.sim.Stop)
	pool := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: schedapp.NewHostKeys(s.db.Pool, s.log),
		DialTimeout: 10 * time.Second, Logger: s.log, Dial: s.sim.DialContext})
	t.Cleanup(pool.Close)
	connCfg, err := pgx.ParseConfig(s.db.URL)
	if err != nil {
		return nil, err
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: s.log})
	ex := schedapp.NewExecutor(schedapp.ExecutorOptions{
		Pool: s.db.Pool, SSH: pool, Fleet: schedapp.NewFleet(s.db.Pool, schedapp.FleetOptions{Logger: s.log}),
		Notifier: notifier, Logger: s.log, SchedulerID: "e2e-chat-scheduler", Concurrency: 16,
	})
	if err := notifier.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(notifier.Stop)
	if err := ex.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(ex.Stop)
	return s, nil
}

// ---------------------------------------------------------------------------- agents

// agentProc is one agent started in-process through its composition root.
type agentProc struct {
	url    string
	model  string
	cancel context.CancelFunc
	done   chan error
	gone   chan struct{} // closed when stop is called
	once   sync.Once
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
	env := map[string]string{
		"OIKOS_DATABASE_URL": s.db.URL,
		"OIKOS_AGENT_ADDR":   "127.0.0.1:0",
		"OIKOS_API_URL":      s.apiURL,
		"OIKOS_AGENT_TOKEN":  s.agentToken,
		"OIKOS_SCHEMA_WAIT":  "30s",
		"OIKOS_LLM_BASE_URL": o.BaseURL,
		"OIKOS_LLM_MODEL":    o.Model,
		"OIKOS_LLM_API_KEY":  o.APIKey,
	}
	cfg, err := agentapp.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &agentProc{model: o.Model, cancel: cancel, done: make(chan error, 1), gone: make(chan struct{})}
	ready := make(chan net.Addr, 1)
	go func() { a.done <- agentapp.RunConfig(ctx, cfg, s.log, func(ad net.Addr) { ready <- ad }) }()
	select {
	case ad := <-ready:
		a.url = "http://" + ad.String()
		return a, nil
	case err := <-a.done:
		cancel()
		return nil, err
	case <-time.After(60 * time.Second):
		cancel()
		return nil, fmt.Errorf("the agent did not start listening")
	}
}

// stop cancels the agent's context and waits for RunConfig to return (a turn still streaming
// holds the HTTP server's shutdown for up to its 10 s grace).
func (a *agentProc) stop() {
	a.once.Do(func() {
		close(a.gone)
		a.cancel()
		select {
		case <-a.done:
		case <-time.After(40 * time.Second):
		}
	})
}

// ---------------------------------------------------------------------------- the api over HTTP

var httpClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 128}, Timeout: 5 * time.Minute}

// apiDo calls the api with token and decodes a JSON answer into out (when non-nil); it returns
// the status and the raw body.
func (s *stack) apiDo(tb testing.TB, method, path, token string, body, out any) (int, []byte) {
	tb.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			tb.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.apiURL+path, r)
	if err != nil {
		tb.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			tb.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

// apiOK is apiDo that fails the test unless the api answers 2xx.
func (s *stack) apiOK(tb testing.TB, method, path, token string, body, out any) {
	tb.Helper()
	if st, raw := s.apiDo(tb, method, path, token, body, out); st < 200 || st > 299 {
		tb.Fatalf("%s %s: %d %s", method, path, st, raw)
	}
}

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
	s.apiOK(tb, http.MethodGet, "/api/v1/executions?"+url.Values{"session_id": {session}, "limit": {"500"}}.Encode(), s.operator, nil, &page)
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
	s.apiOK(tb, http.MethodGet, "/api/v1/approvals?"+url.Values{"session_id": {session}, "status": {"pending,approved,denied,revoked,expired"}, "limit": {"200"}}.Encode(),
		s.operator, nil, &page)
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
	s.apiOK(tb, http.MethodPost, "/api/v1/approvals/"+url.PathEscape(id)+"/decision", s.operator,
		map[string]string{"decision": decision, "via": "api"}, nil)
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
	s.apiOK(tb, http.MethodGet, "/api/v1/sessions/"+url.PathEscape(id), s.operator, nil, &v)
	return v
}

// sessionIfAny is session, or an empty view for a session that does not exist yet.
func (s *stack) sessionIfAny(tb testing.TB, id string) sessionView {
	tb.Helper()
	var v sessionView
	st, raw := s.apiDo(tb, http.MethodGet, "/api/v1/sessions/"+url.PathEscape(id), s.operator, nil, &v)
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
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.db.URL)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+eventbus.ChannelEvents); err != nil {
		tb.Fatal(err)
	}
	for {
		ok, got := cond()
		if ok {
			return
		}
		wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, _ = conn.WaitForNotification(wctx)
		wcancel()
		if ctx.Err() != nil {
			if ok, got = cond(); ok {
				return
			}
			tb.Fatalf("%s: not within %s (last: %s)", what, within, got)
		}
	}
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
