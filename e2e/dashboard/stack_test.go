package dashboard_test

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	schedapp "github.com/oikos-hq/oikos/scheduler/app"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/llmsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Token names: approvals and sessions show them in the dashboard.
const (
	operatorName = "e2e-dash-operator"
	readonlyName = "e2e-dash-readonly"
	// expiringName is an operator token of its own for the expired-cookie test, so expiring
	// its sessions in the database touches no other test's browser.
	expiringName = "e2e-dash-expiring"
	// llmModel is the model of testdata/chat.yaml.
	llmModel = "dash-sim"
)

// checkInterval is every check's interval in the stack (the seeded ones are 60 s and more):
// short, so a fault shows within seconds, and long enough that the whole seeded fleet's
// checks stay a light load on the lab simulator under -race.
const checkInterval = 5 * time.Second

// schedulerID is the stack's scheduler: its executor's claims and its leases.
const schedulerID = "e2e-dash-scheduler"

// stackOptions say what a stack runs besides the database and the api.
type stackOptions struct {
	name string
	lab  bool // the lab simulator with the scheduler's executor and check runner
	// With the lab: the scheduler's incident engine kicked by the runner (TestBrowserIncidents),
	// and every check's interval (checkInterval when zero).
	incidents bool
	interval  time.Duration
	// healthy: every seeded check passes in the lab (fresh backups; the NFS, switch and UPS
	// ports served and dialled), so the only incidents are a test's faults.
	healthy bool
}

// stack is the package's world: database, api (restartable on its address), lab simulator
// with the scheduler's executor and check runner, the agent on llmsim behind a proxy, and the
// tokens the browser signs in with.
type stack struct {
	db  *pgtest.DB
	log zerolog.Logger

	apiMu   sync.Mutex
	api     *apiapp.Server
	apiCfg  apiapp.Config
	apiAddr string // host:port, kept across restarts
	apiURL  string
	client  *e2estack.Client

	sim      *labsim.Sim
	agent    *e2estack.Agent
	agentURL atomic.Pointer[url.URL]
	// agentDown makes the proxy in front of the agent answer 503, as an agent that is down
	// would (the control server's POST /agent/{down,up}).
	agentDown atomic.Bool

	// With the lab: the scheduler's lease manager, as the daemon runs it, under the
	// executor's id; the Ops page's schedulers panel shows what it holds. The executor and
	// the runner here do not consult it, so the control server can kill it (POST
	// /scheduler/kill) without stalling the other tests' executions and checks.
	leasesMu sync.Mutex
	leases   *schedapp.Leases

	operator, readonly, agentToken, expiring string
}

// buildStack starts a stack; t's Cleanup (the package's PackageTB) stops it in reverse order.
func buildStack(t *e2estack.PackageTB, o stackOptions) (s *stack, err error) {
	defer e2estack.Recover(&err)
	ctx := context.Background()
	s = &stack{log: zerolog.Nop()}
	if os.Getenv("OIKOS_E2E_DASH_LOG") != "" {
		s.log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	s.db = pgtest.New(t)

	// The model first, then a proxy in front of the agent: the api is configured with the
	// agent's URL before the agent (which needs the api's URL) exists.
	raw, err := os.ReadFile(filepath.Join("testdata", "chat.yaml"))
	if err != nil {
		return nil, err
	}
	script, err := llmsim.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("llmsim script: %w", err)
	}
	llmURL, stopLLM, err := llmsim.Listen(ctx, "127.0.0.1:0", script, llmsim.Options{Logger: s.log})
	if err != nil {
		return nil, err
	}
	t.Cleanup(stopLLM)
	proxyURL, err := s.startAgentProxy(t)
	if err != nil {
		return nil, err
	}

	var tok [24]byte
	_, _ = rand.Read(tok[:])
	s.agentToken = "oik_" + hex.EncodeToString(tok[:])
	// The suite signs in dozens of times from one address (every test its own browser
	// context), faster than an operator's default allows; the limit itself is the api's
	// tests' (api/internal/httpapi TestSignInRateLimit).
	s.apiCfg = apiapp.Config{DatabaseURL: s.db.URL, SeedOnStart: true, Demo: true, AgentToken: s.agentToken, AgentURL: proxyURL,
		SignInAttempts: 600, SignInPeriod: time.Minute}
	if err := s.startAPI(t, "127.0.0.1:0"); err != nil {
		return nil, err
	}
	// A restart need not ingest the seeds again.
	s.apiCfg.SeedOnStart, s.apiCfg.Demo = false, false
	s.client = &e2estack.Client{URL: s.apiURL, HTTP: httpClient}
	if err := e2estack.MintTokens(ctx, s.api,
		e2estack.Token{Name: operatorName, Role: "operator", Into: &s.operator},
		e2estack.Token{Name: readonlyName, Role: "readonly", Into: &s.readonly},
		e2estack.Token{Name: expiringName, Role: "operator", Into: &s.expiring},
	); err != nil {
		return nil, err
	}

	if o.lab {
		if err := s.startLab(ctx, t, o); err != nil {
			return nil, err
		}
	}

	a, err := e2estack.LaunchAgent(map[string]string{
		"OIKOS_DATABASE_URL": s.db.URL,
		"OIKOS_AGENT_ADDR":   "127.0.0.1:0",
		"OIKOS_API_URL":      s.apiURL,
		"OIKOS_AGENT_TOKEN":  s.agentToken,
		"OIKOS_SCHEMA_WAIT":  "30s",
		"OIKOS_LLM_BASE_URL": llmURL,
		"OIKOS_LLM_MODEL":    llmModel,
		"OIKOS_LLM_API_KEY":  "unused",
	}, s.log)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { a.Stop(40 * time.Second) })
	s.agent = a
	u, err := url.Parse(a.URL)
	if err != nil {
		return nil, err
	}
	s.agentURL.Store(u)
	return s, nil
}

// startAPI starts the api on addr ("127.0.0.1:0" the first time, then the address it got,
// so a restart keeps the URL the browser and the agent know).
func (s *stack) startAPI(t testing.TB, addr string) error {
	cfg := s.apiCfg
	cfg.Addr = addr
	var api *apiapp.Server
	var err error
	// The old listener's port may take a moment to be free again after a stop.
	for range 50 {
		if api, err = apiapp.Start(context.Background(), cfg, s.log); err == nil || addr == "127.0.0.1:0" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	t.Cleanup(api.Stop)
	s.apiMu.Lock()
	s.api = api
	s.apiAddr = api.Addr().String()
	s.apiURL = "http://" + s.apiAddr
	s.apiMu.Unlock()
	return nil
}

// restartAPI stops the api, waits down, and starts it again on the same address.
func (s *stack) restartAPI(t testing.TB, down time.Duration) error {
	s.apiMu.Lock()
	old, addr := s.api, s.apiAddr
	s.apiMu.Unlock()
	old.Stop()
	time.Sleep(down)
	return s.startAPI(t, addr)
}

// startAgentProxy serves a reverse proxy to the agent (once it runs) and returns its URL.
func (s *stack) startAgentProxy(t testing.TB) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(s.agentURL.Load())
		},
		FlushInterval: -1, // chat turns stream
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "agent: "+err.Error(), http.StatusBadGateway)
		},
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.agentURL.Load() == nil || s.agentDown.Load() {
			http.Error(w, "the agent is not running", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), nil
}

// startLab starts the lab simulator serving the seeded inventory over SSH and, on one SSH
// pool as the scheduler daemon shares it, the executor and the check runner, with every
// check's interval cut to checkInterval (or o.interval), and the incident engine if o.incidents.
func (s *stack) startLab(ctx context.Context, t testing.TB, o stackOptions) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return err
	}
	fleet, err := labsim.FleetFromInventory(seeds.Inventory())
	if err != nil {
		return err
	}
	// With o.healthy, a declared TCP port (ip:port) is bound on a loopback port picked here,
	// for the checks' name map: tcpAt maps the declared ip to it.
	tcpAt := map[string]string{}
	listen := func(declared string) string {
		ip, _, _ := net.SplitHostPort(declared)
		if !o.healthy || !slices.Contains(fleet.TCPListeners, declared) {
			return "127.0.0.1:0"
		}
		if at, ok := tcpAt[ip]; ok {
			return at
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "127.0.0.1:0"
		}
		tcpAt[ip] = ln.Addr().String()
		_ = ln.Close()
		return tcpAt[ip]
	}
	sim, err := labsim.New(fleet, labsim.Options{
		StateDir:       t.TempDir(),
		Listen:         listen,
		AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()},
		Logger:         s.log,
		FreshBackups:   o.healthy,
	})
	if err != nil {
		return err
	}
	if err := sim.Start(ctx); err != nil {
		return err
	}
	t.Cleanup(sim.Stop)
	s.sim = sim

	// Short intervals, set before the runner's first load.
	secs := int(cmp.Or(o.interval, checkInterval) / time.Second)
	if _, err := s.db.Pool.Exec(ctx, `UPDATE check_defs SET interval_seconds = $1, timeout_seconds = LEAST(timeout_seconds, $1)`, secs); err != nil {
		return fmt.Errorf("check intervals: %w", err)
	}

	pool := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: schedapp.NewHostKeys(s.db.Pool, s.log),
		DialTimeout: 5 * time.Second, Logger: s.log, Dial: sim.DialContext})
	t.Cleanup(pool.Close)
	connCfg, err := pgx.ParseConfig(s.db.URL)
	if err != nil {
		return err
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: s.log})
	graph := schedapp.NewFleet(s.db.Pool, schedapp.FleetOptions{Logger: s.log})
	ex := schedapp.NewExecutor(schedapp.ExecutorOptions{Pool: s.db.Pool, SSH: pool, Fleet: graph, Notifier: notifier,
		Logger: s.log, SchedulerID: schedulerID, Concurrency: 8})
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(sim.CACertPEM()) {
		return errors.New("labsim: its ingress certificate does not parse")
	}
	// The fleet's names reach the simulator's HTTPS ingress, as `make up` maps them.
	ingress := sim.HTTPSAddr()
	runOpts := schedapp.CheckRunnerOptions{Pool: s.db.Pool, SSH: pool, Fleet: graph,
		Notifier: notifier, Logger: s.log, Concurrency: 16,
		NameMap:       map[string]string{"*.lab.example": ingress, "*.example": ingress},
		TLSConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		InitialSpread: time.Second}
	for ip, at := range tcpAt {
		runOpts.NameMap[ip] = at
	}
	if o.incidents {
		engine, err := schedapp.NewIncidentEngine(schedapp.IncidentEngineOptions{Pool: s.db.Pool, Logger: s.log, Every: 500 * time.Millisecond})
		if err != nil {
			return err
		}
		if err := engine.Start(ctx); err != nil {
			return err
		}
		t.Cleanup(engine.Stop)
		runOpts.OnFlush = engine.Flushed
	}
	runner, err := schedapp.NewCheckRunner(runOpts)
	if err != nil {
		return err
	}
	if err := notifier.Start(ctx); err != nil {
		return err
	}
	t.Cleanup(notifier.Stop)
	if err := ex.Start(ctx); err != nil {
		return err
	}
	t.Cleanup(ex.Stop)
	if err := runner.Start(ctx); err != nil {
		return err
	}
	t.Cleanup(runner.Stop)
	if err := s.startLeases(ctx); err != nil {
		return err
	}
	t.Cleanup(func() {
		s.leasesMu.Lock()
		defer s.leasesMu.Unlock()
		if s.leases != nil {
			s.leases.Stop()
		}
	})
	return nil
}

// The stack's lease timings: short, so a killed scheduler's units show as orphaned within
// seconds.
const (
	leaseRenew  = 500 * time.Millisecond
	leaseExpiry = 3 * time.Second
)

// startLeases starts the stack's lease manager (again, after killLeases), crash detection
// included.
func (s *stack) startLeases(ctx context.Context) error {
	s.leasesMu.Lock()
	defer s.leasesMu.Unlock()
	if s.leases != nil {
		return errors.New("the scheduler's lease manager is running")
	}
	session, err := pgx.ParseConfig(s.db.URL)
	if err != nil {
		return err
	}
	m, err := schedapp.NewLeases(schedapp.LeasesOptions{Pool: s.db.Pool, ID: schedulerID, Logger: s.log,
		Renew: leaseRenew, Expiry: leaseExpiry, Session: session})
	if err != nil {
		return err
	}
	// It lives until killed or the stack stops, not as long as the request that started it.
	if err := m.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.leases = m
	return nil
}

// killLeases stops the lease manager as a kill -9 would: no release, its session closed.
func (s *stack) killLeases() error {
	s.leasesMu.Lock()
	defer s.leasesMu.Unlock()
	if s.leases == nil {
		return errors.New("the scheduler's lease manager is not running")
	}
	s.leases.Halt()
	s.leases.DropSession()
	s.leases = nil
	return nil
}

var httpClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32}, Timeout: time.Minute}

// currentURL is the api's base URL (the same across restarts).
func (s *stack) currentURL() string {
	s.apiMu.Lock()
	defer s.apiMu.Unlock()
	return s.apiURL
}
