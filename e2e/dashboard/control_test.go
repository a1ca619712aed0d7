package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

// The control server lets the browser tests (e2e/browser) ask Go for what only Go can do:
// faults in the lab simulator, the real CLI, an agent's execution request, an api restart,
// sessions expired in the database, and health events at a rate. It listens on loopback on
// a random port and answers JSON:
//
//	PUT    /faults/hosts/{host}   body: labsim Fault JSON ({"down": true})  → 204
//	DELETE /faults                                                          → 204
//	POST   /cli                   {"token": "operator", "args": [...], "stdin": ""}
//	                              → {"code", "stdout", "stderr"}
//	POST   /executions            a RunRequest, sent with the agent's token → the api's answer
//	POST   /api/restart           {"down_ms": 1500} → {"down_ms", "restart_ms"}
//	POST   /sessions/expire       {"name": "e2e-dash-expiring"} → {"sessions": n}
//	POST   /sessions/revoke       {"name": ...}                 → {"sessions": n}
//	POST   /signals               {"entity": "lxc:redis", "kind": "...", "summary": "..."}
//	                              → {"id", "created"}: raised as the scheduler raises one
//	POST   /agent/down, /agent/up  the agent unreachable from the api, or back → 204
//	POST   /scheduler/kill, /scheduler/start  the stack's lease manager killed (as by
//	                              kill -9: its leases left to expire) or started again → 204
//	POST   /health-events         {"rate": 200, "seconds": 30, "slugs": [...], "to": ""}
//	                              → {"emitted", "seconds", "max_tick_ms"}
//	GET    /footprint?actor=NAME  → what a change made as NAME leaves (security_test.go):
//	                              {"audit", "events", "entities", "live_sessions", "knowledge"}
type control struct {
	s   *stack
	t   testing.TB // the stack's (a restarted api's cleanup goes there)
	url string

	mu  sync.Mutex
	log testing.TB // the test running the browser suite, whose log the control's lines go to
}

// logTo sends the control server's log lines to t's log until the returned func is called.
func (c *control) logTo(t testing.TB) func() {
	c.mu.Lock()
	c.log = t
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.log = nil
		c.mu.Unlock()
	}
}

func (c *control) logf(format string, a ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.log != nil {
		c.log.Logf("control: "+format, a...)
	}
}

func startControl(t testing.TB, s *stack) (*control, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &control{s: s, t: t, url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /faults/hosts/{host}", c.setFault)
	mux.HandleFunc("DELETE /faults", c.clearFaults)
	mux.HandleFunc("POST /cli", c.cli)
	mux.HandleFunc("POST /executions", c.execution)
	mux.HandleFunc("POST /api/restart", c.restart)
	mux.HandleFunc("POST /sessions/{how}", c.sessions)
	mux.HandleFunc("POST /health-events", c.healthEvents)
	mux.HandleFunc("POST /signals", c.raiseSignal)
	mux.HandleFunc("POST /agent/{state}", c.agentState)
	mux.HandleFunc("POST /scheduler/{how}", c.schedulerState)
	mux.HandleFunc("GET /footprint", c.footprint)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		fail(w, http.StatusBadRequest, err)
		return false
	}
	return true
}

func (c *control) setFault(w http.ResponseWriter, r *http.Request) {
	if c.s.sim == nil {
		fail(w, http.StatusConflict, errors.New("this stack runs no lab simulator"))
		return
	}
	var f labsim.Fault
	if !decode(w, r, &f) {
		return
	}
	if err := c.s.sim.SetHostFault(r.PathValue("host"), f); err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	c.logf("host %s fault %+v", r.PathValue("host"), f)
	w.WriteHeader(http.StatusNoContent)
}

func (c *control) clearFaults(w http.ResponseWriter, _ *http.Request) {
	if c.s.sim != nil {
		if err := c.s.sim.ClearFaults(); err != nil {
			fail(w, http.StatusInternalServerError, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// token maps a role name of the request to the stack's token.
func (c *control) token(name string) (string, error) {
	switch name {
	case "operator", "":
		return c.s.operator, nil
	case "readonly":
		return c.s.readonly, nil
	case "agent":
		return c.s.agentToken, nil
	case "expiring":
		return c.s.expiring, nil
	}
	return "", fmt.Errorf("unknown token %q", name)
}

// cliPath is bin/oikos of the repository (make build).
func cliPath() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "bin", "oikos")
}

func (c *control) cli(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string   `json:"token"`
		Args  []string `json:"args"`
		Stdin string   `json:"stdin"`
	}
	if !decode(w, r, &req) {
		return
	}
	tok, err := c.token(req.Token)
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath(), req.Args...)
	cmd.Env = []string{"OIKOS_API_URL=" + c.s.currentURL(), "OIKOS_TOKEN=" + tok, "PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	cmd.Stdin = bytes.NewBufferString(req.Stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		fail(w, http.StatusInternalServerError, fmt.Errorf("run %s (make build first?): %w", cliPath(), err))
		return
	}
	c.logf("oikos %v → %d", req.Args, code)
	writeJSON(w, http.StatusOK, map[string]any{"code": code, "stdout": out.String(), "stderr": errb.String()})
}

func (c *control) execution(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if !decode(w, r, &body) {
		return
	}
	st, raw, err := c.s.call(c.s.agentToken, func(a *apiclient.Client) (*http.Response, error) {
		return a.RequestExecutionWithBody(r.Context(), apiclient.ContentJSON, apiclient.JSONBody(body))
	})
	if err != nil {
		fail(w, http.StatusBadGateway, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	_, _ = w.Write(raw)
}

func (c *control) restart(w http.ResponseWriter, r *http.Request) {
	var req struct {
		DownMS int `json:"down_ms"`
	}
	if !decode(w, r, &req) {
		return
	}
	start := time.Now()
	if err := c.s.restartAPI(c.t, time.Duration(req.DownMS)*time.Millisecond); err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	c.logf("api restarted on %s after %d ms down", c.s.currentURL(), req.DownMS)
	writeJSON(w, http.StatusOK, map[string]any{"down_ms": req.DownMS, "restart_ms": time.Since(start).Milliseconds()})
}

// sessions expires or revokes, in the database, every dashboard session of a token.
func (c *control) sessions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if !decode(w, r, &req) {
		return
	}
	var q string
	switch r.PathValue("how") {
	case "expire":
		q = `UPDATE web_sessions ws SET expires_at = now() - interval '1 second' FROM api_tokens t WHERE t.id = ws.token_id AND t.name = $1`
	case "revoke":
		q = `UPDATE web_sessions ws SET revoked_at = now() FROM api_tokens t WHERE t.id = ws.token_id AND t.name = $1 AND ws.revoked_at IS NULL`
	default:
		fail(w, http.StatusNotFound, fmt.Errorf("no such action %q", r.PathValue("how")))
		return
	}
	tag, err := c.s.db.Pool.Exec(r.Context(), q, req.Name)
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	c.logf("%s %d sessions of %s", r.PathValue("how"), tag.RowsAffected(), req.Name)
	writeJSON(w, http.StatusOK, map[string]any{"sessions": tag.RowsAffected()})
}

// agentState takes the agent away from the api (its proxy answers 503) or gives it back.
func (c *control) agentState(w http.ResponseWriter, r *http.Request) {
	switch r.PathValue("state") {
	case "down":
		c.s.agentDown.Store(true)
	case "up":
		c.s.agentDown.Store(false)
	default:
		fail(w, http.StatusNotFound, fmt.Errorf("no such agent state %q", r.PathValue("state")))
		return
	}
	c.logf("agent %s", r.PathValue("state"))
	w.WriteHeader(http.StatusNoContent)
}

// raiseSignal raises a signal about an entity through shared/signals, the one writer of
// signals the scheduler uses (its audit row and signal.raised event in the same transaction).
func (c *control) raiseSignal(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Entity, Kind, Summary, Severity string
	}
	if !decode(w, r, &req) {
		return
	}
	var entityID string
	if err := c.s.db.Pool.QueryRow(r.Context(), `SELECT id::text FROM entities WHERE slug = $1`, req.Entity).Scan(&entityID); err != nil {
		fail(w, http.StatusNotFound, fmt.Errorf("entity %s: %w", req.Entity, err))
		return
	}
	var raised signals.Raised
	err := pg.InTx(r.Context(), c.s.db.Pool, func(tx pgx.Tx) error {
		var err error
		raised, err = signals.New(time.Now).Raise(r.Context(), tx, signals.Signal{Kind: req.Kind,
			DedupKey: req.Kind + ":" + req.Entity, EntityID: entityID, Severity: req.Severity, Summary: req.Summary})
		return err
	})
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	c.logf("raised signal %s (%s) on %s", raised.ID, req.Kind, req.Entity)
	writeJSON(w, http.StatusOK, map[string]any{"id": raised.ID, "created": raised.Created})
}

// healthEvents changes entities' health at a rate, each change written as the scheduler's
// result writer writes one: entity_status updated and a health.changed event with its
// payload ({entity_id, slug, from, to, reason}) appended in the same transaction, a batch
// per 50 ms tick. Without slugs it picks entities of the whole fleet at random; without
// "to" each change flips an entity between up and degraded.
func (c *control) healthEvents(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Rate    int      `json:"rate"`
		Seconds float64  `json:"seconds"`
		Slugs   []string `json:"slugs"`
		To      string   `json:"to"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Rate <= 0 {
		req.Rate = 200
	}
	if req.Seconds <= 0 {
		req.Seconds = 1
	}
	res, err := emitHealth(r.Context(), c.s, req.Rate, time.Duration(req.Seconds*float64(time.Second)), req.Slugs, req.To)
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	c.logf("%d health.changed events in %.1f s (slowest tick %d ms)", res.Emitted, res.Seconds, res.MaxTickMS)
	writeJSON(w, http.StatusOK, res)
}

type emitResult struct {
	Emitted   int     `json:"emitted"`
	Seconds   float64 `json:"seconds"`
	MaxTickMS int64   `json:"max_tick_ms"`
}

type target struct{ id, slug, health string }

func emitHealth(ctx context.Context, s *stack, rate int, dur time.Duration, slugs []string, to string) (emitResult, error) {
	q := `SELECT e.id::text, e.slug, COALESCE(st.health, 'unknown') FROM entities e LEFT JOIN entity_status st ON st.entity_id = e.id
		WHERE e.type NOT IN ('check', 'document', 'investigation', 'runbook')`
	args := []any{}
	if len(slugs) > 0 {
		q += ` AND e.slug = ANY($1)`
		args = append(args, slugs)
	}
	rows, err := s.db.Pool.Query(ctx, q, args...)
	if err != nil {
		return emitResult{}, err
	}
	targets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (target, error) {
		var t target
		return t, r.Scan(&t.id, &t.slug, &t.health)
	})
	if err != nil {
		return emitResult{}, err
	}
	if len(targets) == 0 {
		return emitResult{}, errors.New("no entities to change")
	}
	const tick = 50 * time.Millisecond
	perTick := max(1, rate*int(tick)/int(time.Second))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	res := emitResult{}
	start := time.Now()
	tk := time.NewTicker(tick)
	defer tk.Stop()
	next := 0
	for time.Since(start) < dur {
		t0 := time.Now()
		batch := make([]*target, 0, perTick)
		for range perTick {
			var t *target
			if len(slugs) > 0 {
				t = &targets[next%len(targets)]
				next++
			} else {
				t = &targets[rng.IntN(len(targets))]
			}
			batch = append(batch, t)
		}
		if err := pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
			for _, t := range batch {
				from, nto := t.health, to
				if nto == "" {
					nto = "degraded"
					if from == "degraded" {
						nto = "up"
					}
				}
				reason := "e2e-dash: synthetic change to " + nto
				if _, err := tx.Exec(ctx, `INSERT INTO entity_status (entity_id, health, reason, last_check_at, changed_at)
					VALUES ($1, $2, $3, now(), now()) ON CONFLICT (entity_id) DO UPDATE SET health = $2, reason = $3, changed_at = now()`,
					t.id, nto, reason); err != nil {
					return err
				}
				if _, err := eventbus.Append(ctx, tx, eventbus.Event{Type: "health.changed", EntityID: t.id, Actor: "scheduler"},
					map[string]string{"entity_id": t.id, "slug": t.slug, "from": from, "to": nto, "reason": reason}); err != nil {
					return err
				}
				t.health = nto
			}
			return nil
		}); err != nil {
			return res, err
		}
		res.Emitted += len(batch)
		if d := time.Since(t0).Milliseconds(); d > res.MaxTickMS {
			res.MaxTickMS = d
		}
		select {
		case <-tk.C:
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// call sends one call of the generated client with token to the api as it now runs, without a
// test (the control server's handlers run on its goroutines), and returns the answer as it is.
func (s *stack) call(token string, do func(*apiclient.Client) (*http.Response, error)) (int, []byte, error) {
	a, err := apiclient.New(s.currentURL(), apiclient.Options{Token: token, HTTP: httpClient})
	if err != nil {
		return 0, nil, err
	}
	resp, err := do(a)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// schedulerState kills the stack's lease manager or starts it again.
func (c *control) schedulerState(w http.ResponseWriter, r *http.Request) {
	var err error
	switch how := r.PathValue("how"); how {
	case "kill":
		err = c.s.killLeases()
	case "start":
		err = c.s.startLeases(r.Context())
	default:
		fail(w, http.StatusNotFound, fmt.Errorf("unknown scheduler action %q: kill or start", how))
		return
	}
	if err != nil {
		fail(w, http.StatusConflict, err)
		return
	}
	c.logf("scheduler %s", r.PathValue("how"))
	w.WriteHeader(http.StatusNoContent)
}
