package onboard_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

// standalone is fleet with every Proxmox host in no cluster: adding one brings only itself,
// as before clusters were discovered.
func standalone(f labsim.Fleet) labsim.Fleet {
	hosts := append([]labsim.Host(nil), f.Hosts...)
	for i := range hosts {
		hosts[i].Cluster = ""
	}
	f.Hosts = hosts
	return f
}

func (l *lab) fingerprint(host string) string {
	return remote.Fingerprint(l.sim.HostKey(host).Marshal())
}

// The demo's three nodes (olympus: atlas, boreas, ceres) are added once, through atlas: the
// other nodes' host keys are pinned on atlas's word, drift lists them, and one adopt brings
// the cluster, its nodes, the member-of edges and every guest.
func TestAddClusterOnce(t *testing.T) {
	fleet := demoFleet(t)
	l := startLab(t, fleet)
	ctx := context.Background()

	out := l.mustOikos(t, "", "add", "proxmox-host", "atlas", "--address", "127.0.10.1", "--port", "2222",
		"--fingerprint", l.fingerprint("atlas"))
	t.Logf("oikos add proxmox-host atlas:\n%s", out)
	for _, want := range []string{"proxmox-host:atlas is active", "member of the Proxmox cluster olympus (3 nodes, quorate)",
		"pinned on proxmox-host:atlas's word", "next: oikos drift adopt --all"} {
		if !strings.Contains(out, want) {
			t.Fatalf("oikos add lacks %q:\n%s", want, out)
		}
	}
	for _, n := range []struct{ node, addr, status string }{{"atlas", "127.0.10.1:2222", "(this host)"},
		{"boreas", "127.0.10.2:2222", "(vouched)"}, {"ceres", "127.0.10.3:2222", "(vouched)"}} {
		want := fmt.Sprintf("%s .* ssh-ed25519 %s %s", n.addr, regexp.QuoteMeta(l.fingerprint(n.node)), regexp.QuoteMeta(n.status))
		if !regexp.MustCompile(`(?m)^  ` + n.node + ` +` + strings.ReplaceAll(want, " ", " +") + `$`).MatchString(out) {
			t.Errorf("oikos add does not show %s's key as %q:\n%s", n.node, want, out)
		}
	}
	// Pinned with their provenance, without a connection to them and without a prompt.
	for _, n := range []struct{ node, addr string }{{"boreas", "127.0.10.2:2222"}, {"ceres", "127.0.10.3:2222"}} {
		var fp, by, source string
		if err := l.db.Pool.QueryRow(ctx, `SELECT fingerprint, vouched_by, vouched_source FROM ssh_host_keys WHERE address = $1`,
			n.addr).Scan(&fp, &by, &source); err != nil {
			t.Fatalf("%s's key: %v", n.node, err)
		}
		if fp != l.fingerprint(n.node) || by != "127.0.10.1:2222" || source != "/etc/pve/priv/known_hosts" {
			t.Errorf("%s pinned %s vouched by %s from %s", n.node, fp, by, source)
		}
		if c := l.sim.TotalConnections(n.node); c != 0 {
			t.Errorf("%d connections to %s before it was adopted", c, n.node)
		}
	}
	if n := l.count(t, `SELECT count(*) FROM events WHERE type = 'cluster.discovered'`); n != 1 {
		t.Errorf("%d cluster.discovered events, want 1", n)
	}
	if n := l.count(t, `SELECT count(*) FROM audit_log WHERE action = 'cluster.discovered'`); n != 1 {
		t.Errorf("%d cluster.discovered audit rows, want 1", n)
	}

	// Drift names the nodes the graph lacks.
	out = l.mustOikos(t, "", "drift")
	t.Logf("oikos drift:\n%s", out)
	for _, node := range []string{"boreas", "ceres"} {
		if !strings.Contains(out, node) || !strings.Contains(out, "not in the graph") {
			t.Errorf("oikos drift does not list %s as not in the graph:\n%s", node, out)
		}
	}

	// Bad input to adopt is a clear error and changes nothing.
	before := l.count(t, `SELECT count(*) FROM entities`)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"drift", "adopt", "99999"}, 1, "vmid 99999 is not among the guests"},
		{[]string{"drift", "adopt", "--all", "--host", "nonesuch"}, 1, "proxmox-host:nonesuch was not listed"},
		{[]string{"drift", "adopt", "--all", "101"}, 2, "usage: oikos drift adopt"},
		{[]string{"drift", "adopt", "x"}, 2, `"x" is not a vmid`},
	} {
		code, stdout, stderr := l.oikos(t, "", c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("oikos %s: exit %d, want %d and %q\n%s%s", strings.Join(c.args, " "), code, c.code, c.want, stdout, stderr)
		}
	}
	if after := l.count(t, `SELECT count(*) FROM entities`); after != before {
		t.Errorf("bad adopts created %d entities", after-before)
	}

	out = l.mustOikos(t, "", "drift", "adopt", "--all")
	t.Logf("oikos drift adopt --all:\n%s", out)
	total := 0
	for _, h := range []string{"atlas", "boreas", "ceres"} {
		total += len(simGuests(fleet, h))
	}
	for _, want := range []string{"cluster cluster:olympus: adopted", "node boreas           adopted as proxmox-host:boreas at 127.0.10.2:2222",
		"node ceres            adopted as proxmox-host:ceres at 127.0.10.3:2222", "node atlas            is proxmox-host:atlas",
		"3 member-of edge(s) made"} {
		if !strings.Contains(out, want) {
			t.Errorf("oikos drift adopt --all lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("adopted %d guest(s)", total)) {
		t.Errorf("one adopt --all did not adopt all %d guests:\n%s", total, out)
	}
	for _, h := range []string{"atlas", "boreas", "ceres"} {
		want := simGuests(fleet, h)
		if got := l.guestsOf(t, "proxmox-host:"+h); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("graph guests of %s:\n%s\nlabsim's:\n%s", h, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if n := l.count(t, `SELECT count(*) FROM relationships r JOIN entities c ON c.id = r.target_id
WHERE r.type = 'member-of' AND r.valid_to IS NULL AND c.slug = 'cluster:olympus'`); n != 3 {
		t.Errorf("%d member-of edges to cluster:olympus, want 3", n)
	}
	var attrs string
	if err := l.db.Pool.QueryRow(ctx, `SELECT state || ' ' || (attributes - 'gateways')::text FROM entities WHERE slug = 'proxmox-host:boreas'`).
		Scan(&attrs); err != nil {
		t.Fatal(err)
	}
	if attrs != `active {"node": "boreas", "user": "root", "hostname": "boreas", "lan_ipv4": "127.0.10.2", "ssh_port": 2222}` {
		t.Errorf("proxmox-host:boreas: %s", attrs)
	}
	if n := l.count(t, `SELECT count(*) FROM audit_log WHERE action = 'entity.create' AND entity_id IN
(SELECT id FROM entities WHERE slug IN ('cluster:olympus', 'proxmox-host:boreas', 'proxmox-host:ceres'))`); n != 3 {
		t.Errorf("%d audited creates of the cluster and its new nodes, want 3", n)
	}
	// The new nodes were reached with the vouched keys: no connection request, no prompt.
	if n := l.count(t, `SELECT count(*) FROM host_connects h JOIN entities e ON e.id = h.entity_id WHERE e.slug <> 'proxmox-host:atlas'`); n != 0 {
		t.Errorf("%d connection requests for the other nodes", n)
	}

	// Adopting again adopts nothing.
	if _, err := l.drift.RunNow(ctx); err != nil {
		t.Fatal(err)
	}
	entities, audits := l.count(t, `SELECT count(*) FROM entities`), l.count(t, `SELECT count(*) FROM audit_log`)
	if out := l.mustOikos(t, "", "drift", "adopt", "--all"); !strings.Contains(out, "nothing to adopt") {
		t.Fatalf("second adopt:\n%s", out)
	}
	if e, a := l.count(t, `SELECT count(*) FROM entities`), l.count(t, `SELECT count(*) FROM audit_log`); e != entities || a != audits {
		t.Fatalf("second adopt wrote: entities %d → %d, audit rows %d → %d", entities, e, audits, a)
	}

	// A key that later differs from the vouched one is refused as any pinned key is: boreas
	// now offers another key (labsim drops its connection, so the pool dials again). Drift
	// lists the cluster through its first member, so atlas is taken down for the listing to
	// go through boreas, which is refused, and on to ceres.
	if err := l.sim.SetHostFault("boreas", labsim.Fault{ChangedHostKey: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.sim.SetHostFault("atlas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	e2estack.Eventually(t, l.db.URL, 15*time.Second, 100*time.Millisecond, "the cluster listed through ceres, past the refused boreas", func() (bool, string) {
		rep, err := l.drift.RunNow(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range rep.Clusters {
			if c.Name == "cluster:olympus" {
				return c.Via == "proxmox-host:ceres", fmt.Sprintf("%+v", c)
			}
		}
		return false, "cluster:olympus not listed"
	})
	if n := l.count(t, `SELECT count(*) FROM signals WHERE kind = 'host_key_changed' AND status <> 'resolved'
AND dedup_key = 'host_key_changed:127.0.10.2:2222'`); n != 1 {
		t.Fatalf("%d open host_key_changed signals for boreas, want 1", n)
	}
	if n := l.count(t, `SELECT count(*) FROM ssh_host_keys WHERE address = '127.0.10.2:2222' AND fingerprint = $1`, l.fingerprint("boreas")); n != 1 {
		t.Fatal("boreas's vouched key was replaced")
	}
}

// A forged key for another node is refused: boreas's address already has a different key
// pinned (an impostor answered there first), so atlas's word does not replace it; the
// conflict is raised, and adopt leaves boreas out while ceres joins.
func TestClusterForgedKeyRefused(t *testing.T) {
	l := startLab(t, demoFleet(t))
	ctx := context.Background()
	if err := l.sim.SetHostFault("boreas", labsim.Fault{ChangedHostKey: true}); err != nil {
		t.Fatal(err)
	}
	// Trusting the impostor's key as some other machine pins it (the handshake passes, the
	// login does not).
	if code, _, errs := l.oikos(t, "", "add", "host", "impostor", "--address", "127.0.10.2", "--port", "2222", "--user", "admin", "--yes"); code != 1 ||
		!strings.Contains(errs, "refused the scheduler's key") {
		t.Fatalf("impostor: exit %d %s", code, errs)
	}
	var forged string
	if err := l.db.Pool.QueryRow(ctx, `SELECT fingerprint FROM ssh_host_keys WHERE address = '127.0.10.2:2222'`).Scan(&forged); err != nil ||
		forged == l.fingerprint("boreas") {
		t.Fatalf("the impostor's key %q (%v)", forged, err)
	}
	if err := l.sim.SetHostFault("boreas", labsim.Fault{}); err != nil {
		t.Fatal(err)
	}

	out := l.mustOikos(t, "", "add", "proxmox-host", "atlas", "--address", "127.0.10.1", "--port", "2222", "--fingerprint", l.fingerprint("atlas"))
	t.Logf("oikos add proxmox-host atlas:\n%s", out)
	flat := strings.Join(strings.Fields(out), " ")
	if !strings.Contains(flat, "REFUSED: 127.0.10.2:2222 already has the key "+forged+" pinned") ||
		!strings.Contains(flat, "127.0.10.3:2222 online not in the graph ssh-ed25519 "+l.fingerprint("ceres")+" (vouched)") {
		t.Fatalf("oikos add:\n%s", out)
	}
	if n := l.count(t, `SELECT count(*) FROM ssh_host_keys WHERE address = '127.0.10.2:2222' AND fingerprint = $1`, forged); n != 1 {
		t.Fatal("the pinned key was replaced")
	}
	if n := l.count(t, `SELECT count(*) FROM signals WHERE kind = 'host_key_changed' AND dedup_key = 'host_key_changed:127.0.10.2:2222'`); n != 1 {
		t.Fatalf("%d host_key_changed signals for boreas's address, want 1", n)
	}

	out = l.mustOikos(t, "", "drift", "adopt", "--all")
	t.Logf("oikos drift adopt --all:\n%s", out)
	if !strings.Contains(out, "node boreas           not adopted: its host key was refused") ||
		!strings.Contains(out, "adopted as proxmox-host:ceres") {
		t.Fatalf("oikos drift adopt --all:\n%s", out)
	}
	if n := l.count(t, `SELECT count(*) FROM entities WHERE slug = 'proxmox-host:boreas'`); n != 0 {
		t.Fatal("boreas was adopted with a refused key")
	}
	if n := l.sim.TotalConnections("boreas"); n > 1 {
		t.Errorf("%d connections to boreas; only the impostor's attempt may have reached it", n)
	}
}
