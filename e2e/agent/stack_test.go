package agent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/sse"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Token names: audit rows and executions name the caller by them. The agent daemon has a
// token of its own (for its task sweep); an MCP client uses mcpAgentName's, so an audit row
// naming the daemon's token, or "agent", would mean the agent acted in its own name.
const (
	operatorName    = "e2e-operator"
	mcpAgentName    = "e2e-mcp-client"
	readonlyName    = "e2e-readonly"
	agentDaemonName = "e2e-agent-daemon"
)

// agentTables are the tables the agent may write (migrations/sql/00006_agent.sql), with the
// shared outbox and audit log every daemon appends to (through shared/eventbus and
// shared/audit). The agent connects as a role that may write only these, so an attempt to
// write any api table (entities, executions, approvals, ...) fails at the database.
var agentTables = []string{"agent_sessions", "session_messages", "tool_calls", "plan_steps", "session_questions",
	"agent_activity"}

// stack is the package's world: database, api, lab simulator with the scheduler's executor,
// and the agent.
type stack struct {
	db       *pgtest.DB
	api      *apiapp.Server
	apiURL   string
	client   *e2estack.Client
	agentURL string // http://127.0.0.1:port
	mcpURL   string
	sim      *labsim.Sim
	log      zerolog.Logger

	operator, mcpAgent, readonly, daemon string // tokens
	agentRole                            string // the agent's database role
}

// buildStack starts everything; t's Cleanup (the package's PackageTB) stops it in reverse order.
func buildStack(t *e2estack.PackageTB) (s *stack, err error) {
	defer e2estack.Recover(&err)
	ctx := context.Background()
	s = &stack{log: zerolog.Nop()}
	if testing.Verbose() {
		// With -v the daemons' warnings go to stderr. (Without OIKOS_TEST_DATABASE_URL,
		// pgtest.Run stops its private cluster before TestMain tears the stack down, so the
		// last lines are the listeners' reconnect warnings; oikos-local test has none.)
		s.log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	}
	s.db = pgtest.New(t)

	// The api: migrations (already in the template), ontology and the embedded seeds.
	if s.api, s.apiURL, err = e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: s.db.URL, SeedOnStart: true, Demo: true}, s.log); err != nil {
		return nil, err
	}
	s.client = &e2estack.Client{URL: s.apiURL, HTTP: httpClient}
	if err := e2estack.MintTokens(ctx, s.api,
		e2estack.Token{Name: operatorName, Role: "operator", Into: &s.operator},
		e2estack.Token{Name: mcpAgentName, Role: "agent", Into: &s.mcpAgent},
		e2estack.Token{Name: readonlyName, Role: "readonly", Into: &s.readonly},
		e2estack.Token{Name: agentDaemonName, Role: "agent", Into: &s.daemon},
	); err != nil {
		return nil, err
	}

	// The lab simulator serving the seeded inventory over SSH, and the scheduler's executor
	// running gated executions on it.
	if s.sim, err = e2estack.StartLab(ctx, t, s.db, e2estack.LabOptions{StateDir: t.TempDir(), SchedulerID: "e2e-scheduler",
		Concurrency: 8, Log: s.log}); err != nil {
		return nil, err
	}

	// The agent, connected as a role that may write only its own tables.
	agentURL, err := s.agentDatabaseRole(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("agent database role: %w", err)
	}
	a, err := e2estack.LaunchAgent(map[string]string{
		"OIKOS_DATABASE_URL": agentURL,
		"OIKOS_AGENT_ADDR":   "127.0.0.1:0",
		"OIKOS_API_URL":      s.apiURL,
		"OIKOS_AGENT_TOKEN":  s.daemon,
		"OIKOS_SCHEMA_WAIT":  "30s",
	}, s.log)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	t.Cleanup(func() { a.Stop(30 * time.Second) })
	s.agentURL = a.URL
	s.mcpURL = s.agentURL + "/mcp"
	return s, nil
}

// agentDatabaseRole creates a login role for the agent that may read every table but write
// only agentTables, events and audit_log, and returns the agent's database URL.
func (s *stack) agentDatabaseRole(ctx context.Context, t *e2estack.PackageTB) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	s.agentRole = "oikos_e2e_agent_" + hex.EncodeToString(b[:])
	role := pgx.Identifier{s.agentRole}.Sanitize()
	writable := append([]string{"events", "audit_log"}, agentTables...)
	stmts := []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT CONNECT ON DATABASE ` + pgx.Identifier{s.db.Name}.Sanitize() + ` TO ` + role,
		`GRANT USAGE ON SCHEMA public TO ` + role,
		`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + role,
		`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ` + role,
		`GRANT INSERT, UPDATE, DELETE ON ` + strings.Join(writable, ", ") + ` TO ` + role,
	}
	for _, q := range stmts {
		if _, err := s.db.Pool.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	t.Cleanup(func() {
		c := context.Background()
		_, _ = s.db.Pool.Exec(c, `DROP OWNED BY `+role)
		_, _ = s.db.Pool.Exec(c, `DROP ROLE IF EXISTS `+role)
	})
	return s.agentDBURL(), nil
}

// agentDBURL is the agent's database URL: the test database, as the agent's role.
func (s *stack) agentDBURL() string {
	u, _ := url.Parse(s.db.URL)
	u.User = url.User(s.agentRole)
	return u.String()
}

// ---------------------------------------------------------------------------- the api over HTTP

var httpClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32}, Timeout: 2 * time.Minute}

// auditRow is one entry of GET /api/v1/audit.
type auditRow struct {
	ID            int64  `json:"id"`
	Actor         string `json:"actor"`
	Action        string `json:"action"`
	Method        string `json:"method"`
	Path          string `json:"path"`
	CorrelationID string `json:"correlation_id"`
	Entity        string `json:"entity"`
}

// registrarActor is the api's Registrar (api/internal/execution/registrar.go): the api
// itself moving an execution's entity through its lifecycle after the scheduler reports, in
// the execution's session. It is the only actor other than the caller a session's audit log
// may name, and only on execution entities.
const registrarActor = "oikos-api"

func (a auditRow) byRegistrar() bool {
	return a.Actor == registrarActor && strings.HasPrefix(a.Entity, "execution:") &&
		(a.Action == "entity.state" || a.Action == "entity.update")
}

// audit lists every audit row of a correlation id (an MCP session), oldest first.
func (s *stack) audit(tb testing.TB, correlation string) []auditRow {
	tb.Helper()
	var all []auditRow
	cursor := ""
	for {
		q := apiclient.ListAuditParams{CorrelationId: &correlation, Limit: apiclient.Ptr(500), Cursor: apiclient.Opt(cursor)}
		var page struct {
			Items      []auditRow `json:"items"`
			NextCursor *string    `json:"next_cursor"`
		}
		e2estack.OK(tb, &page)(s.client.API(tb, s.operator).ListAudit(tb.Context(), &q))
		all = append(all, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			break
		}
		cursor = *page.NextCursor
	}
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	return all
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
	Output       string  `json:"output"`
}

// executions lists the executions of a session, newest first.
func (s *stack) executions(tb testing.TB, session string) []execution {
	tb.Helper()
	var page struct {
		Items []execution `json:"items"`
	}
	e2estack.OK(tb, &page)(s.client.API(tb, s.operator).ListExecutions(tb.Context(),
		&apiclient.ListExecutionsParams{SessionId: &session, Limit: apiclient.Ptr(500)}))
	return page.Items
}

// waitEnd follows an execution's log stream until its end event.
func (s *stack) waitEnd(tb testing.TB, token, id string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL+"/api/v1/executions/"+url.PathEscape(id)+"/logs/stream", nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := httpClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		tb.Fatalf("log stream of %s: %d %s", id, resp.StatusCode, raw)
	}
	events := sse.NewReader(resp.Body, 4<<20)
	for {
		e, err := events.Next()
		if err != nil {
			tb.Fatalf("log stream of %s ended without an end event: %v", id, err)
		}
		if e.Name == "end" {
			return
		}
	}
}

// ---------------------------------------------------------------------------- the agent's tables

// session is one row of agent_sessions, read straight from the database.
type session struct {
	Status, Awaiting, Outcome, Summary, Actor, Source, Goal, Task string
	PlanGeneration                                                int
}

func (s *stack) session(tb testing.TB, id string) session {
	tb.Helper()
	var r session
	err := s.db.Pool.QueryRow(context.Background(), `SELECT status, awaiting, outcome, summary, actor, source, goal, task,
		plan_generation FROM agent_sessions WHERE id = $1`, id).
		Scan(&r.Status, &r.Awaiting, &r.Outcome, &r.Summary, &r.Actor, &r.Source, &r.Goal, &r.Task, &r.PlanGeneration)
	if err != nil {
		tb.Fatalf("agent_sessions %s: %v", id, err)
	}
	return r
}

// eventually re-checks cond on every outbox notification (and at least every 250 ms, the
// way e2e/execution's harness waits) until it holds, or fails the test after within.
func (s *stack) eventually(tb testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	e2estack.Eventually(tb, s.db.URL, within, 250*time.Millisecond, what, cond)
}

// toolCallCount counts the tool_calls rows of a session.
func (s *stack) toolCallCount(tb testing.TB, sessionID string) int {
	tb.Helper()
	var n int
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tool_calls WHERE session_id = $1`, sessionID).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
