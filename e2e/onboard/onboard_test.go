// Package onboard_test walks the path from an empty install to a monitored Proxmox host as a
// new user types it, with the real `oikos` CLI against the api and the scheduler's real
// parts (SSH pool behind the onboarding key gate, the connection service, drift discovery),
// and the lab simulator serving a fleet the graph does not know.
package onboard_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
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

var cliPath string

func TestMain(m *testing.M) {
	// The CLI a user runs, built once.
	dir, err := os.MkdirTemp("", "oikos-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cliPath = filepath.Join(dir, "oikos")
	build := exec.Command("go", "build", "-o", cliPath, "github.com/oikos-hq/oikos/api/cmd/oikos")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the oikos CLI:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	e2estack.Main(m)
}

// lab is one install: an api with no fleet, a scheduler's parts, and labsim.
type lab struct {
	db       *pgtest.DB
	apiURL   string
	operator string
	sim      *labsim.Sim
	pool     *remote.Pool // the first scheduler's
	drift    *schedapp.Drift
	scheds   []*scheduler
	signer   ssh.Signer // the schedulers' key, which labsim's machines trust
}

func startLab(t *testing.T, fleet labsim.Fleet) *lab {
	t.Helper()
	ctx := context.Background()
	log := zerolog.Nop()
	l := &lab{db: pgtest.New(t)}
	// Seeds on start (ontology, knowledge base) and no fleet: what compose does.
	api, apiURL, err := e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: l.db.URL, SeedOnStart: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	l.apiURL = apiURL
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "alice", Role: "operator", Into: &l.operator}); err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	if l.sim, err = labsim.New(fleet, labsim.Options{StateDir: t.TempDir(), Listen: func(string) string { return "127.0.0.1:0" },
		AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if err := l.sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.sim.Stop)

	// The scheduler, wired as its composition root wires it.
	l.signer = signer
	l.scheds = append(l.scheds, l.startScheduler(t, "test-scheduler"))
	l.pool, l.drift = l.scheds[0].pool, l.scheds[0].drift
	return l
}

// scheduler is one scheduler's parts: its lease manager, SSH pool, drift and connections.
type scheduler struct {
	id     string
	leases *schedapp.Leases
	pool   *remote.Pool
	drift  *schedapp.Drift
}

// startScheduler wires a scheduler's onboarding parts as scheduler/app does, leases included.
func (l *lab) startScheduler(t *testing.T, id string) *scheduler {
	t.Helper()
	ctx := context.Background()
	log := zerolog.Nop()
	sc := &scheduler{id: id}
	signer := l.signer
	if err := schedapp.PublishKey(ctx, l.db.Pool, signer, id); err != nil {
		t.Fatal(err)
	}
	gate := schedapp.NewKeyGate(schedapp.NewHostKeys(l.db.Pool, log), l.db.Pool)
	sc.pool = remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: gate, DialTimeout: 5 * time.Second, Logger: log,
		Dial: l.sim.DialContext})
	t.Cleanup(sc.pool.Close)
	connCfg, err := pgx.ParseConfig(l.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: log})
	fleetGraph := schedapp.NewFleet(l.db.Pool, schedapp.FleetOptions{Logger: log})
	var connects *schedapp.Onboard
	if sc.leases, err = schedapp.NewLeases(schedapp.LeasesOptions{Pool: l.db.Pool, ID: id, Logger: log,
		OnChange: func(c schedapp.LeaseChange) {
			if connects != nil && len(c.Acquired) > 0 {
				connects.Wake()
			}
		}}); err != nil {
		t.Fatal(err)
	}
	if sc.drift, err = schedapp.NewDrift(schedapp.DriftOptions{Pool: l.db.Pool, SSH: sc.pool, Fleet: fleetGraph, Notifier: notifier,
		Logger: log, Metrics: metrics.NewRegistry(), SchedulerID: id, Lease: sc.leases.Lease}); err != nil {
		t.Fatal(err)
	}
	if connects, err = schedapp.NewOnboard(schedapp.OnboardOptions{Pool: l.db.Pool, SSH: sc.pool, Gate: gate, Notifier: notifier,
		Logger: log, Timeout: 10 * time.Second, SchedulerID: id, Owned: sc.leases.Owned, OnRequest: sc.leases.Wake}); err != nil {
		t.Fatal(err)
	}
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Stop)
	for _, part := range []interface {
		Start(context.Context) error
		Stop()
	}{sc.leases, sc.drift, connects} {
		if err := part.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(part.Stop)
	}
	return sc
}

// oikos runs the CLI with stdin and returns its exit code, stdout and stderr.
func (l *lab) oikos(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(cliPath, args...)
	cmd.Env = append(os.Environ(), "OIKOS_API_URL="+l.apiURL, "OIKOS_TOKEN="+l.operator, "OIKOS_DATABASE_URL="+l.db.URL)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("oikos %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

func (l *lab) mustOikos(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, out, errs := l.oikos(t, stdin, args...)
	if code != 0 {
		t.Fatalf("oikos %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func (l *lab) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := l.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// guestsOf lists "kind vmid name" for every guest the graph says host runs (hosts edge).
func (l *lab) guestsOf(t *testing.T, host string) []string {
	t.Helper()
	rows, err := l.db.Pool.Query(context.Background(), `
SELECT g.type, (g.attributes->>'vmid')::int, g.name, g.attributes->>'host'
FROM relationships r JOIN entities h ON h.id = r.source_id JOIN entities g ON g.id = r.target_id
WHERE r.type = 'hosts' AND r.valid_to IS NULL AND h.slug = $1`, host)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var typ, name, hostAttr string
	var vmid int
	if _, err := pgx.ForEachRow(rows, []any{&typ, &vmid, &name, &hostAttr}, func() error {
		out = append(out, fmt.Sprintf("%s %d %s host=%s", typ, vmid, name, hostAttr))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// simGuests is the same list from labsim's own inventory.
func simGuests(fleet labsim.Fleet, host string) []string {
	var out []string
	for _, h := range fleet.Hosts {
		if h.Name != host {
			continue
		}
		for _, g := range h.Guests {
			name := g.Hostname
			if name == "" {
				name = g.Name
			}
			out = append(out, fmt.Sprintf("%s %d %s host=%s", g.Kind, g.VMID, name, host))
		}
	}
	sort.Strings(out)
	return out
}

func demoFleet(t *testing.T) labsim.Fleet {
	t.Helper()
	f, err := labsim.FleetFromInventory(seeds.Inventory())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// From an empty install to atlas's guests in the graph, as the README tells a new user.
func TestAddProxmoxHostDiscoverAndAdopt(t *testing.T) {
	// A standalone node behaves as before clusters: the cluster path is TestAddClusterOnce.
	fleet := standalone(demoFleet(t))
	l := startLab(t, fleet)
	if n := l.count(t, `SELECT count(*) FROM entities WHERE type NOT IN ('document', 'investigation', 'runbook')`); n != 0 {
		t.Fatalf("an install without OIKOS_DEMO has %d fleet entities, want 0", n)
	}

	// 1. The key the fleet must trust.
	out := l.mustOikos(t, "", "ssh-key")
	if !strings.Contains(out, "ssh-ed25519 ") || !strings.Contains(out, "authorized_keys") || !strings.Contains(out, "from=") {
		t.Fatalf("oikos ssh-key:\n%s", out)
	}

	// 2. Add atlas; the CLI shows the key labsim's atlas offers and the operator says yes.
	want := remote.Fingerprint(l.sim.HostKey("atlas").Marshal())
	out = l.mustOikos(t, "y\n", "add", "proxmox-host", "atlas", "--address", "127.0.10.1", "--port", "2222")
	t.Logf("oikos add proxmox-host atlas:\n%s", out)
	if !strings.Contains(out, want) {
		t.Fatalf("the prompt does not show atlas's fingerprint %s:\n%s", want, out)
	}
	if !strings.Contains(out, "proxmox-host:atlas is active") || !strings.Contains(out, "pve 8.3.0") {
		t.Fatalf("oikos add:\n%s", out)
	}
	var pinned string
	if err := l.db.Pool.QueryRow(context.Background(), `SELECT fingerprint FROM ssh_host_keys WHERE address = '127.0.10.1:2222'`).
		Scan(&pinned); err != nil || pinned != want {
		t.Fatalf("pinned %q (%v), want %s", pinned, err, want)
	}
	wantGuests := simGuests(fleet, "atlas")
	if !strings.Contains(out, fmt.Sprintf("it runs %d guest(s) the graph does not know", len(wantGuests))) {
		t.Fatalf("oikos add does not list atlas's %d guests:\n%s", len(wantGuests), out)
	}

	// 3. Adopt them all.
	out = l.mustOikos(t, "", "drift", "adopt", "--all")
	t.Logf("oikos drift adopt --all:\n%s", out)
	if !strings.Contains(out, fmt.Sprintf("adopted %d guest(s)", len(wantGuests))) {
		t.Fatalf("oikos drift adopt --all:\n%s", out)
	}
	if got := l.guestsOf(t, "proxmox-host:atlas"); strings.Join(got, "\n") != strings.Join(wantGuests, "\n") {
		t.Fatalf("graph guests of atlas:\n%s\nlabsim's:\n%s", strings.Join(got, "\n"), strings.Join(wantGuests, "\n"))
	}
	// Adopted from pct config: what the host says, not a guess.
	var cores, mem int
	var ostype string
	if err := l.db.Pool.QueryRow(context.Background(), `SELECT (attributes->>'cores')::int, (attributes->>'memory_mb')::int,
attributes->>'ostype' FROM entities WHERE slug = 'lxc:jellyfin'`).Scan(&cores, &mem, &ostype); err != nil {
		t.Fatal(err)
	}
	if cores != 4 || mem != 4096 || ostype != "debian" {
		t.Errorf("lxc:jellyfin cores %d memory %d ostype %q, want 4, 4096, debian (its pct config)", cores, mem, ostype)
	}
	if n := l.count(t, `SELECT count(*) FROM audit_log WHERE action = 'entity.create' AND entity_id IN
(SELECT id FROM entities WHERE type IN ('lxc', 'vm'))`); n != len(wantGuests) {
		t.Errorf("%d audited guest creates, want %d", n, len(wantGuests))
	}

	// A second adopt changes nothing.
	entities, audits := l.count(t, `SELECT count(*) FROM entities`), l.count(t, `SELECT count(*) FROM audit_log`)
	if _, err := l.drift.RunNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	out = l.mustOikos(t, "", "drift", "adopt", "--all")
	if !strings.Contains(out, "nothing to adopt") {
		t.Fatalf("second adopt:\n%s", out)
	}
	if e, a := l.count(t, `SELECT count(*) FROM entities`), l.count(t, `SELECT count(*) FROM audit_log`); e != entities || a != audits {
		t.Fatalf("second adopt wrote: entities %d → %d, audit rows %d → %d", entities, e, audits, a)
	}

	// The fleet as a file: export, then seed a fresh database from it.
	yaml := l.mustOikos(t, "", "export")
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := l.mustOikos(t, "", "seed", "--inventory", file); !strings.Contains(out, "created 0, updated 0") {
		t.Fatalf("seeding the export on the same database wrote something:\n%s", out)
	}
	fresh := &lab{db: pgtest.New(t), apiURL: l.apiURL, operator: l.operator}
	fresh.mustOikos(t, "", "seed", "--inventory", file)
	if got := fresh.guestsOf(t, "proxmox-host:atlas"); strings.Join(got, "\n") != strings.Join(wantGuests, "\n") {
		t.Fatalf("a fresh database seeded from the export has atlas's guests:\n%s", strings.Join(got, "\n"))
	}
	fleetRows := `SELECT string_agg(slug || ' ' || state || ' ' || attributes::text, E'\n' ORDER BY slug) FROM entities
WHERE type NOT IN ('document', 'investigation', 'runbook')`
	var a, b string
	if err := l.db.Pool.QueryRow(context.Background(), fleetRows).Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := fresh.db.Pool.QueryRow(context.Background(), fleetRows).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("export → seed on a fresh database differs:\n%s\n---\n%s", a, b)
	}

	// A changed host key on re-connect is refused and raises a signal (labsim drops the
	// connection, so the pool dials again).
	if err := l.sim.SetHostFault("atlas", labsim.Fault{ChangedHostKey: true}); err != nil {
		t.Fatal(err)
	}
	e2estack.Eventually(t, l.db.URL, 15*time.Second, 100*time.Millisecond, "atlas refused for its changed key", func() (bool, string) {
		rep, err := l.drift.RunNow(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, h := range rep.Hosts {
			if h.Host == "proxmox-host:atlas" {
				return !h.Reachable && strings.Contains(h.Error, "host key"), fmt.Sprintf("%+v", h)
			}
		}
		return false, "atlas not listed"
	})
	if n := l.count(t, `SELECT count(*) FROM signals WHERE kind = 'host_key_changed' AND status <> 'resolved'`); n != 1 {
		t.Fatalf("%d open host_key_changed signals, want 1", n)
	}
}

// A machine that cannot be onboarded is a clear error, and stays planned saying why.
func TestAddHostErrors(t *testing.T) {
	l := startLab(t, demoFleet(t))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unreachable", []string{"add", "proxmox-host", "ghost", "--address", "127.0.99.9", "--port", "2222", "--yes"},
			"cannot reach 127.0.99.9:2222"},
		{"wrong user", []string{"add", "proxmox-host", "boreas", "--address", "127.0.10.2", "--port", "2222", "--user", "admin", "--yes"},
			"refused the scheduler's key as admin"},
		{"not proxmox", []string{"add", "proxmox-host", "hermes", "--address", "127.0.11.1", "--port", "2222", "--yes"},
			"is not a Proxmox VE host: `pveversion` is not installed"},
		{"wrong fingerprint", []string{"add", "proxmox-host", "ceres", "--address", "127.0.10.3", "--port", "2222",
			"--fingerprint", "SHA256:" + strings.Repeat("A", 43)}, "does not match the fingerprint given"},
		// boreas's key was pinned by the wrong-user attempt (the handshake passed, the login
		// did not): a fingerprint that is not the pinned one is refused before any dial.
		{"fingerprint not the pinned key", []string{"add", "host", "boreas-again", "--address", "127.0.10.2", "--port", "2222",
			"--fingerprint", "SHA256:" + strings.Repeat("B", 43)}, "already has the key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := l.oikos(t, "", c.args...)
			if code != 1 || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, want 1 and %q\nstdout: %s\nstderr: %s", code, c.want, out, errs)
			}
			slug := c.args[1] + ":" + c.args[2]
			var state, reason string
			if err := l.db.Pool.QueryRow(context.Background(), `SELECT e.state, coalesce(s.reason, '') FROM entities e
LEFT JOIN entity_status s ON s.entity_id = e.id WHERE e.slug = $1`, slug).Scan(&state, &reason); err != nil {
				t.Fatal(err)
			}
			if state != "planned" || !strings.Contains(reason, c.want) {
				t.Fatalf("%s is %s with reason %q; want planned, saying %q", slug, state, reason, c.want)
			}
		})
	}
	if n := l.count(t, `SELECT count(*) FROM ssh_host_keys`); n != 2 {
		// boreas and hermes were trusted by --yes and pinned; the unreachable host offered
		// nothing and ceres's key did not match the fingerprint, so neither was pinned.
		t.Errorf("%d pinned host keys, want 2 (boreas, hermes)", n)
	}
	// Declining the prompt trusts nothing.
	code, out, _ := l.oikos(t, "n\n", "add", "proxmox-host", "atlas", "--address", "127.0.10.1", "--port", "2222")
	if code != 1 || !strings.Contains(out, "not trusted; nothing was pinned") || !strings.Contains(out, "--fingerprint SHA256:") {
		t.Fatalf("declined: exit %d\n%s", code, out)
	}
	if n := l.count(t, `SELECT count(*) FROM ssh_host_keys WHERE address = '127.0.10.1:2222'`); n != 0 {
		t.Fatal("a declined key was pinned")
	}
	// Nothing else trusts it either: a dial of atlas by any other path (a guest's check, an
	// execution) while atlas waits for the operator is refused, and pins nothing.
	_, err := l.pool.Exec(context.Background(), remote.MachineTarget("lxc:on-atlas", "127.0.10.1:2222", "root", "linux"), "true", nil)
	if err == nil || !strings.Contains(err.Error(), "is being added to the fleet") {
		t.Fatalf("a dial of atlas outside onboarding: %v", err)
	}
	if n := l.count(t, `SELECT count(*) FROM ssh_host_keys WHERE address = '127.0.10.1:2222'`); n != 0 {
		t.Fatal("a dial outside onboarding pinned atlas's key")
	}
	// Bad input changes nothing.
	before := l.count(t, `SELECT count(*) FROM entities`)
	for _, args := range [][]string{
		{"add", "proxmox-host", "x", "--address", "pve.lan"},
		{"add", "service", "x", "--address", "127.0.10.1"},
		{"add", "host", "x", "--address", "127.0.10.1", "--port", "70000"},
		{"add", "host", "x", "--address", "127.0.10.1", "--fingerprint", "MD5:aa"},
	} {
		if code, _, errs := l.oikos(t, "", args...); code == 0 || !strings.Contains(errs, "(field ") {
			t.Errorf("oikos %s: exit %d, %s", strings.Join(args, " "), code, errs)
		}
	}
	if after := l.count(t, `SELECT count(*) FROM entities`); after != before {
		t.Errorf("bad input created %d entities", after-before)
	}
}

// The benchmark of docs/benchmarks.md: a Proxmox host with 100 guests, from `oikos add` to
// adopted guests, over one SSH connection.
func TestOnboardHundredGuests(t *testing.T) {
	host := labsim.Host{Name: "big", Kind: labsim.KindProxmox, Addr: "127.0.10.9:22", User: "root"}
	for i := range 100 {
		g := labsim.Guest{VMID: 1000 + i, Kind: labsim.GuestLXC, Name: fmt.Sprintf("ct%03d", i), Status: labsim.StatusRunning,
			Cores: 2, MemoryMB: 1024, DiskGB: 8, OSType: "debian", OnBoot: true}
		if i%5 == 0 {
			g.Kind, g.OSType, g.GuestAgent = labsim.GuestVM, "l26", true
		}
		host.Guests = append(host.Guests, g)
	}
	l := startLab(t, labsim.Fleet{Hosts: []labsim.Host{host}})
	fp := remote.Fingerprint(l.sim.HostKey("big").Marshal())
	start := time.Now()
	l.mustOikos(t, "", "add", "proxmox-host", "big", "--address", "127.0.10.9", "--fingerprint", fp)
	added := time.Since(start)
	out := l.mustOikos(t, "", "drift", "adopt", "--all")
	total := time.Since(start)
	if !strings.Contains(out, "adopted 100 guest(s)") {
		t.Fatalf("oikos drift adopt --all:\n%s", out)
	}
	if n := l.count(t, `SELECT count(*) FROM relationships r JOIN entities h ON h.id = r.source_id
WHERE r.type = 'hosts' AND h.slug = 'proxmox-host:big'`); n != 100 {
		t.Fatalf("%d hosts edges, want 100", n)
	}
	if n := l.sim.TotalConnections("big"); n != 1 {
		t.Errorf("%d SSH connections to the host, want 1", n)
	}
	t.Logf("100 guests: oikos add (connect, facts, discovery with 100 pct/qm config) %s; + adopt %s; %d SSH connection(s)",
		added.Round(time.Millisecond), total.Round(time.Millisecond), l.sim.TotalConnections("big"))
}

// With two schedulers, a machine being added is dialled only by the holder of its lease, and
// drift lists each Proxmox host through its holder: one SSH connection per host across both.
func TestOnboardThroughTheLeaseHolders(t *testing.T) {
	fleet := standalone(demoFleet(t))
	l := startLab(t, fleet)
	atlas, boreas := schedapp.HostUnit("proxmox-host:atlas"), schedapp.HostUnit("proxmox-host:boreas")
	// Names under which the two hosts land on different schedulers, so the test sees both.
	second := ""
	for i := range 100 {
		id := fmt.Sprintf("test-scheduler-%d", i)
		members := []string{"test-scheduler", id}
		if a, b := schedapp.LeaseOwner(atlas, members), schedapp.LeaseOwner(boreas, members); a != b {
			second = id
			break
		}
	}
	l.scheds = append(l.scheds, l.startScheduler(t, second))
	deadline := time.Now().Add(30 * time.Second)
	for len(l.scheds[0].leases.Members()) < 2 || len(l.scheds[1].leases.Members()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the schedulers do not see each other: %v, %v", l.scheds[0].leases.Members(), l.scheds[1].leases.Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	members := []string{"test-scheduler", second}

	for _, h := range []struct{ name, addr, unit string }{{"atlas", "127.0.10.1", atlas}, {"boreas", "127.0.10.2", boreas}} {
		fp := remote.Fingerprint(l.sim.HostKey(h.name).Marshal())
		out := l.mustOikos(t, "", "add", "proxmox-host", h.name, "--address", h.addr, "--port", "2222", "--fingerprint", fp)
		if !strings.Contains(out, "proxmox-host:"+h.name+" is active") {
			t.Fatalf("oikos add %s:\n%s", h.name, out)
		}
		var by string
		if err := l.db.Pool.QueryRow(context.Background(), `SELECT claimed_by FROM host_connects WHERE address = $1`, h.addr+":2222").
			Scan(&by); err != nil {
			t.Fatal(err)
		}
		if want := schedapp.LeaseOwner(h.unit, members); by != want {
			t.Errorf("%s was connected by %s, want its lease holder %s", h.name, by, want)
		}
	}
	out := l.mustOikos(t, "", "drift", "adopt", "--all")
	want := len(simGuests(fleet, "atlas")) + len(simGuests(fleet, "boreas"))
	if !strings.Contains(out, fmt.Sprintf("adopted %d guest(s)", want)) {
		t.Fatalf("oikos drift adopt --all:\n%s", out)
	}
	rows, err := l.db.Pool.Query(context.Background(), `SELECT DISTINCT host_slug, scheduler_id FROM drift_listings`)
	if err != nil {
		t.Fatal(err)
	}
	var host, by string
	listed := 0
	if _, err := pgx.ForEachRow(rows, []any{&host, &by}, func() error {
		listed++
		if want := schedapp.LeaseOwner(schedapp.HostUnit(host), members); by != want {
			t.Errorf("%s was listed by %s, want its lease holder %s", host, by, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if listed != 2 {
		t.Errorf("%d (host, lister) pairs, want 2", listed)
	}
	for _, h := range []string{"atlas", "boreas"} {
		if n := l.sim.TotalConnections(h); n != 1 {
			t.Errorf("%d SSH connections to %s across the two schedulers, want 1", n, h)
		}
	}
}
