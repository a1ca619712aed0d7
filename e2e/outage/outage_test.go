// Package outage_test takes Postgres away from a running stack and gives it back (issue #32,
// item 1): the api, the scheduler's executor and an outbox listener run against a private
// cluster the test halts for OIKOS_OUTAGE_SECONDS (default 10; 60 for the measurement in
// docs/benchmarks.md). While it is away the api answers 503 problem JSON with Retry-After on
// every route and /healthz says since when and why; after it returns everything recovers by
// itself: the api answers, an execution running when Postgres went away is recorded with its
// real end, one approved after it runs, each exactly once on the lab, and the listener has
// received every event of the outbox exactly once. The scheduler's
// results buffering is tested with its writer (scheduler/internal/results).
package outage_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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

// runsOf counts the lines an approved command appended to the lab file name: how many times it ran.
func runsOf(stateDir, name string) int {
	n := 0
	_ = filepath.WalkDir(stateDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != name {
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
	// And one running when Postgres goes away: it ends during the outage and must be recorded
	// with its real end once Postgres is back, run once.
	var running apiclient.Execution
	e2estack.OK(t, &running)(op.RequestExecution(ctx, apiclient.RunRequest{Target: "proxmox-host:atlas",
		Command: "echo started >> /root/oikos-outage-started; sleep 3; echo ran >> /root/oikos-outage-running", Purpose: "prove a run across an outage is recorded once"}))
	if running.Status != "pending_approval" || running.ApprovalId == nil {
		t.Fatalf("the command answered %s (%s), want pending_approval", running.Status, running.RiskClass)
	}
	e2estack.OK(t, nil)(op.DecideApproval(ctx, running.ApprovalId.String(), apiclient.DecisionRequest{Decision: "approve", Via: "button",
		Reason: apiclient.Ptr("e2e outage")}))
	// Running means the command has started on the lab (the claim comes before the target
	// is resolved, which needs the database).
	for started := time.Now(); runsOf(stateDir, "oikos-outage-started") == 0; {
		if time.Since(started) > 30*time.Second {
			t.Fatal("the second execution did not start on the lab within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := counts(ctx, t, db)
	var lastBefore int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM events`).Scan(&lastBefore); err != nil {
		t.Fatal(err)
	}

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
	// The run that ended during the outage is recorded with its real end, and it ran once.
	e2estack.Eventually(t, url, 60*time.Second, 200*time.Millisecond, "the execution running across the outage recorded", func() (bool, string) {
		var st string
		_ = pool.QueryRow(ctx, `SELECT status FROM executions WHERE id = $1`, running.Id.String()).Scan(&st)
		return st != "running", st
	})
	recorded := time.Since(back)
	var runStatus string
	var runExit *int
	if err := pool.QueryRow(ctx, `SELECT status, exit_code FROM executions WHERE id = $1`, running.Id.String()).Scan(&runStatus, &runExit); err != nil {
		t.Fatal(err)
	}
	if runStatus != "completed" || runExit == nil || *runExit != 0 {
		var why, out string
		_ = pool.QueryRow(ctx, `SELECT coalesce(error, ''), coalesce(output, '') FROM executions WHERE id = $1`, running.Id.String()).Scan(&why, &out)
		t.Errorf("the execution running across the outage ended %s (exit %v: %s; output %q), want completed with exit 0", runStatus, runExit, why, out)
	}
	if n := runsOf(stateDir, "oikos-outage-running"); n != 1 {
		t.Errorf("the command running across the outage ran %d times, want 1", n)
	}
	// Nothing else was written across the outage: the new events are that execution's end and
	// the api's registrar moving its graph entity (state succeeded, exit code; one audit row
	// each), in that order.
	e2estack.Eventually(t, url, 30*time.Second, 200*time.Millisecond, "the registrar followed the execution's end", func() (bool, string) {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE id > $1 AND type = 'entity.updated' AND payload->>'slug' = $2`,
			lastBefore, "execution:"+running.Id.String()).Scan(&n)
		return n > 0, strconv.Itoa(n)
	})
	var newEvents []string
	trows, err := pool.Query(ctx, `SELECT type, coalesce(payload->>'execution_id', payload->>'slug', '') FROM events WHERE id > $1 ORDER BY id`,
		lastBefore)
	if err != nil {
		t.Fatal(err)
	}
	for trows.Next() {
		var ty, about string
		_ = trows.Scan(&ty, &about)
		newEvents = append(newEvents, ty+" "+about)
	}
	trows.Close()
	id := running.Id.String()
	if want := []string{"execution.completed " + id, "entity.state_changed execution:" + id, "entity.updated execution:" + id}; !slices.Equal(newEvents, want) {
		t.Errorf("events across the outage: %v, want %v", newEvents, want)
	}
	want := maps.Clone(before)
	want["events"] += 3
	want["audit_log"] += 2
	if got := counts(ctx, t, db); !maps.Equal(got, want) {
		t.Errorf("rows across the outage: before %v, after %v, want %v", before, got, want)
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
	if n := runsOf(stateDir, "oikos-outage-runs"); n != 1 {
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
	t.Logf("outage %s: after Postgres returned, api healthy in %s, the end of the run across the outage recorded by %s, "+
		"listener re-LISTENing in %s, every event (%d) delivered once by %s; the execution approved after it ran in %s",
		down, apiHealthy.Round(time.Millisecond), recorded.Round(time.Millisecond), relistened.Round(time.Millisecond), total,
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
