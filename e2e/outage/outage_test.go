// Package outage_test takes Postgres away from a running stack and gives it back (issue #32,
// item 1): the api, the scheduler's executor and an outbox listener run against a private
// cluster the test halts for OIKOS_OUTAGE_SECONDS (default 10; 60 for the measurement in
// docs/benchmarks.md). While it is away the api answers 503 problem JSON with Retry-After on
// every route and /healthz says since when and why; after it returns everything recovers by
// itself: the api answers, an execution approved across the outage runs exactly once on the
// lab, and the listener has received every event of the outbox exactly once. The scheduler's
// results buffering is tested with its writer (scheduler/internal/results).
package outage_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgcluster"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { e2estack.Main(m) }

// outage is how long Postgres stays away.
func outage(t *testing.T) time.Duration {
	s := os.Getenv("OIKOS_OUTAGE_SECONDS")
	if s == "" {
		return 10 * time.Second
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("OIKOS_OUTAGE_SECONDS=%q: want a whole number of seconds", s)
	}
	return time.Duration(n) * time.Second
}

// recorder is an outbox listener as every daemon runs one (eventbus Notifier and Bus on its
// own pool): it counts each event id it is handed.
type recorder struct {
	mu   sync.Mutex
	seen map[int64]int
}

func (r *recorder) record(sub *eventbus.Subscription) {
	for e := range sub.C {
		r.mu.Lock()
		r.seen[e.ID]++
		r.mu.Unlock()
	}
}

func (r *recorder) snapshot() map[int64]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64]int, len(r.seen))
	for k, v := range r.seen {
		out[k] = v
	}
	return out
}

var tables = []string{"events", "audit_log", "executions", "signals", "notification_deliveries"}

func counts(ctx context.Context, t *testing.T, db *pgtest.DB) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, tb := range tables {
		var n int64
		// The table names are the constants above, never input.
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+tb).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", tb, err)
		}
		out[tb] = n
	}
	return out
}

// runs counts the lines the approved command appended on the lab: how many times it ran.
func runs(t *testing.T, stateDir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(stateDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "oikos-outage-runs" {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			n++
		}
		return nil
	})
	return n
}

type healthz struct {
	Status   string                `json:"status"`
	Database *pg.AvailabilityState `json:"database"`
}

func getHealthz(ctx context.Context, url string) (int, healthz, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, healthz{}, err
	}
	defer resp.Body.Close()
	var h healthz
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &h)
	return resp.StatusCode, h, nil
}

func TestPostgresOutage(t *testing.T) {
	ctx := context.Background()
	down := outage(t)
	log := zerolog.Nop()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: t.TempDir(), Fast: true})
	if err != nil {
		t.Skipf("no private PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	url := cluster.URL("postgres")

	api, apiURL, err := e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: url, SeedOnStart: true, Demo: true,
		PublicURL: "http://127.0.0.1:8080"}, log)
	if err != nil {
		t.Fatal(err)
	}
	var operator, agentToken string
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "operator", Role: "operator", Into: &operator},
		e2estack.Token{Name: "agent", Role: "agent", Into: &agentToken}); err != nil {
		t.Fatal(err)
	}
	agent, err := e2estack.LaunchAgent(map[string]string{"OIKOS_DATABASE_URL": url, "OIKOS_AGENT_ADDR": "127.0.0.1:0",
		"OIKOS_API_URL": apiURL, "OIKOS_AGENT_TOKEN": agentToken, "OIKOS_SCHEMA_WAIT": "30s"}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Stop(30 * time.Second) })
	op := (&e2estack.Client{URL: apiURL, HTTP: http.DefaultClient}).API(t, operator)
	pool, err := pg.Connect(ctx, url, 10, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := &pgtest.DB{Name: "postgres", URL: url, Pool: pool}
	stateDir := t.TempDir()
	if _, err := e2estack.StartLab(ctx, t, db, e2estack.LabOptions{StateDir: stateDir, SchedulerID: "outage-scheduler", Log: log}); err != nil {
		t.Fatal(err)
	}

	// The listener starts at the outbox's beginning, so it must end up with every event.
	lpool, err := pg.Connect(ctx, url, 4, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lpool.Close)
	lcfg, err := pg.ListenConfig(url, "outage-listener")
	if err != nil {
		t.Fatal(err)
	}
	// The daemons' defaults (reconnect back-off up to 5 s), so the recovery measured is theirs.
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: lcfg, Logger: log})
	zero := int64(0)
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: lpool, Notifier: notifier, Logger: log, From: &zero})
	rec := &recorder{seen: map[int64]int{}}
	sub := bus.Subscribe(4096)
	go rec.record(sub)
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Stop)
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Stop)

	// An execution waiting for approval across the outage.
	var ex apiclient.Execution
	e2estack.OK(t, &ex)(op.RequestExecution(ctx, apiclient.RunRequest{Target: "proxmox-host:atlas",
		Command: "echo ran >> /root/oikos-outage-runs", Purpose: "prove an approval across an outage runs once"}))
	if ex.Status != "pending_approval" || ex.ApprovalId == nil {
		t.Fatalf("the command answered %s (%s), want pending_approval", ex.Status, ex.RiskClass)
	}
	before := counts(ctx, t, db)

	// Postgres goes away.
	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	halted := time.Now()
	for _, path := range []string{"/api/v1/entities", "/api/v1/executions", "/api/v1/incidents"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+path, nil)
		req.Header.Set("Authorization", "Bearer "+operator)
		began := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s during the outage: %v", path, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(began)
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		_ = json.Unmarshal(raw, &p)
		if resp.StatusCode != http.StatusServiceUnavailable || p.Status != 503 || !strings.HasSuffix(p.Type, ":database-unavailable") ||
			resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s during the outage: %d %s (Retry-After %q)", path, resp.StatusCode, raw, resp.Header.Get("Retry-After"))
		}
		if took > pg.DefaultConnectTimeout+2*time.Second {
			t.Errorf("GET %s during the outage took %s", path, took)
		}
	}
	if st, h, err := getHealthz(ctx, apiURL); err != nil || st != http.StatusServiceUnavailable || h.Database == nil ||
		h.Database.Reachable || h.Database.UnreachableSince == nil || h.Database.LastError == "" {
		t.Errorf("/healthz during the outage: %d %+v (%v)", st, h.Database, err)
	}
	// A chat turn fails cleanly: the api, which records the operator's message first, answers
	// 503; the agent, asked directly, ends the turn with a clear error event and stores nothing.
	if st, raw := e2estack.Answer(t, nil)(op.Chat(ctx, apiclient.ChatRequest{SessionId: apiclient.Ptr("outage-session"),
		Message: "hello during the outage"})); st != http.StatusServiceUnavailable {
		t.Errorf("POST /api/v1/chat during the outage: %d %s", st, raw)
	}
	if frames := agentTurn(ctx, t, agent.URL, agentToken); !strings.Contains(frames, "event: error") ||
		!strings.Contains(frames, "database is unreachable") || !strings.Contains(frames, "event: done") {
		t.Errorf("the agent's turn during the outage streamed:\n%s", frames)
	}
	// MCP: a client whose token the api cannot verify now is told to retry (503), not refused.
	{
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"outage","version":"1"}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, agent.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+operator)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("MCP during the outage: %v", err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("MCP during the outage: %d %s", resp.StatusCode, raw)
		}
	}
	// The outage lasts its full length; what the daemons do meanwhile is their own retrying.
	time.Sleep(time.Until(halted.Add(down)))

	if err := cluster.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	deadline := back.Add(60 * time.Second)
	var apiHealthy time.Duration
	for {
		st, h, err := getHealthz(ctx, apiURL)
		if err == nil && st == http.StatusOK && h.Database != nil && h.Database.Reachable {
			apiHealthy = time.Since(back)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the api's /healthz did not recover within 60 s: %d %+v %v", st, h.Database, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var relistened time.Duration
	for !notifier.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not reconnect within 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	relistened = time.Since(back)
	if st, h, err := getHealthz(ctx, agent.URL); err != nil || st != http.StatusOK {
		t.Errorf("the agent's /healthz after the outage: %d %+v (%v)", st, h, err)
	}
	var stored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM session_messages WHERE session_id = 'outage-session'`).Scan(&stored); err != nil ||
		stored != 0 {
		t.Errorf("%d messages stored of the turns that failed during the outage (%v), want 0", stored, err)
	}
	if got := counts(ctx, t, db); !equal(got, before) {
		t.Errorf("rows changed across the outage with nothing asked: before %v, after %v", before, got)
	}

	// The approval, decided after the outage, runs its execution exactly once.
	approved := time.Now()
	e2estack.OK(t, nil)(op.DecideApproval(ctx, ex.ApprovalId.String(), apiclient.DecisionRequest{Decision: "approve", Via: "button",
		Reason: apiclient.Ptr("e2e outage")}))
	var ran time.Duration
	e2estack.Eventually(t, url, 60*time.Second, 200*time.Millisecond, "the approved execution completed", func() (bool, string) {
		var st string
		_ = pool.QueryRow(ctx, `SELECT status FROM executions WHERE id = $1`, ex.Id.String()).Scan(&st)
		return st == "completed", st
	})
	ran = time.Since(approved)
	if n := runs(t, stateDir); n != 1 {
		t.Errorf("the approved command ran %d times on the lab, want 1", n)
	}
	var started int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = 'execution.started' AND payload->>'execution_id' = $1`,
		ex.Id.String()).Scan(&started); err != nil {
		t.Fatal(err)
	}
	if started > 1 {
		t.Errorf("%d execution.started events for the execution, want at most 1", started)
	}

	// Every event of the outbox, before, around and after the outage, reached the listener
	// exactly once.
	var last int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	e2estack.Eventually(t, url, 30*time.Second, 200*time.Millisecond, "the listener caught up", func() (bool, string) {
		return bus.LastDelivered() >= last, strconv.FormatInt(bus.LastDelivered(), 10)
	})
	caughtUp := time.Since(back)
	rows, err := pool.Query(ctx, `SELECT id FROM events WHERE id <= $1 ORDER BY id`, last)
	if err != nil {
		t.Fatal(err)
	}
	seen := rec.snapshot()
	total := 0
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		total++
		if seen[id] != 1 {
			t.Errorf("event %d delivered %d times, want 1", id, seen[id])
		}
	}
	rows.Close()
	if len(seen) != total {
		t.Errorf("the listener received %d distinct events, the outbox holds %d", len(seen), total)
	}
	t.Logf("outage %s: after Postgres returned, api healthy in %s, listener re-LISTENing in %s, every event (%d) delivered once by %s; "+
		"the execution approved after it ran in %s", down, apiHealthy.Round(time.Millisecond), relistened.Round(time.Millisecond), total,
		caughtUp.Round(time.Millisecond), ran.Round(time.Millisecond))
}

// agentTurn posts one turn to the agent as the api forwards it and returns the SSE frames.
func agentTurn(ctx context.Context, t *testing.T, agentURL, token string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"session_id": "outage-session", "message": "hello during the outage",
		"message_id": "00000000-0000-4000-8000-000000000001", "actor": "operator", "role": "operator"})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, http.MethodPost, agentURL+"/internal/chat", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("agent turn: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
