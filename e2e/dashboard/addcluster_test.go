package dashboard_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
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
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// TestBrowserAddCluster runs e2e/browser/add-cluster (the entities page's add form, issue 30)
// against a stack of its own: an api with no fleet, the lab serving the demo's cluster
// (olympus: atlas, boreas, ceres), and the scheduler's onboarding parts (the SSH pool behind
// the key gate, the connection service, drift), as scheduler/app wires them. The node test
// adds atlas through the form, compares the fingerprint, confirms it, sees the cluster's
// nodes with the keys pinned on atlas's word, and adopts everything.
func TestBrowserAddCluster(t *testing.T) {
	requireBuilt(t)
	ctx := context.Background()
	s := &stack{log: zerolog.Nop(), db: pgtest.New(t)}
	if os.Getenv("OIKOS_E2E_DASH_LOG") != "" {
		s.log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	s.apiCfg = apiapp.Config{DatabaseURL: s.db.URL, SeedOnStart: true, Demo: false}
	if err := s.startAPI(t, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.client = &e2estack.Client{URL: s.apiURL, HTTP: httpClient}
	if err := e2estack.MintTokens(ctx, s.api,
		e2estack.Token{Name: operatorName, Role: "operator", Into: &s.operator},
		e2estack.Token{Name: readonlyName, Role: "readonly", Into: &s.readonly},
	); err != nil {
		t.Fatal(err)
	}

	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	fleet, err := labsim.FleetFromInventory(seeds.Inventory())
	if err != nil {
		t.Fatal(err)
	}
	sim, err := labsim.New(fleet, labsim.Options{StateDir: t.TempDir(), Listen: func(string) string { return "127.0.0.1:0" },
		AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}, Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	s.sim = sim

	const id = "e2e-dash-add"
	if err := schedapp.PublishKey(ctx, s.db.Pool, signer, id); err != nil {
		t.Fatal(err)
	}
	gate := schedapp.NewKeyGate(schedapp.NewHostKeys(s.db.Pool, s.log), s.db.Pool)
	pool := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: gate, DialTimeout: 5 * time.Second, Logger: s.log,
		Dial: sim.DialContext})
	t.Cleanup(pool.Close)
	connCfg, err := pgx.ParseConfig(s.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: s.log})
	drift, err := schedapp.NewDrift(schedapp.DriftOptions{Pool: s.db.Pool, SSH: pool, Fleet: schedapp.NewFleet(s.db.Pool,
		schedapp.FleetOptions{Logger: s.log}), Notifier: notifier, Logger: s.log, Metrics: metrics.NewRegistry(), SchedulerID: id})
	if err != nil {
		t.Fatal(err)
	}
	connects, err := schedapp.NewOnboard(schedapp.OnboardOptions{Pool: s.db.Pool, SSH: pool, Gate: gate, Notifier: notifier,
		Logger: s.log, Timeout: 10 * time.Second, SchedulerID: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Stop)
	for _, part := range []interface {
		Start(context.Context) error
		Stop()
	}{drift, connects} {
		if err := part.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(part.Stop)
	}
	c, err := startControl(t, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.logTo(t)()

	fp := func(host string) string { return remote.Fingerprint(sim.HostKey(host).Marshal()) }
	env := map[string]string{
		"DASH_BASE_URL":       s.currentURL(),
		"DASH_CONTROL_URL":    c.url,
		"DASH_OPERATOR_TOKEN": s.operator,
		"DASH_READONLY_TOKEN": s.readonly,
		"DASH_OPERATOR_NAME":  operatorName,
		"DASH_ARTIFACTS":      screenshotDir(t),
		"DASH_CHROMIUM":       chromium,
		"DASH_FP_ATLAS":       fp("atlas"),
		"DASH_FP_BOREAS":      fp("boreas"),
		"DASH_FP_CERES":       fp("ceres"),
	}
	t.Logf("dashboard at %s; screenshots go to %s", env["DASH_BASE_URL"], env["DASH_ARTIFACTS"])
	runNode(t, 3*time.Minute, env, "--test", "--test-reporter=spec", "add-cluster/")
}
