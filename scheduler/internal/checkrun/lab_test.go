package checkrun

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

// waitFor polls cond until it holds or the deadline passes; the last message explains a
// failure.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	msg := ""
	for {
		ok, m := cond()
		if ok {
			return
		}
		msg = m
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, msg)
		}
		<-tick.C
	}
}

type resultRow struct {
	slug, target, health, reason, class string
	summary                             map[string]any
}

func storedResults(t *testing.T, db *pgxpool.Pool) map[string]resultRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT cd.slug, e.slug, cr.health, cr.reason, cr.error_class, cr.summary
FROM check_results cr JOIN check_defs cd ON cd.id = cr.check_id JOIN entities e ON e.id = cr.target_id`)
	if err != nil {
		t.Fatalf("read results: %v", err)
	}
	defer rows.Close()
	out := map[string]resultRow{}
	for rows.Next() {
		var r resultRow
		if err := rows.Scan(&r.slug, &r.target, &r.health, &r.reason, &r.class, &r.summary); err != nil {
			t.Fatalf("scan: %v", err)
		}
		out[r.slug] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read results: %v", err)
	}
	return out
}

type statusRow struct {
	health, reason string
	lastCheck      *time.Time
}

func status(t *testing.T, db *pgxpool.Pool, slug string) statusRow {
	t.Helper()
	var s statusRow
	err := db.QueryRow(context.Background(), `SELECT es.health, es.reason, es.last_check_at FROM entity_status es
JOIN entities e ON e.id = es.entity_id WHERE e.slug = $1`, slug).Scan(&s.health, &s.reason, &s.lastCheck)
	if err != nil {
		return statusRow{health: "(none: " + err.Error() + ")"}
	}
	return s
}

func healthIs(t *testing.T, db *pgxpool.Pool, slug, want string) func() (bool, string) {
	return func() (bool, string) {
		s := status(t, db, slug)
		return s.health == want, fmt.Sprintf("%s is %s (%s)", slug, s.health, s.reason)
	}
}

func startRunner(t *testing.T, lab *labtest.Lab, mod func(*Options)) *Runner {
	t.Helper()
	opts := Options{
		Pool: lab.DB, SSH: lab.SSH, Fleet: lab.Fleet, Logger: zerolog.Nop(), Metrics: metrics.NewRegistry(),
		InitialSpread: 300 * time.Millisecond, FlushEvery: 100 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	r, err := NewRunner(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// tlsFront serves HTTPS for every *.lab.example name with a private CA and forwards to
// labsim's plain HTTP ingress, keeping the Host header: the seeded routes are https. It
// listens on port 443 of a loopback address (so the runner's own name map and transport are
// exercised); without the privilege to bind 443 it returns an HTTPClient that dials it.
func tlsFront(t *testing.T, lab *labtest.Lab) (ip string, roots *x509.CertPool, client *http.Client) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lab test CA"},
		DNSNames:  []string{"*.lab.example", "lab.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	backend, err := url.Parse("http://" + lab.Sim.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(backend)
		r.Out.Host = r.In.Host
	}}
	var ln net.Listener
	for i := 0; i < 20 && ln == nil; i++ {
		ip = fmt.Sprintf("127.66.%d.%d", mrand.IntN(250)+1, mrand.IntN(250)+1)
		ln, _ = net.Listen("tcp", net.JoinHostPort(ip, "443"))
	}
	if ln == nil {
		ip = ""
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		client = &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		}}
	}
	srv := &http.Server{Handler: proxy, TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		ReadHeaderTimeout: 5 * time.Second, ErrorLog: nil}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ip, roots, client
}

// tcpListener accepts and closes connections (what an NFS server's port does for a
// connect check).
func tcpListener(t *testing.T) (string, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	a := ln.Addr().(*net.TCPAddr)
	return a.IP.String(), a.Port
}

// The seeded fleet, healthy end to end, reports every check up: no false downs (the
// original left 49 checks stuck down on a healthy fleet), health on the targets only, a real
// cpu figure from the macOS workstation and the process check's unit reaching the probe.
func TestHealthyFleetReportsEveryCheckUp(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{})
	lab.StartAllGuests(t)
	tcpHost, tcpPort := tcpListener(t)
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool {
		if d.Kind == "tcp" {
			// No NFS server is simulated; the connect goes to a listener of the test.
			d.Config["host"], d.Config["port"] = tcpHost, tcpPort
		}
		return true
	})
	for _, d := range defs {
		if d.Kind == "backup-freshness" {
			path := d.Config["path"].(string)
			lab.Exec(t, d.Config["holder"].(string), fmt.Sprintf("mkdir -p %s && touch %s/latest.tar", path, path))
		}
	}
	frontIP, roots, client := tlsFront(t, lab)
	t.Logf("%d checks; https front on %q (empty: dialled through a test client)", len(defs), frontIP)
	names := map[string]string{}
	for _, d := range defs {
		if d.Kind == "http" {
			u, _ := url.Parse(d.Config["url"].(string))
			names[u.Hostname()] = frontIP
		}
	}
	reg := metrics.NewRegistry()
	r := startRunner(t, lab, func(o *Options) {
		o.NameMap, o.TLSConfig, o.HTTPClient, o.Metrics = names, &tls.Config{RootCAs: roots}, client, reg
		o.InitialSpread = 2 * time.Second
	})
	waitFor(t, 90*time.Second, "a result from every check", func() (bool, string) {
		got := storedResults(t, lab.DB)
		return len(got) == len(defs), fmt.Sprintf("%d of %d checks reported", len(got), len(defs))
	})

	got := storedResults(t, lab.DB)
	var bad []string
	targets := map[string]bool{}
	for _, d := range defs {
		targets[d.TargetSlug] = true
		res := got[d.Slug]
		if res.health != results.HealthUp {
			bad = append(bad, fmt.Sprintf("%s: %s [%s] %s", d.Slug, res.health, res.class, res.reason))
		}
		if res.target != d.TargetSlug {
			t.Errorf("%s landed on %s, want its target %s", d.Slug, res.target, d.TargetSlug)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d checks not up on a healthy fleet:\n%s", len(bad), len(defs), strings.Join(bad, "\n"))
	}
	waitFor(t, 10*time.Second, "every target up", func() (bool, string) {
		for slug := range targets {
			if s := status(t, lab.DB, slug); s.health != results.HealthUp || s.lastCheck == nil {
				return false, fmt.Sprintf("%s: %+v", slug, s)
			}
		}
		return true, ""
	})
	// Health never lands on a check's own entity (S3).
	var onChecks int
	if err := lab.DB.QueryRow(context.Background(), `SELECT count(*) FROM entity_status es JOIN entities e ON e.id = es.entity_id
WHERE e.type = 'check'`).Scan(&onChecks); err != nil || onChecks != 0 {
		t.Errorf("%d entity_status rows on check entities (%v)", onChecks, err)
	}
	var samplesOnChecks int
	if err := lab.DB.QueryRow(context.Background(), `SELECT count(*) FROM metric_samples m JOIN entities e ON e.id = m.target_id
WHERE e.type = 'check'`).Scan(&samplesOnChecks); err != nil || samplesOnChecks != 0 {
		t.Errorf("%d metric samples on check entities (%v)", samplesOnChecks, err)
	}

	// macOS: a real cpu figure (the original reported 0), through top -l.
	mac := got["check:workstation.studio.ssh-script.cpu"]
	if v, _ := mac.summary["cpu_pct"].(float64); v <= 0 || mac.summary["os"] != "darwin" {
		t.Errorf("studio cpu: %+v", mac)
	}
	var macSample float64
	if err := lab.DB.QueryRow(context.Background(), `SELECT max(value) FROM metric_samples WHERE target_id = $1 AND name = 'cpu_pct'`,
		lab.IDs["workstation:studio"]).Scan(&macSample); err != nil || macSample <= 0 {
		t.Errorf("studio cpu_pct sample %v (%v)", macSample, err)
	}
	// The process check ran with its unit as argument.
	proc := got["check:service.jellyfin.ssh-script.process"]
	if proc.summary["command"] != "systemctl is-active jellyfin.service" || proc.summary["state"] != "active" ||
		proc.summary["ran_on"] != "lxc:jellyfin" {
		t.Errorf("jellyfin process check: %+v", proc.summary)
	}
	// 21 ingress routes, 21 distinct checks, each on its own route.
	routes := map[string]bool{}
	for _, d := range defs {
		if strings.HasPrefix(d.TargetSlug, "ingress-route:") {
			routes[d.Slug] = true
		}
	}
	if len(routes) != 21 {
		t.Errorf("%d ingress route checks, want 21", len(routes))
	}
	st := r.Status()
	if st.SSHConnections > len(lab.Sim.Hosts()) || st.SSHConnections == 0 {
		t.Errorf("ssh connections %d for %d hosts", st.SSHConnections, len(lab.Sim.Hosts()))
	}
	for _, h := range lab.Sim.Hosts() {
		if n := lab.Sim.TotalConnections(h); n > 1 {
			t.Errorf("host %s saw %d SSH connections, want at most one", h, n)
		}
	}
	if st.RunsTotal < int64(len(defs)) || len(st.FailuresByReason) != 0 {
		t.Errorf("status: %+v", st)
	}
}

// smallInventory is a lab of two Proxmox hosts, a few guests, a service and a macOS
// workstation.
const smallInventory = `
entities:
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web}}
  - {type: lxc, name: orphan, attributes: {vmid: 103, host: atlas, hostname: orphan}}
  - {type: lxc, name: db, attributes: {vmid: 102, host: "proxmox-host:boreas", hostname: db}}
  - {type: vm, name: ha, attributes: {vmid: 200, host: atlas, qemu_guest_agent: true}}
  - {type: service, name: nginx, attributes: {unit: nginx.service}}
  - {type: workstation, name: studio, attributes: {lan_ipv4: 127.0.12.1, ssh_port: 2222, user: dana, os: darwin}}
relationships:
  - {type: runs-on, source: "service:nginx", target: "lxc:web"}
`

// fastChecks gives every check a 2 s interval and 2 s timeout (the http checks are dropped:
// the small lab has no routes).
func fastChecks(_ checks.Target, d *checks.Def) bool {
	d.Interval, d.Timeout = 2*time.Second, 2*time.Second
	return d.Kind != "http"
}

func eventsOf(t *testing.T, db *pgxpool.Pool, typ, slug string) []map[string]any {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT ev.payload FROM events ev JOIN entities e ON e.id = ev.entity_id
WHERE ev.type = $1 AND e.slug = $2 ORDER BY ev.id`, typ, slug)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var p map[string]any
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// A stopped LXC goes down within one interval, with the service on it, and comes back up
// after it is started; health.changed is appended on the transitions only.
func TestStoppedContainerGoesDownAndComesBack(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory)})
	lab.DeriveChecks(t, fastChecks)
	startRunner(t, lab, nil)
	waitFor(t, 30*time.Second, "lxc:web up", healthIs(t, lab.DB, "lxc:web", results.HealthUp))
	waitFor(t, 10*time.Second, "service:nginx up", healthIs(t, lab.DB, "service:nginx", results.HealthUp))
	upEvents := len(eventsOf(t, lab.DB, results.EventHealthChanged, "lxc:web"))

	stopped := time.Now()
	if err := lab.Sim.SetGuestStatus("atlas", 101, false); err != nil {
		t.Fatal(err)
	}
	// One interval (2 s) plus the run itself and a flush (100 ms), with slack for -race.
	waitFor(t, 6*time.Second, "lxc:web down", healthIs(t, lab.DB, "lxc:web", results.HealthDown))
	if took := time.Since(stopped); took > 2*time.Second+2*time.Second {
		t.Errorf("down after %s, want within one interval", took)
	}
	if s := status(t, lab.DB, "lxc:web"); !strings.Contains(s.reason, "101") || !strings.Contains(s.reason, "proxmox-host:atlas") {
		t.Errorf("reason %q does not name the container and its host", s.reason)
	}
	waitFor(t, 6*time.Second, "service:nginx down", healthIs(t, lab.DB, "service:nginx", results.HealthDown))

	if err := lab.Sim.SetGuestStatus("atlas", 101, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 6*time.Second, "lxc:web up again", healthIs(t, lab.DB, "lxc:web", results.HealthUp))
	ev := eventsOf(t, lab.DB, results.EventHealthChanged, "lxc:web")
	if len(ev) != upEvents+2 {
		t.Fatalf("health.changed events %v, want exactly two more (down, up)", ev)
	}
	if ev[len(ev)-2]["to"] != results.HealthDown || ev[len(ev)-1]["to"] != results.HealthUp || ev[len(ev)-1]["from"] != results.HealthDown {
		t.Errorf("transitions %v", ev[len(ev)-2:])
	}
}

// fakeClock is a settable clock for results and sweeps.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// An unreachable Proxmox host makes its guests unknown with the host named — not down —
// while the host itself is down; the runner never marks stale, so an unknown result keeps
// an entity stale once the sweep marked it (see sweep tests for the marking).
func TestUnreachableHostMakesGuestsUnknown(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory)})
	lab.DeriveChecks(t, fastChecks)
	clock := &fakeClock{t: time.Now()}
	startRunner(t, lab, func(o *Options) { o.Clock = clock })
	waitFor(t, 30*time.Second, "lxc:db up", healthIs(t, lab.DB, "lxc:db", results.HealthUp))

	if err := lab.Sim.SetHostFault("boreas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "lxc:db unknown, naming the unreachable host", func() (bool, string) {
		s := status(t, lab.DB, "lxc:db")
		return s.health == results.HealthUnknown && strings.Contains(s.reason, "Proxmox host proxmox-host:boreas unreachable"),
			s.health + ": " + s.reason
	})
	s := status(t, lab.DB, "lxc:db")
	waitFor(t, 10*time.Second, "proxmox-host:boreas down", healthIs(t, lab.DB, "proxmox-host:boreas", results.HealthDown))
	waitFor(t, 10*time.Second, "every check of lxc:db unknown", func() (bool, string) {
		for slug, r := range storedResults(t, lab.DB) {
			if r.target == "lxc:db" && (r.health != results.HealthUnknown || r.class != results.ClassUnreachable || !strings.Contains(r.reason, "proxmox-host:boreas")) {
				return false, fmt.Sprintf("%s: %s [%s] %s", slug, r.health, r.class, r.reason)
			}
		}
		return true, ""
	})
	if s.lastCheck == nil {
		t.Fatal("lxc:db has no last_check_at although it was observed before the fault")
	}
	// The unknown results did not count as observations.
	before := *s.lastCheck
	clock.Add(time.Minute)
	waitFor(t, 10*time.Second, "a further unknown result", func() (bool, string) {
		var at time.Time
		err := lab.DB.QueryRow(context.Background(), `SELECT max(at) FROM check_results WHERE target_id = $1`, lab.IDs["lxc:db"]).Scan(&at)
		return err == nil && at.After(before.Add(30*time.Second)), fmt.Sprintf("latest result at %v", at)
	})
	if s2 := status(t, lab.DB, "lxc:db"); s2.lastCheck == nil || !s2.lastCheck.Equal(before) {
		t.Errorf("last_check_at moved from %v to %v without an observation", before, s2.lastCheck)
	}

	// Mark stale as the sweep would; an unknown result must not overwrite it.
	if _, err := lab.DB.Exec(context.Background(), `UPDATE entity_status SET health = 'stale', reason = 'stale (test)' WHERE entity_id = $1`,
		lab.IDs["lxc:db"]); err != nil {
		t.Fatal(err)
	}
	marked := clock.Now()
	clock.Add(time.Minute)
	waitFor(t, 10*time.Second, "another unknown result after the stale mark", func() (bool, string) {
		var at time.Time
		err := lab.DB.QueryRow(context.Background(), `SELECT max(at) FROM check_results WHERE target_id = $1`, lab.IDs["lxc:db"]).Scan(&at)
		return err == nil && at.After(marked), fmt.Sprintf("latest result at %v", at)
	})
	if s3 := status(t, lab.DB, "lxc:db"); s3.health != results.HealthStale {
		t.Errorf("stale overwritten by %s (%s)", s3.health, s3.reason)
	}

	// The host comes back: observations resume.
	if err := lab.Sim.SetHostFault("boreas", labsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "lxc:db up again", healthIs(t, lab.DB, "lxc:db", results.HealthUp))
}

// A target the graph cannot resolve is reported as a configuration problem (S8): unknown
// with class resolution, never down, and counted by reason.
func TestResolutionFailureIsReportedAsSuch(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory)})
	lab.DeriveChecks(t, fastChecks)
	if _, err := lab.DB.Exec(context.Background(), `UPDATE entities SET attributes = attributes || '{"host": "nowhere"}'
WHERE slug = 'lxc:orphan'`); err != nil {
		t.Fatal(err)
	}
	reg := metrics.NewRegistry()
	r := startRunner(t, lab, func(o *Options) { o.Metrics = reg })
	// The ssh-script checks resolve the guest at run time and fail; the proxmox-guest check
	// carries its host from derivation (the api re-derives on every update) and still runs.
	waitFor(t, 30*time.Second, "lxc:orphan's results", func() (bool, string) {
		n := 0
		for _, res := range storedResults(t, lab.DB) {
			if res.target == "lxc:orphan" && res.slug != "check:lxc.orphan.proxmox-guest" {
				n++
				if res.health != results.HealthUnknown || res.class != results.ClassResolution || !strings.Contains(res.reason, "nowhere") {
					return false, fmt.Sprintf("%s: %s [%s] %s", res.slug, res.health, res.class, res.reason)
				}
			}
		}
		return n == 3, fmt.Sprintf("%d results", n)
	})
	if s := status(t, lab.DB, "lxc:orphan"); s.health != results.HealthUnknown {
		t.Errorf("lxc:orphan %s, want unknown", s.health)
	}
	if r.Status().FailuresByReason[results.ClassResolution] < 3 || reg.Value("oikos_scheduler_check_failures_total", "reason", results.ClassResolution) < 3 {
		t.Errorf("resolution failures not counted: %+v", r.Status().FailuresByReason)
	}
}

// A VM's checks run through qm guest exec and its JSON; a guest agent that stops answering
// makes the VM unknown (it is not down).
func TestVMThroughGuestAgent(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(smallInventory)})
	lab.DeriveChecks(t, fastChecks)
	startRunner(t, lab, nil)
	waitFor(t, 30*time.Second, "vm:ha up", healthIs(t, lab.DB, "vm:ha", results.HealthUp))
	if err := lab.Sim.SetGuestFault("atlas", 200, labsim.Fault{GuestAgentDown: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "vm:ha unknown", healthIs(t, lab.DB, "vm:ha", results.HealthUnknown))
	// The VM still runs: its proxmox-guest check (which asks the host, not the agent) stays up.
	// Its first result may land after the in-guest checks' results, so wait for it.
	waitFor(t, 10*time.Second, "proxmox-guest up", func() (bool, string) {
		got := storedResults(t, lab.DB)["check:vm.ha.proxmox-guest"]
		return got.health == results.HealthUp, "proxmox-guest says " + got.health
	})
}

const backupInventory = `
entities:
  - {type: workstation, name: studio, attributes: {lan_ipv4: 127.0.12.1, ssh_port: 2222, user: dana, os: darwin}}
  - {type: backup-target, name: photos, attributes: {path: /Users/dana/Backups/immich, max_age_minutes: 60}}
  - {type: backup-target, name: lost, attributes: {path: /Users/dana/Backups/gone, max_age_minutes: 60}}
relationships:
  - {type: backs-up-to, source: "workstation:studio", target: "backup-target:photos"}
  - {type: backs-up-to, source: "workstation:studio", target: "backup-target:lost"}
`

// Backup freshness runs find -mmin on the macOS machine holding the backup (found by walking
// backs-up-to backwards): fresh is up, old is down, a missing path is down and says so.
func TestBackupFreshnessOnMacOS(t *testing.T) {
	t.Parallel()
	simClock := &fakeClock{t: time.Now()}
	lab := labtest.New(t, labtest.Options{Inventory: []byte(backupInventory), Clock: simClock.Now})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool {
		d.Interval, d.Timeout = 2*time.Second, 2*time.Second
		return d.Kind == "backup-freshness"
	})
	if len(defs) != 2 || defs[0].Config["holder"] != "workstation:studio" || defs[0].Config["os"] != "darwin" {
		t.Fatalf("derived %+v", defs)
	}
	lab.Exec(t, "workstation:studio", "mkdir -p /Users/dana/Backups/immich/2026 && touch /Users/dana/Backups/immich/2026/library.tar")
	startRunner(t, lab, nil)
	waitFor(t, 20*time.Second, "photos fresh", healthIs(t, lab.DB, "backup-target:photos", results.HealthUp))
	waitFor(t, 20*time.Second, "lost down", func() (bool, string) {
		s := status(t, lab.DB, "backup-target:lost")
		return s.health == results.HealthDown && strings.Contains(s.reason, "does not exist on workstation:studio"), s.health + ": " + s.reason
	})
	if got := storedResults(t, lab.DB)["check:backup-target.photos.backup-freshness"]; got.summary["fresh_file"] != "/Users/dana/Backups/immich/2026/library.tar" {
		t.Errorf("summary %v", got.summary)
	}
	simClock.Add(2 * time.Hour) // the backup is now two hours old
	waitFor(t, 20*time.Second, "photos stale backup down", func() (bool, string) {
		s := status(t, lab.DB, "backup-target:photos")
		return s.health == results.HealthDown && strings.Contains(s.reason, "last 60 minutes"), s.health + ": " + s.reason
	})
}
