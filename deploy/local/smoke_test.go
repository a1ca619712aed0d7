package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedLog is the launcher's output, written by the reading goroutine and read by the test.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMakeUpSmoke runs `oikos-local up` as an operator would (the binary behind `make up`),
// waits until the three daemons answer /healthz against the private cluster, checks that the
// agent got its token (the api made it, the agent runs with it, its /mcp admits api tokens
// and refuses requests without one) and the lab simulator's name map, sends SIGTERM, and
// checks that no process it started, Postgres included, is left running.
func TestMakeUpSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every daemon; skipped with -short")
	}
	if c, err := net.DialTimeout("tcp", "127.0.10.1:2222", 200*time.Millisecond); err == nil {
		c.Close()
		t.Skip("the demo fleet's addresses are in use (is `make up` running?)")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	for name, pkg := range map[string]string{
		"oikos-api": "./api/cmd/oikos-api", "oikos-scheduler": "./scheduler/cmd/oikos-scheduler",
		"oikos-agent": "./agent/cmd/oikos-agent", "labsim": "./testkit/cmd/labsim", "oikos-local": "./deploy/cmd/oikos-local",
		"llmsim": "./testkit/cmd/llmsim",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	if err := os.Symlink(filepath.Join(repo, "seeds"), filepath.Join(root, "seeds")); err != nil {
		t.Fatal(err)
	}
	// The scripted model's demo conversation, which `make up` runs Nomos on without a model.
	if err := os.Symlink(filepath.Join(repo, "testkit"), filepath.Join(root, "testkit")); err != nil {
		t.Fatal(err)
	}
	apiAddr, schAddr, agtAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OIKOS_") && !strings.HasPrefix(kv, "LABSIM_") {
			env = append(env, kv)
		}
	}
	env = append(env, "OIKOS_API_ADDR="+apiAddr, "OIKOS_SCHEDULER_ADDR="+schAddr, "OIKOS_AGENT_ADDR="+agtAddr,
		"LABSIM_CONTROL="+freeAddr(t), "OIKOS_LLMSIM_ADDR="+freeAddr(t))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	up := exec.CommandContext(ctx, filepath.Join(bin, "oikos-local"), "up")
	up.Dir, up.Env = root, env
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	up.Stderr = up.Stdout
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	defer up.Process.Kill()
	ready := make(chan struct{})
	var log lockedLog
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			log.add(sc.Text())
			if !signalled && strings.HasPrefix(sc.Text(), "Oikos is up.") {
				signalled = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatalf("stack did not come up:\n%s", log.String())
	}
	upAt := time.Now() // Postgres has been running since before this
	for name, addr := range map[string]string{"api": apiAddr, "scheduler": schAddr, "agent": agtAddr} {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("%s /healthz: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s /healthz answered %d", name, resp.StatusCode)
		}
	}
	pids := readPIDs(t, filepath.Join(root, ".local", "pids"))
	for _, want := range []string{"postgres", "labsim", "oikos-api", "oikos-scheduler", "oikos-agent", "llmsim"} {
		if pids[want] == 0 {
			t.Fatalf("pids file lacks %s: %v", want, pids)
		}
	}
	checkAgentToken(t, root, apiAddr, agtAddr, pids, &log)
	checkSecretsKey(t, root, apiAddr, pids)
	if out := log.String(); !strings.Contains(out, "dashboard        http://"+apiAddr+"/") {
		t.Errorf("the banner does not name the dashboard at http://%s/:\n%s", apiAddr, out)
	}

	// kill -9 of the scheduler: the launcher restarts it and leaves the others running.
	if err := syscall.Kill(pids["oikos-scheduler"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now().Add(60 * time.Second)
	for !strings.Contains(log.String(), "oikos-scheduler restarted") {
		if time.Now().After(restarted) {
			t.Fatalf("the killed scheduler was not restarted:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		resp, err := http.Get("http://" + schAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(restarted) {
			t.Fatalf("the restarted scheduler is not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for name, addr := range map[string]string{"api": apiAddr, "agent": agtAddr} {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s after the scheduler's restart: %v %v", name, resp, err)
		}
		resp.Body.Close()
	}
	old := pids["oikos-scheduler"]
	pids = readPIDs(t, filepath.Join(root, ".local", "pids"))
	if pids["oikos-scheduler"] == old || pids["oikos-scheduler"] == 0 {
		t.Fatalf("the pids file still names the killed scheduler %d: %v", old, pids)
	}
	pids["killed-scheduler"] = old
	checkSecondScheduler(t, filepath.Join(bin, "oikos-scheduler"), pids["oikos-scheduler"], schAddr, upAt)
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- up.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("oikos-local exited with %v after SIGTERM:\n%s", err, log.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("oikos-local did not stop within 90s of SIGTERM")
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after SIGTERM: %v", name, pid, err)
		}
	}
}

// checkAgentToken: `up` made and kept the agent's token, gave it to the api (which made it
// the agent token "nomos") and to the agent, gave the agent the scheduler's name map and CA,
// and the agent's /mcp refuses a request without a token and admits api tokens.
func checkAgentToken(t *testing.T, root, apiAddr, agtAddr string, pids map[string]int, log *lockedLog) {
	t.Helper()
	readToken := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, ".local", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	opTok, agentTok := readToken("operator-token"), readToken("agent-token")
	if !strings.HasPrefix(agentTok, "oik_") || agentTok == opTok {
		t.Fatalf("agent token %q: want an oik_ token of its own", agentTok)
	}
	mcpURL := "http://" + agtAddr + "/mcp"
	if out := log.String(); !strings.Contains(out, mcpURL) || !strings.Contains(out, filepath.Join(".local", "agent-token")) {
		t.Errorf("the banner names neither the MCP URL %s nor the agent token's file:\n%s", mcpURL, out)
	}

	// The children's environments (Linux: /proc): the api and the agent hold the same token;
	// the agent probes the demo fleet through the simulator, as the scheduler's checks do.
	apiEnv, agentEnv, schedEnv := procEnv(t, pids["oikos-api"]), procEnv(t, pids["oikos-agent"]), procEnv(t, pids["oikos-scheduler"])
	if apiEnv["OIKOS_AGENT_TOKEN"] != agentTok || agentEnv["OIKOS_AGENT_TOKEN"] != agentTok {
		t.Errorf("OIKOS_AGENT_TOKEN: api %q, agent %q; want both %q", apiEnv["OIKOS_AGENT_TOKEN"], agentEnv["OIKOS_AGENT_TOKEN"], agentTok)
	}
	for agentVar, schedVar := range map[string]string{"OIKOS_AGENT_NAME_MAP": "OIKOS_CHECK_NAME_MAP", "OIKOS_AGENT_CA_FILE": "OIKOS_CHECK_CA_FILE"} {
		if got, want := agentEnv[agentVar], schedEnv[schedVar]; got == "" || got != want {
			t.Errorf("agent %s = %q, want the scheduler's %s %q", agentVar, got, schedVar, want)
		}
	}
	if strings.Contains(log.String(), "OIKOS_AGENT_TOKEN is not set") {
		t.Error("the agent started without OIKOS_AGENT_TOKEN")
	}

	// The api made the token the agent's.
	req, _ := http.NewRequest(http.MethodGet, "http://"+apiAddr+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+agentTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var who struct{ Name, Role string }
	err = json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || who.Name != "nomos" || who.Role != "agent" {
		t.Errorf("whoami with the agent token: %s %+v (%v); want nomos, agent", resp.Status, who, err)
	}

	// /mcp: 401 without a token; an MCP initialize with either token opens a session.
	initialize := func(token string) *http.Response {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
			`"capabilities":{},"clientInfo":{"name":"oikos-smoke","version":"0"}}}`
		req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("POST /mcp: %v", err)
		}
		return resp
	}
	resp = initialize("")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("POST /mcp without a token: %s (WWW-Authenticate %q), want 401 Bearer", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	for name, tok := range map[string]string{"operator": opTok, "agent": agentTok} {
		resp := initialize(tok)
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" ||
			!strings.Contains(string(b), `"serverInfo"`) {
			t.Errorf("initialize with the %s token: %s, session %q:\n%s", name, resp.Status, resp.Header.Get("Mcp-Session-Id"), b)
		}
	}
}

// checkSecretsKey: `up` made a secrets key only this user may read and gave the three
// daemons the same one, so `oikos secret set` works on the local stack: a secret set through
// the api is listed, without its value.
func checkSecretsKey(t *testing.T, root, apiAddr string, pids map[string]int) {
	t.Helper()
	file := filepath.Join(root, ".local", "secrets-key")
	info, err := os.Stat(file)
	if err != nil {
		t.Fatalf("secrets key: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", file, info.Mode().Perm())
	}
	for _, name := range []string{"oikos-api", "oikos-scheduler", "oikos-agent"} {
		if got := procEnv(t, pids[name])["OIKOS_SECRETS_KEY_FILE"]; got != file {
			t.Errorf("%s OIKOS_SECRETS_KEY_FILE = %q, want %q", name, got, file)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, ".local", "operator-token"))
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+apiAddr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(out)
	}
	const value = "smoke-secret-value-4f1c"
	if code, out := call(http.MethodPut, "/api/v1/secrets/smoke_token", `{"value":"`+value+`"}`); code != http.StatusCreated {
		t.Fatalf("PUT /api/v1/secrets/smoke_token: %d %s; want 201", code, out)
	}
	code, out := call(http.MethodGet, "/api/v1/secrets", "")
	if code != http.StatusOK || !strings.Contains(out, `"smoke_token"`) || strings.Contains(out, value) {
		t.Errorf("GET /api/v1/secrets: %d %s; want smoke_token listed without its value", code, out)
	}
}

// procEnv reads a child's environment (Linux: /proc); the last of a repeated name wins, as
// for the child's getenv.
func procEnv(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("environment of pid %d: %v", pid, err)
	}
	m := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func readPIDs(t *testing.T, file string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var name string
		var pid int
		if _, err := fmt.Sscanf(line, "%s %d", &name, &pid); err != nil {
			t.Fatalf("pids line %q: %v", line, err)
		}
		out[name] = pid
	}
	return out
}

// checkSecondScheduler runs a second real scheduler process beside make up's local-1, with
// the same environment but its own id and 2 s / 6 s leases, and stops it the ways a host
// does: SIGSTOP (its sockets stay open, so local-1 waits out its leases; after SIGCONT it
// rejoins under a new generation) and kill -9 (its Postgres session closes with it, so
// local-1 takes its units at once, well before their expiry).
func checkSecondScheduler(t *testing.T, binary string, first int, firstAddr string, upAt time.Time) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", first))
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var env []string
	for _, kv := range strings.Split(string(raw), "\x00") {
		if kv != "" && !strings.HasPrefix(kv, "OIKOS_SCHEDULER_ID=") && !strings.HasPrefix(kv, "OIKOS_SCHEDULER_ADDR=") &&
			!strings.HasPrefix(kv, "OIKOS_LEASE_") {
			env = append(env, kv)
		}
	}
	const expiry = 6 * time.Second
	env = append(env, "OIKOS_SCHEDULER_ID=local-2", "OIKOS_SCHEDULER_ADDR="+addr, "OIKOS_LEASE_RENEW=2s",
		"OIKOS_LEASE_EXPIRY="+expiry.String())
	second := exec.Command(binary)
	second.Env = env
	var out lockedLog
	second.Stdout, second.Stderr = lineWriter{&out}, lineWriter{&out}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = second.Process.Signal(syscall.SIGCONT)
		_ = second.Process.Kill()
		_ = second.Wait()
	}()
	owned := func(addr string) []string {
		resp, err := http.Get("http://" + addr + "/status")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var st struct {
			Owned []string `json:"owned"`
		}
		if json.NewDecoder(resp.Body).Decode(&st) != nil {
			return nil
		}
		return st.Owned
	}
	holdsAll := func(addr string, units []string) bool {
		have := map[string]bool{}
		for _, u := range owned(addr) {
			have[u] = true
		}
		for _, u := range units {
			if !have[u] {
				return false
			}
		}
		return true
	}
	waitFor := func(within time.Duration, what string, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > within {
				t.Fatalf("not within %s: %s\nlocal-2's log:\n%s", within, what, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitFor(60*time.Second, "local-2 holding its share", func() bool { return len(owned(addr)) > 0 })

	// SIGSTOP: local-2's process and sockets stay; local-1 must wait out its leases.
	units := owned(addr)
	paused := len(units)
	if err := second.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	took := waitFor(60*time.Second, "local-1 taking paused local-2's units", func() bool { return holdsAll(firstAddr, units) })
	if took < expiry-2*time.Second {
		t.Errorf("local-1 took paused local-2's units %s after SIGSTOP, before their %s expiry", took, expiry)
	}
	if err := second.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(60*time.Second, "local-2 rejoining after SIGCONT", func() bool { return len(owned(addr)) > 0 })
	// What it had buffered under the leases it lost was fenced out, not written.
	fenced := "0" // the counter appears with its first drop
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, `oikos_scheduler_results_dropped_total{reason="lease_lost"}`) {
				fenced = strings.Fields(line)[1]
			}
		}
	}

	// kill -9: the kernel closes local-2's connections and Postgres releases its session
	// lock; local-1 takes the units within a second or so. (Crash detection is off for one
	// expiry of local-1's, 15 s, after Postgres starts.)
	if wait := 16*time.Second - time.Since(upAt); wait > 0 {
		time.Sleep(wait)
	}
	units = owned(addr)
	if err := second.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := waitFor(30*time.Second, "local-1 taking killed local-2's units", func() bool { return holdsAll(firstAddr, units) })
	if killed >= expiry/2 {
		t.Errorf("local-1 took killed local-2's units %s after kill -9: it waited for their %s expiry", killed, expiry)
	}
	t.Logf("second scheduler: SIGSTOP → its %d units moved after %s (waited out), %s results fenced out after SIGCONT; kill -9 → its %d units moved after %s",
		paused, took.Round(10*time.Millisecond), fenced, len(units), killed.Round(10*time.Millisecond))
}

// lineWriter adds what a child writes to a log.
type lineWriter struct{ l *lockedLog }

func (w lineWriter) Write(p []byte) (int, error) {
	w.l.add(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
