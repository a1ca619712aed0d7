package stack

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
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
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/secretbox"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// StartAPI starts the api on a free loopback port with cfg (its Addr is set here); t's
// Cleanup stops it. It returns the server and its base URL.
func StartAPI(ctx context.Context, t testing.TB, cfg apiapp.Config, log zerolog.Logger) (*apiapp.Server, string, error) {
	cfg.Addr = "127.0.0.1:0"
	api, err := apiapp.Start(ctx, cfg, log)
	if err != nil {
		return nil, "", fmt.Errorf("api: %w", err)
	}
	t.Cleanup(api.Stop)
	return api, "http://" + api.Addr().String(), nil
}

// Token is one api token to mint: its name, its role and where its secret goes.
type Token struct {
	Name, Role string
	Into       *string
}

// MintTokens creates the tokens in order; a role is "operator", "agent" or "readonly".
func MintTokens(ctx context.Context, api *apiapp.Server, tokens ...Token) error {
	for _, tk := range tokens {
		// auth.Role is internal to the api; its values are passed as untyped constants.
		var secret string
		var err error
		switch tk.Role {
		case "operator":
			secret, err = api.Auth.Create(ctx, tk.Name, "operator")
		case "agent":
			secret, err = api.Auth.Create(ctx, tk.Name, "agent")
		case "readonly":
			secret, err = api.Auth.Create(ctx, tk.Name, "readonly")
		default:
			err = fmt.Errorf("token %s: unknown role %q", tk.Name, tk.Role)
		}
		if err != nil {
			return err
		}
		*tk.Into = secret
	}
	return nil
}

// LabOptions configures StartLab.
type LabOptions struct {
	StateDir    string // the simulator's state directory
	SchedulerID string
	Concurrency int
	Log         zerolog.Logger
	// SecretsKey is the scheduler's OIKOS_SECRETS_KEY: the stored secrets sealed under it
	// are redacted from execution output. Empty: the executor has no key.
	SecretsKey string
}

// StartLab starts the lab simulator serving the seeded inventory over SSH, and the
// scheduler's executor (with its SSH pool and notifier) running gated executions on it, wired
// as the scheduler daemon wires them; t's Cleanup stops them in reverse order.
func StartLab(ctx context.Context, t testing.TB, db *pgtest.DB, o LabOptions) (*labsim.Sim, error) {
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
	sim, err := labsim.New(fleet, labsim.Options{
		StateDir:       o.StateDir,
		Listen:         func(string) string { return "127.0.0.1:0" },
		AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()},
	})
	if err != nil {
		return nil, err
	}
	if err := sim.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(sim.Stop)
	pool := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: schedapp.NewHostKeys(db.Pool, o.Log),
		DialTimeout: 10 * time.Second, Logger: o.Log, Dial: sim.DialContext})
	t.Cleanup(pool.Close)
	connCfg, err := pgx.ParseConfig(db.URL)
	if err != nil {
		return nil, err
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: o.Log})
	var box *secretbox.Box
	if o.SecretsKey != "" {
		if box, err = secretbox.Parse(o.SecretsKey); err != nil {
			return nil, err
		}
	}
	ex := schedapp.NewExecutor(schedapp.ExecutorOptions{
		Pool: db.Pool, SSH: pool, Fleet: schedapp.NewFleet(db.Pool, schedapp.FleetOptions{Logger: o.Log}),
		Secrets:  schedapp.NewSecrets(db.Pool, box),
		Notifier: notifier, Logger: o.Log, SchedulerID: o.SchedulerID, Concurrency: o.Concurrency,
	})
	if err := notifier.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(notifier.Stop)
	if err := ex.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(ex.Stop)
	return sim, nil
}

// Agent is an agent started in-process through its composition root.
type Agent struct {
	URL    string // http://127.0.0.1:port
	Cancel context.CancelFunc
	Done   chan error // RunConfig's result
}

// LaunchAgent starts an agent configured by env (as its environment) and waits until it
// listens; the caller stops it (Cancel, then wait on Done).
func LaunchAgent(env map[string]string, log zerolog.Logger) (*Agent, error) {
	cfg, err := agentapp.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{Cancel: cancel, Done: make(chan error, 1)}
	ready := make(chan net.Addr, 1)
	go func() { a.Done <- agentapp.RunConfig(ctx, cfg, log, func(ad net.Addr) { ready <- ad }) }()
	select {
	case ad := <-ready:
		a.URL = "http://" + ad.String()
		return a, nil
	case err := <-a.Done:
		cancel()
		return nil, err
	case <-time.After(60 * time.Second):
		cancel()
		return nil, fmt.Errorf("the agent did not start listening")
	}
}

// Stop cancels the agent's context and waits up to grace for RunConfig to return.
func (a *Agent) Stop(grace time.Duration) {
	a.Cancel()
	select {
	case <-a.Done:
	case <-time.After(grace):
	}
}

// RunChecks runs the scheduler's check runner and incident engine, wired as the daemon wires
// them, over db's fleet as sim serves it (signer is a key sim authorizes), with every guest
// running and every check every second, until the test ends. Register sim.Stop with
// t.Cleanup before calling it, so the simulator outlives the runner.
func RunChecks(ctx context.Context, t testing.TB, db *pgtest.DB, sim *labsim.Sim, signer ssh.Signer, log zerolog.Logger) {
	t.Helper()
	for _, h := range sim.Snapshot().Hosts {
		for _, g := range h.Guests {
			if err := sim.SetGuestStatus(h.Name, g.VMID, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE check_defs SET interval_seconds = 1, timeout_seconds = 1`); err != nil {
		t.Fatal(err)
	}
	pool := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: remote.NewMemoryHostKeys(), DialTimeout: 5 * time.Second,
		Logger: log, Dial: sim.DialContext})
	t.Cleanup(pool.Close)
	engine, err := schedapp.NewIncidentEngine(schedapp.IncidentEngineOptions{Pool: db.Pool, Logger: log, Metrics: metrics.NewRegistry(),
		Every: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := schedapp.NewCheckRunner(schedapp.CheckRunnerOptions{Pool: db.Pool, SSH: pool,
		Fleet: schedapp.NewFleet(db.Pool, schedapp.FleetOptions{Logger: log}), Logger: log, Metrics: metrics.NewRegistry(),
		InitialSpread: 500 * time.Millisecond, OnFlush: engine.Flushed})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(engine.Stop)
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runner.Stop)
}
