package chat_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	apiapp "github.com/oikos-hq/oikos/api/app"
	schedapp "github.com/oikos-hq/oikos/scheduler/app"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/pgtest"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/secretbox"
	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// syncBuffer is a log sink read after the agent stopped writing.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Credentials the page shows, which must reach the model redacted (issue #31 item 4).
const (
	pagePrivateKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----"
	pageShadowHash = "$6$Zq3k1Rr8$Gd2m0a5yqQqg9bGZ8f0K1Zp2o0Y5a7k0wC9uQJq8m."
	pageToken      = "ghp_a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2"
)

// TestSecretNeverReachesModel (issue #31 item 4): a conversation fetches a local page with
// an Authorization header written "Bearer secret:grafana_token"; the page gets the real
// value, and afterwards the value is in no table of the database, no line the agent
// logged and no request the model received. The page echoes the header and shows a private
// key, a shadow line and a GitHub token: the model reads all of them redacted, with notes.
func TestSecretNeverReachesModel(t *testing.T) {
	s := lab(t)
	ctx := t.Context()

	var raw [24]byte
	_, _ = rand.Read(raw[:])
	planted := "planted-" + hex.EncodeToString(raw[:])
	// The scheduler's key (the shared stack's executor redacts its output with it).
	keyText := s.secretsKey
	box, err := secretbox.Parse(keyText)
	if err != nil {
		t.Fatal(err)
	}
	// What `oikos secret set grafana_token` writes (the api's path is api/cmd/oikos's test);
	// this stack's api runs without the key.
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO secrets (name, ciphertext, key_id, set_by) VALUES ($1, $2, $3, 'e2e')`,
		"grafana_token", box.Seal("grafana_token", planted), box.KeyID()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = s.db.Pool.Exec(context.Background(), `DELETE FROM secrets WHERE name = 'grafana_token'`)
	})

	var authorized atomic.Bool
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+planted {
			http.Error(w, "wrong or missing credential", http.StatusUnauthorized)
			return
		}
		authorized.Store(true)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("hello; you sent Authorization: Bearer " + planted + "\n" + pagePrivateKey +
			"\nroot:" + pageShadowHash + ":19700:0:99999:7:::\ntoken=" + pageToken + "\nraw=" + planted + "\n"))
	}))
	t.Cleanup(page.Close)

	script, err := llmsim.Load("../../testkit/llmsim/scripts/secrets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	model, err := newLLM(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.close)
	logs := &syncBuffer{}
	p, err := e2estack.LaunchAgent(map[string]string{
		"OIKOS_DATABASE_URL":   s.db.URL,
		"OIKOS_AGENT_ADDR":     "127.0.0.1:0",
		"OIKOS_API_URL":        s.apiURL,
		"OIKOS_AGENT_TOKEN":    s.agentToken,
		"OIKOS_SCHEMA_WAIT":    "30s",
		"OIKOS_LLM_BASE_URL":   model.baseURL,
		"OIKOS_LLM_MODEL":      model.model,
		"OIKOS_HTTP_GET_ALLOW": "127.0.0.1",
		"OIKOS_SECRETS_KEY":    keyText,
	}, zerolog.New(logs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	agent := &agentProc{url: p.URL, model: model.model, proc: p, gone: make(chan struct{})}
	t.Cleanup(agent.stop)
	sid := newSession("secrets")
	s.router.assign(sid, agent)

	tr := s.chat(t, s.operator, sid, "fetch "+page.URL+"/status with grafana_token")
	if tr.Finish == "" || len(tr.Errors) > 0 {
		t.Fatalf("turn: finish %q errors %v events %v", tr.Finish, tr.Errors, tr.names())
	}
	if !authorized.Load() {
		t.Fatalf("the page never received the secret's value; the answer: %s", tr.text())
	}
	answer := tr.text()
	for _, note := range []string{"[redacted: secret:grafana_token]", "[redacted: private key]", "[redacted: password hash]", "[redacted: github token]"} {
		if !strings.Contains(answer, note) {
			t.Errorf("the answer (the tool result as the model read it) lacks %s: %s", note, answer)
		}
	}
	t.Logf("answer: %s", answer)

	// A command whose output prints the value and a private key: the scheduler stores it
	// redacted, with a note, and the model reads what was stored.
	s.writeGuestFile(t, "boreas", 207, "/root/e2e-secret.env", "GRAFANA_TOKEN="+planted+"\n"+pagePrivateKey+"\nend\n")
	tr = s.chat(t, s.operator, sid, "what is in the env file on immich?")
	if tr.Finish == "" || len(tr.Errors) > 0 {
		t.Fatalf("turn: finish %q errors %v events %v", tr.Finish, tr.Errors, tr.names())
	}
	fileAnswer := tr.text()
	for _, note := range []string{"GRAFANA_TOKEN=[redacted: secret:grafana_token]", "[redacted: private key]", "end"} {
		if !strings.Contains(fileAnswer, note) {
			t.Errorf("the answer (the command's output as the model read it) lacks %q: %s", note, fileAnswer)
		}
	}
	var logged string
	if err := s.db.Pool.QueryRow(ctx, `SELECT string_agg(convert_from(l.data, 'UTF8'), '' ORDER BY l.seq) FROM execution_logs l
		JOIN executions e ON e.id = l.execution_id WHERE e.command = 'cat /root/e2e-secret.env' AND e.status = 'completed'`).Scan(&logged); err != nil {
		t.Fatalf("the execution's log: %v", err)
	}
	if !strings.Contains(logged, "[redacted: secret:grafana_token]") || !strings.Contains(logged, "redacted from the output: 1 × private key, 1 × secret:grafana_token") {
		t.Errorf("execution_logs of the cat: %q; want the redactions and their note", logged)
	}
	agent.stop() // its last log lines are written

	leaks := []string{planted, pageShadowHash, pageToken, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"}
	// Every request the model received.
	reqs := model.requests()
	if len(reqs) < 2 {
		t.Fatalf("the model got %d requests; want the call and the answer", len(reqs))
	}
	sawTool := false
	for i, r := range reqs {
		for _, l := range leaks {
			if bytes.Contains(r.Body, []byte(l)) {
				t.Errorf("request %d to the model holds %.24q…", i, l)
			}
		}
		for _, m := range r.Messages {
			sawTool = sawTool || (m.Role == "tool" && strings.Contains(m.Text, "[redacted: private key]"))
		}
	}
	if !sawTool {
		t.Error("no tool message to the model carries the redaction note")
	}
	// Every log line of the agent, the api and the scheduler's executor.
	for _, l := range leaks {
		if strings.Contains(logs.String(), l) {
			t.Errorf("the agent's log holds %.24q…", l)
		}
		if strings.Contains(s.logs.String(), l) {
			t.Errorf("the api's or the scheduler's log holds %.24q…", l)
		}
	}
	noLeakInTables(t, s.db.Pool, leaks...)
	// The conversation was recorded (the scan looked at something).
	var calls int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM tool_calls WHERE session_id = $1 AND name = 'http_get' AND arguments::text LIKE '%secret:grafana_token%'`, sid).Scan(&calls); err != nil || calls != 1 {
		t.Fatalf("http_get calls recorded with the reference: %d %v", calls, err)
	}
}

// noLeakInTables fails t for every row of every table of the database, read as text, that
// holds one of leaks.
func noLeakInTables(t *testing.T, pool *pgxpool.Pool, leaks ...string) {
	t.Helper()
	ctx := t.Context()
	// Every row of every table, as text.
	rows, err := pool.Query(ctx, `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 20 {
		t.Fatalf("only %d tables: %v", len(tables), tables)
	}
	for _, tbl := range tables {
		for _, l := range leaks {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl+` t WHERE strpos(t::text, $1) > 0`, l).Scan(&n); err != nil {
				t.Fatalf("%s: %v", tbl, err)
			}
			if n > 0 {
				t.Errorf("table %s: %d rows hold %.24q…", tbl, n, l)
			}
		}
	}
}

// TestSecretInHTTPCheckHeader (issue #31 item 4): an http check whose entity says
// `http_headers: {Authorization: "Bearer secret:grafana_token"}` sends the value, resolved by
// the scheduler's check runner when it sends the request; the entity, the check definition,
// its result, every other table and every log line (the api's and the runner's) keep the
// reference only. A check naming a secret that is not set reports it by name.
func TestSecretInHTTPCheckHeader(t *testing.T) {
	ctx := t.Context()
	db := pgtest.New(t)
	logs := &syncBuffer{}
	log := zerolog.New(logs).Level(zerolog.DebugLevel)
	api, apiURL, err := e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: db.URL, PublicURL: "http://127.0.0.1:8080"}, log)
	if err != nil {
		t.Fatal(err)
	}
	var operator string
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "operator", Role: "operator", Into: &operator}); err != nil {
		t.Fatal(err)
	}
	op := (&e2estack.Client{URL: apiURL, HTTP: http.DefaultClient}).API(t, operator)

	var raw [24]byte
	_, _ = rand.Read(raw[:])
	planted := "planted-check-" + hex.EncodeToString(raw[:])
	var key [32]byte
	_, _ = rand.Read(key[:])
	box, err := secretbox.New(key[:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO secrets (name, ciphertext, key_id, set_by) VALUES ($1, $2, $3, 'e2e')`,
		"grafana_token", box.Seal("grafana_token", planted), box.KeyID()); err != nil {
		t.Fatal(err)
	}
	var authorized atomic.Int64
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+planted {
			http.Error(w, "wrong or missing credential", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(page.Close)
	for name, ref := range map[string]string{"grafana-secret": "grafana_token", "grafana-unset": "missing_token"} {
		attrs := apiclient.Attributes{"public_host": name + ".lab.example", "url": page.URL + "/api/health",
			"http_headers": map[string]any{"Authorization": "Bearer secret:" + ref}}
		e2estack.OK(t, nil)(op.CreateEntity(ctx, nil, apiclient.CreateEntity{Type: "ingress-route", Name: name, Attributes: &attrs}))
	}
	var cfg string
	if err := db.Pool.QueryRow(ctx, `SELECT d.config::text FROM check_defs d JOIN entities e ON e.id = d.target_id
		WHERE e.name = 'grafana-secret' AND d.kind = 'http'`).Scan(&cfg); err != nil {
		t.Fatalf("the derived http check: %v", err)
	}
	if !strings.Contains(cfg, "Authorization: Bearer secret:grafana_token") {
		t.Fatalf("the check's config %s; want the header by reference", cfg)
	}

	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	pool := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: remote.NewMemoryHostKeys(), DialTimeout: time.Second, Logger: log})
	t.Cleanup(pool.Close)
	runner, err := schedapp.NewCheckRunner(schedapp.CheckRunnerOptions{Pool: db.Pool, SSH: pool,
		Fleet: schedapp.NewFleet(db.Pool, schedapp.FleetOptions{Logger: log}), Logger: log,
		Secrets: schedapp.NewSecrets(db.Pool, box), InitialSpread: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	result := func(name string) (health, reason string) {
		_ = db.Pool.QueryRow(ctx, `SELECT r.health, r.reason FROM check_results r JOIN check_defs d ON d.id = r.check_id
			JOIN entities e ON e.id = d.target_id WHERE e.name = $1 AND d.kind = 'http'`, name).Scan(&health, &reason)
		return health, reason
	}
	e2estack.Eventually(t, db.URL, 30*time.Second, 50*time.Millisecond, "both http checks' results", func() (bool, string) {
		h1, r1 := result("grafana-secret")
		h2, r2 := result("grafana-unset")
		return h1 == "up" && h2 != "", fmt.Sprintf("grafana-secret %s (%s), grafana-unset %s (%s)", h1, r1, h2, r2)
	})
	runner.Stop()
	if authorized.Load() == 0 {
		t.Fatal("the page never received the value")
	}
	if h, r := result("grafana-unset"); h != "unknown" || !strings.Contains(r, "secret missing_token is not set") {
		t.Errorf("the check naming an unset secret: %s, %q", h, r)
	}
	if strings.Contains(logs.String(), planted) {
		t.Error("the api's or the check runner's log holds the value")
	}
	noLeakInTables(t, db.Pool, planted)
}
