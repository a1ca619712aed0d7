// Package local runs the whole of Oikos on one machine without Docker: a private PostgreSQL
// started from the binaries on PATH (unless OIKOS_DATABASE_URL names a server), the lab
// simulator with the seeded fleet, and the three daemons. It backs `make up`, and `make test`
// uses its Postgres half to give the test suite a server.
package local

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/secretbox"
	"github.com/oikos-hq/oikos/testkit/pgcluster"
)

// Options configure a local stack.
type Options struct {
	Root    string    // repository root: binaries in Root/bin, state in Root/.local
	Stdout  io.Writer // where the children's logs go
	Getenv  func(string) string
	APIAddr string // OIKOS_API_ADDR, default 127.0.0.1:8080
	SchAddr string // OIKOS_SCHEDULER_ADDR, default 127.0.0.1:8091
	AgtAddr string // OIKOS_AGENT_ADDR, default 127.0.0.1:8092
	// LabsimControl is the simulator's fault-injection API (LABSIM_CONTROL, default 127.0.0.1:7070).
	LabsimControl string
	// Labsim may be turned off (tests of the launcher that must not bind the fleet's ports).
	NoLabsim bool
	// LLMSimAddr is where the scripted model listens when no real one is configured
	// (OIKOS_LLMSIM_ADDR, default 127.0.0.1:8099).
	LLMSimAddr string
}

// Stack is a running local system.
type Stack struct {
	opts    Options
	cluster *pgcluster.Cluster
	// mu guards children: Wait replaces a child it restarts while Down may be stopping them.
	mu       sync.Mutex
	children []*child
	DBURL    string
	// Token is the operator token (OIKOS_OPERATOR_TOKEN, else TokenFile's).
	Token string
	// TokenFile keeps Token across runs; empty when OIKOS_OPERATOR_TOKEN gave it.
	TokenFile string
	// AgentToken is the agent's own token, role agent (OIKOS_AGENT_TOKEN, else
	// AgentTokenFile's): the api makes sure it exists, the agent calls the api with it.
	AgentToken string
	// AgentTokenFile keeps AgentToken across runs; empty when OIKOS_AGENT_TOKEN gave it.
	AgentTokenFile string
	// SecretsKeyFile holds the key `oikos secret set` seals values under, given to the api,
	// the scheduler and the agent alike; empty when the caller's OIKOS_SECRETS_KEY or
	// OIKOS_SECRETS_KEY_FILE gave the key (which the daemons then inherit).
	SecretsKeyFile string
	// LLM says which model Nomos talks to.
	LLM string
}

// launcherLog reports a recovered panic of the launcher's own goroutines.
var launcherLog = zerolog.New(os.Stderr).With().Timestamp().Str("daemon", "oikos-local").Logger()

// demoModel is the model name of llmsim's demo script.
const demoModel = "nomos-sim"

// labsimNameMap sends the demo fleet's names (*.lab.example, *.example) to the lab
// simulator's HTTPS ingress, for the scheduler's checks (OIKOS_CHECK_NAME_MAP) and the
// agent's probes (OIKOS_AGENT_NAME_MAP) alike: nothing resolves a real name or dials a real
// address.
const labsimNameMap = "*.lab.example=127.0.20.1:8443,*.example=127.0.20.1:8443"

type child struct {
	name string
	// path, args and env are what it was started with, to start it again the same way.
	path      string
	args, env []string
	cmd       *exec.Cmd
	started   time.Time
	done      chan struct{}
	err       error
	// quickExits counts the exits in a row that came soon after a start (Wait's give-up rule).
	quickExits int
}

// Supervision (Wait): a daemon that exits is started again, as compose's
// `restart: unless-stopped` would, after a back-off that doubles from restartFirst up to
// restartMax. One that exits within stableAfter of being started counts as failing at start;
// after maxQuickExits such exits in a row the stack gives up and stops everything.
var (
	restartFirst  = time.Second
	restartMax    = 30 * time.Second
	stableAfter   = 20 * time.Second
	maxQuickExits = 5
)

func (o *Options) defaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	pick := func(field *string, env, def string) {
		if *field == "" {
			*field = o.Getenv(env)
		}
		if *field == "" {
			*field = def
		}
	}
	pick(&o.APIAddr, "OIKOS_API_ADDR", "127.0.0.1:8080")
	pick(&o.SchAddr, "OIKOS_SCHEDULER_ADDR", "127.0.0.1:8091")
	pick(&o.AgtAddr, "OIKOS_AGENT_ADDR", "127.0.0.1:8092")
	pick(&o.LabsimControl, "LABSIM_CONTROL", "127.0.0.1:7070")
	pick(&o.LLMSimAddr, "OIKOS_LLMSIM_ADDR", "127.0.0.1:8099")
}

// StartPostgres returns a database URL: OIKOS_DATABASE_URL when set, else a private
// cluster's, started in dir.
func StartPostgres(ctx context.Context, getenv func(string) string, dir string, fast bool, log io.Writer) (string, *pgcluster.Cluster, error) {
	if u := getenv("OIKOS_DATABASE_URL"); u != "" {
		return u, nil, nil
	}
	var logFile *os.File
	if f, ok := log.(*os.File); ok {
		logFile = f
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir, Fast: fast, Log: logFile})
	if err != nil {
		return "", nil, err
	}
	return c.URL("postgres"), c, nil
}

// Up starts everything and returns once every daemon answers /healthz.
func Up(ctx context.Context, opts Options) (*Stack, error) {
	opts.defaults()
	s := &Stack{opts: opts}
	state := filepath.Join(opts.Root, ".local")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	url, cluster, err := StartPostgres(ctx, opts.Getenv, filepath.Join(state, "pg"), false, opts.Stdout)
	if err != nil {
		return nil, err
	}
	s.cluster, s.DBURL = cluster, url
	fail := func(err error) (*Stack, error) {
		s.Down()
		return nil, err
	}
	keyFile, pubFile, err := ensureSSHKey(filepath.Join(state, "ssh"))
	if err != nil {
		return fail(err)
	}
	s.Token, s.TokenFile, err = ensureToken(filepath.Join(state, "operator-token"), opts.Getenv("OIKOS_OPERATOR_TOKEN"))
	if err != nil {
		return fail(err)
	}
	s.AgentToken, s.AgentTokenFile, err = ensureToken(filepath.Join(state, "agent-token"), opts.Getenv("OIKOS_AGENT_TOKEN"))
	if err != nil {
		return fail(err)
	}
	bin := filepath.Join(opts.Root, "bin")
	base := []string{"OIKOS_DATABASE_URL=" + url}
	if opts.Getenv(secretbox.KeyVar) == "" && opts.Getenv(secretbox.KeyFileVar) == "" {
		s.SecretsKeyFile = filepath.Join(state, "secrets-key")
		if err := ensureSecretsKey(s.SecretsKeyFile); err != nil {
			return fail(err)
		}
		base = append(base, secretbox.KeyFileVar+"="+s.SecretsKeyFile)
	}
	if !opts.NoLabsim {
		if err := s.spawn("labsim", filepath.Join(bin, "labsim"), []string{
			"--inventory", filepath.Join(opts.Root, "seeds", "inventory.yaml"),
			"--state-dir", filepath.Join(state, "labsim"),
			"--authorized-keys", pubFile,
			"--control", opts.LabsimControl,
		}, nil); err != nil {
			return fail(err)
		}
	}
	// The api makes sure both tokens exist (operator bootstrap-operator, agent nomos). The
	// local stack is the demo: it seeds the lab simulator's fleet, unless the caller names
	// an inventory of its own (OIKOS_INVENTORY) or says OIKOS_DEMO=false.
	apiEnv := append(slices.Clip(base), "OIKOS_API_ADDR="+opts.APIAddr, "OIKOS_OPERATOR_TOKEN="+s.Token,
		"OIKOS_AGENT_TOKEN="+s.AgentToken, "OIKOS_AGENT_URL=http://"+opts.AgtAddr)
	switch inv, demo := opts.Getenv("OIKOS_INVENTORY"), opts.Getenv("OIKOS_DEMO"); {
	case inv != "":
		apiEnv = append(apiEnv, "OIKOS_INVENTORY="+inv, "OIKOS_DEMO=false")
	case demo != "":
		apiEnv = append(apiEnv, "OIKOS_DEMO="+demo)
	default:
		apiEnv = append(apiEnv, "OIKOS_DEMO=true")
	}
	if err := s.spawn("oikos-api", filepath.Join(bin, "oikos-api"), nil, apiEnv); err != nil {
		return fail(err)
	}
	if err := s.waitReady(ctx, "oikos-api", opts.APIAddr, 90*time.Second); err != nil {
		return fail(err)
	}
	schedEnv := append(slices.Clip(base), "OIKOS_SCHEDULER_ADDR="+opts.SchAddr, "OIKOS_SSH_KEY_FILE="+keyFile,
		// Stable across the supervisor's restarts: the restarted scheduler renews its own
		// leases at once instead of waiting out the old process's.
		"OIKOS_SCHEDULER_ID=local-1",
		"OIKOS_API_URL=http://"+opts.APIAddr)
	agentEnv := append(slices.Clip(base), "OIKOS_AGENT_ADDR="+opts.AgtAddr, "OIKOS_API_URL=http://"+opts.APIAddr,
		"OIKOS_AGENT_TOKEN="+s.AgentToken)
	if !opts.NoLabsim {
		// The demo fleet's names reach labsim's HTTPS ingress, whose certificate the scheduler's
		// checks and the agent's probes (ping_service, http_get) trust; nothing resolves a
		// real name.
		caFile := filepath.Join(state, "labsim", "http-ca.pem")
		if err := waitFile(ctx, caFile, 30*time.Second); err != nil {
			return fail(fmt.Errorf("labsim: %w", err))
		}
		schedEnv = append(schedEnv, "OIKOS_CHECK_CA_FILE="+caFile, "OIKOS_CHECK_NAME_MAP="+labsimNameMap)
		agentEnv = append(agentEnv, "OIKOS_AGENT_CA_FILE="+caFile, "OIKOS_AGENT_NAME_MAP="+labsimNameMap)
	}
	// Nomos talks to the model OIKOS_LLM_* name; without one, to the scripted model llmsim
	// and its demo conversation (a health question, a read-only run, a plan, an approval and
	// a write-back).
	if base := opts.Getenv("OIKOS_LLM_BASE_URL"); base != "" {
		agentEnv = append(agentEnv, "OIKOS_LLM_BASE_URL="+base, "OIKOS_LLM_MODEL="+opts.Getenv("OIKOS_LLM_MODEL"),
			"OIKOS_LLM_API_KEY="+opts.Getenv("OIKOS_LLM_API_KEY"))
	} else {
		if err := s.spawn("llmsim", filepath.Join(bin, "llmsim"), []string{
			"--addr", opts.LLMSimAddr, "--script", filepath.Join(opts.Root, "testkit", "llmsim", "scripts", "demo.yaml"),
		}, nil); err != nil {
			return fail(err)
		}
		s.LLM = "llmsim (scripted demo) at http://" + opts.LLMSimAddr
		agentEnv = append(agentEnv, "OIKOS_LLM_BASE_URL=http://"+opts.LLMSimAddr+"/v1", "OIKOS_LLM_MODEL="+demoModel)
	}
	if s.LLM == "" {
		s.LLM = opts.Getenv("OIKOS_LLM_MODEL") + " at " + opts.Getenv("OIKOS_LLM_BASE_URL")
	}
	if err := s.spawn("oikos-scheduler", filepath.Join(bin, "oikos-scheduler"), nil, schedEnv); err != nil {
		return fail(err)
	}
	if err := s.spawn("oikos-agent", filepath.Join(bin, "oikos-agent"), nil, agentEnv); err != nil {
		return fail(err)
	}
	for name, addr := range map[string]string{"oikos-scheduler": opts.SchAddr, "oikos-agent": opts.AgtAddr} {
		if err := s.waitReady(ctx, name, addr, 60*time.Second); err != nil {
			return fail(err)
		}
	}
	if err := s.writePIDs(filepath.Join(state, "pids")); err != nil {
		return fail(err)
	}
	return s, nil
}

// writePIDs records every process the stack started, Postgres included, so an operator (or
// the smoke test) can see what runs and check that nothing outlives a stop.
func (s *Stack) writePIDs(file string) error {
	var b strings.Builder
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.children {
		fmt.Fprintf(&b, "%s %d\n", c.name, c.cmd.Process.Pid)
	}
	if s.cluster != nil {
		fmt.Fprintf(&b, "postgres %d\n", s.cluster.PID())
	}
	return os.WriteFile(file, []byte(b.String()), 0o600)
}

// MCPURL is the agent's MCP endpoint (Streamable HTTP; a bearer token is an api token).
func (s *Stack) MCPURL() string { return "http://" + s.opts.AgtAddr + "/mcp" }

// Addrs returns the api, scheduler and agent listen addresses.
func (s *Stack) Addrs() (api, scheduler, agent string) {
	return s.opts.APIAddr, s.opts.SchAddr, s.opts.AgtAddr
}

// Wait supervises the children until ctx ends: a daemon that exits is logged and started
// again after a back-off (restartFirst doubling to restartMax), so one crash or `kill -9`
// does not take the api, the agent, the simulator and Postgres down with it. It returns an
// error, for the caller to stop everything, only when a daemon keeps failing at start
// (maxQuickExits exits in a row, each within stableAfter of its start) or cannot be started.
func (s *Stack) Wait(ctx context.Context) error {
	exits := make(chan *child)
	watch := func(c *child) {
		done := c.done
		safego.Go(launcherLog, "wait-"+c.name, func() {
			select {
			case <-done:
				select {
				case exits <- c:
				case <-ctx.Done():
				}
			case <-ctx.Done():
			}
		})
	}
	s.mu.Lock()
	for _, c := range s.children {
		watch(c)
	}
	s.mu.Unlock()
	for {
		var c *child
		select {
		case <-ctx.Done():
			return nil
		case c = <-exits:
		}
		s.mu.Lock()
		exitErr, ran := c.err, time.Since(c.started)
		s.mu.Unlock()
		if ran < stableAfter {
			c.quickExits++
		} else {
			c.quickExits = 1
		}
		if c.quickExits >= maxQuickExits {
			return fmt.Errorf("%s keeps failing: it exited %d times in a row within %s of starting (last: %v); its log above says why",
				c.name, c.quickExits, stableAfter, exitErr)
		}
		delay := min(restartFirst<<(c.quickExits-1), restartMax)
		fmt.Fprintf(s.opts.Stdout, "oikos-local | %s exited (%v) after %s; restarting it in %s (exit %d in a row)\n",
			c.name, exitErr, ran.Round(time.Millisecond), delay, c.quickExits)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		s.mu.Lock()
		_, err := s.start(c)
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("restart %s: %w", c.name, err)
		}
		fmt.Fprintf(s.opts.Stdout, "oikos-local | %s restarted (pid %d)\n", c.name, c.cmd.Process.Pid)
		if err := s.writePIDs(filepath.Join(s.opts.Root, ".local", "pids")); err != nil {
			fmt.Fprintf(s.opts.Stdout, "oikos-local | could not record the new pid: %v\n", err)
		}
		watch(c)
	}
}

// Down stops the children in reverse order of start (SIGTERM, then SIGKILL after a grace
// period) and then the private Postgres. Safe to call twice.
func (s *Stack) Down() {
	s.mu.Lock()
	children := slices.Clone(s.children)
	s.mu.Unlock()
	for i := len(children) - 1; i >= 0; i-- {
		c := children[i]
		select {
		case <-c.done:
			continue
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	}
	s.mu.Lock()
	s.children = nil
	s.mu.Unlock()
	if s.cluster != nil {
		_ = s.cluster.Stop()
		s.cluster = nil
	}
}

func (s *Stack) spawn(name, path string, args, env []string) error {
	c, err := s.start(&child{name: name, path: path, args: args, env: env})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.children = append(s.children, c)
	s.mu.Unlock()
	return nil
}

// start runs the process c describes and returns c, running.
func (s *Stack) start(c *child) (*child, error) {
	name, path, args, env := c.name, c.path, c.args, c.env
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s not built (%s): run `make build` first", name, path)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	pw := &prefixWriter{prefix: name + " | ", w: s.opts.Stdout}
	cmd.Stdout, cmd.Stderr = pw, pw
	// Own process group, and SIGTERM if the launcher dies, so nothing outlives `make up`.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.cmd, c.started, c.done, c.err = cmd, time.Now(), make(chan struct{}), nil
	done := c.done
	safego.Go(launcherLog, "reap-"+name, func() {
		defer close(done)
		err := cmd.Wait()
		s.mu.Lock()
		c.err = err
		s.mu.Unlock()
	})
	return c, nil
}

// waitReady waits until the named child answers /readyz at addr, and gives up at once when
// the child exits (a configuration it refuses, such as a malformed OIKOS_AGENT_TOKEN: its
// own log line, above, says why).
func (s *Stack) waitReady(ctx context.Context, name, addr string, limit time.Duration) error {
	var exited <-chan struct{}
	var c *child
	for _, ch := range s.children {
		if ch.name == name {
			c, exited = ch, ch.done
		}
	}
	if err := waitHealthy(ctx, "http://"+addr+"/readyz", limit, exited); err != nil {
		if c != nil && errors.Is(err, errExited) {
			return fmt.Errorf("%s exited before it was ready (%v); its log above says why", name, c.err)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// errExited: the process waitHealthy waited for ended.
var errExited = errors.New("process exited")

func waitHealthy(ctx context.Context, url string, limit time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s answered %d", url, resp.StatusCode)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errExited
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready within %s: %v", limit, last)
}

// waitFile waits until path exists.
func waitFile(ctx context.Context, path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s", path, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ensureSSHKey creates (once) the ed25519 key the scheduler uses for the fleet and returns
// the private key file and the authorized-keys file for the simulator.
func ensureSSHKey(dir string) (string, string, error) {
	keyFile := filepath.Join(dir, "id_ed25519")
	if _, _, err := remote.EnsureKeyFile(keyFile, "oikos-local scheduler"); err != nil {
		return "", "", err
	}
	return keyFile, keyFile + ".pub", nil
}

// ensureToken returns a token the stack keeps (the operator's, the agent's) and the file it
// is kept in: the given one (from the environment, file ""), else the one stored in file,
// else a new one written there, so `make up` uses the same tokens on every run. A new token
// is "oik_" and 64 hex characters, the form the api requires of OIKOS_AGENT_TOKEN.
func ensureToken(file, given string) (string, string, error) {
	if given != "" {
		return given, "", nil
	}
	if b, err := os.ReadFile(file); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), file, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	tok := "oik_" + hex.EncodeToString(b[:])
	return tok, file, os.WriteFile(file, []byte(tok+"\n"), 0o600)
}

// ensureSecretsKey creates (once) the file of the secrets key: 32 random bytes in base64,
// readable by this user only (the daemons refuse a key file others may read). The key is
// kept across runs, as the database is: a new key would leave every stored secret sealed
// under the old one, unopenable.
func ensureSecretsKey(file string) error {
	if _, err := os.Stat(file); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(base64.StdEncoding.EncodeToString(b[:])+"\n"), 0o600)
}

// prefixWriter prefixes each line of a child's output with its name.
type prefixWriter struct {
	prefix string
	w      io.Writer
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			break
		}
		if _, err := io.WriteString(p.w, p.prefix+string(p.buf[:i+1])); err != nil {
			return 0, err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
