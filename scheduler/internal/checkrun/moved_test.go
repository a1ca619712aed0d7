package checkrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/scheduler/internal/probeparse"
	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/remote"
)

// clusterInventory is a three-node cluster; web (with nginx on it) and the VM hass live on
// atlas, db on boreas.
const clusterInventory = `
entities:
  - {type: cluster, name: olympus}
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: proxmox-host, name: ceres, attributes: {lan_ipv4: 127.0.10.3, ssh_port: 2222, user: root, node: ceres, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web}}
  - {type: vm, name: hass, attributes: {vmid: 150, host: atlas, hostname: hass, qemu_guest_agent: true}}
  - {type: lxc, name: db, attributes: {vmid: 201, host: boreas, hostname: db}}
  - {type: service, name: nginx, attributes: {unit: nginx.service}}
relationships:
  - {type: member-of, source: "proxmox-host:atlas", target: "cluster:olympus"}
  - {type: member-of, source: "proxmox-host:boreas", target: "cluster:olympus"}
  - {type: member-of, source: "proxmox-host:ceres", target: "cluster:olympus"}
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:web"}
  - {type: hosts, source: "proxmox-host:atlas", target: "vm:hass"}
  - {type: hosts, source: "proxmox-host:boreas", target: "lxc:db"}
  - {type: runs-on, source: "service:nginx", target: "lxc:web"}
`

// countingSSH is the runner's SSH pool, counting the cluster questions it carries.
type countingSSH struct {
	*remote.Pool
	mu      sync.Mutex
	cluster []string // the host each cluster question went to
}

func (c *countingSSH) Probe(ctx context.Context, t remote.Target, command string) (remote.Result, error) {
	if command == probeparse.ClusterResourcesCommand {
		c.mu.Lock()
		c.cluster = append(c.cluster, t.Slug)
		c.mu.Unlock()
	}
	return c.Pool.Probe(ctx, t, command)
}

func (c *countingSSH) clusterQuestions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.cluster...)
}

func (c *countingSSH) Exec(ctx context.Context, t remote.Target, command string, out io.Writer) (remote.Result, error) {
	return c.Pool.Exec(ctx, t, command, out)
}

// startCounted starts a runner on lab whose SSH pool counts the cluster questions.
func startCounted(t *testing.T, lab *labtest.Lab, reg *metrics.Registry) (*Runner, *countingSSH) {
	t.Helper()
	ssh := &countingSSH{Pool: lab.SSH}
	r := newRunner(Options{Pool: lab.DB, SSH: lab.SSH, Fleet: lab.Fleet, Logger: zerolog.Nop(), Metrics: reg,
		InitialSpread: 300 * time.Millisecond, FlushEvery: 100 * time.Millisecond}, ssh)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r, ssh
}

// resultsOf returns the stored results of the checks of targets, by check slug.
func resultsOf(t *testing.T, lab *labtest.Lab, targets ...string) map[string]resultRow {
	t.Helper()
	out := map[string]resultRow{}
	for slug, r := range storedResults(t, lab.DB) {
		for _, tg := range targets {
			if r.target == tg {
				out[slug] = r
			}
		}
	}
	return out
}

// listenDrift collects the request ids sent on oikos_drift.
func listenDrift(t *testing.T, lab *labtest.Lab) func() []string {
	t.Helper()
	conn, err := lab.DB.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "LISTEN "+eventbus.ChannelDrift); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var ids []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := conn.Conn().WaitForNotification(ctx)
			if err != nil {
				return
			}
			var p struct {
				RequestID string `json:"request_id"`
			}
			if json.Unmarshal([]byte(n.Payload), &p) == nil && uuid.Validate(p.RequestID) == nil {
				mu.Lock()
				ids = append(ids, p.RequestID)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		conn.Release()
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ids...)
	}
}

// migrate moves a guest through the lab's control endpoint, as an operator's qm/pct migrate.
func migrate(t *testing.T, lab *labtest.Lab, host string, vmid int, target string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"target": target})
	resp, err := http.Post(fmt.Sprintf("http://%s/guests/%s/%d/migrate", lab.Sim.ControlAddr(), host, vmid), "application/json",
		bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("migrate %s/%d to %s: %d %s", host, vmid, target, resp.StatusCode, b)
	}
}

// A guest migrated between two runs of its checks is checked on its new node at its next
// run: up, noting the move, never down; the cluster is asked once for every check of the
// guest together (and not again while the graph catches up), a drift discovery is asked
// for, and once the graph follows the note goes.
func TestMigratedGuestIsCheckedOnItsNewNode(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(clusterInventory), Control: true})
	lab.StartAllGuests(t)
	lab.DeriveChecks(t, fastChecks)
	drifts := listenDrift(t, lab)
	reg := metrics.NewRegistry()
	runner, ssh := startCounted(t, lab, reg)
	moving := []string{"lxc:web", "service:nginx", "vm:hass"}
	waitFor(t, 30*time.Second, "web, nginx and hass up", func() (bool, string) {
		got := resultsOf(t, lab, moving...)
		for slug, r := range got {
			if r.health != results.HealthUp {
				return false, slug + " is " + r.health + ": " + r.reason
			}
		}
		return len(got) == 9, fmt.Sprintf("%d results", len(got))
	})
	if q := ssh.clusterQuestions(); len(q) != 0 {
		t.Fatalf("the cluster was asked %v while every guest was where the graph says", q)
	}
	changesBefore := len(eventsOf(t, lab.DB, results.EventHealthChanged, "lxc:web")) + len(eventsOf(t, lab.DB, results.EventHealthChanged, "vm:hass")) +
		len(eventsOf(t, lab.DB, results.EventHealthChanged, "service:nginx"))

	migrated := time.Now()
	migrate(t, lab, "atlas", 101, "boreas")
	migrate(t, lab, "atlas", 150, "ceres")
	want := map[string]string{"lxc:web": "proxmox-host:boreas", "service:nginx": "proxmox-host:boreas", "vm:hass": "proxmox-host:ceres"}
	waitFor(t, 15*time.Second, "every check of the moved guests up on their new nodes, noting the move", func() (bool, string) {
		for slug, r := range resultsOf(t, lab, moving...) {
			mv, _ := r.summary["moved"].(map[string]any)
			if r.health != results.HealthUp || mv["to"] != want[r.target] {
				return false, fmt.Sprintf("%s: %s %s %v", slug, r.health, r.reason, r.summary)
			}
		}
		return true, ""
	})
	t.Logf("followed %s after the migrations (checks every 2 s)", time.Since(migrated).Round(10*time.Millisecond))
	web := storedResults(t, lab.DB)["check:lxc.web.ssh-script.cpu"]
	mv := web.summary["moved"].(map[string]any)
	if mv["from"] != "proxmox-host:atlas" || mv["guest"] != "lxc:web" || mv["cluster"] != "cluster:olympus" || web.summary["via"] != "proxmox-host:boreas" ||
		!strings.Contains(web.reason, "(moved: atlas → boreas)") {
		t.Errorf("web's cpu check: %s %v", web.reason, web.summary)
	}
	if g := storedResults(t, lab.DB)["check:vm.hass.proxmox-guest"]; !strings.Contains(g.reason, "running on proxmox-host:ceres") ||
		!strings.Contains(g.reason, "(moved: atlas → ceres)") {
		t.Errorf("hass's status check: %s", g.reason)
	}
	// No run recorded the move as a failure: no health change at all.
	changes := len(eventsOf(t, lab.DB, results.EventHealthChanged, "lxc:web")) + len(eventsOf(t, lab.DB, results.EventHealthChanged, "vm:hass")) +
		len(eventsOf(t, lab.DB, results.EventHealthChanged, "service:nginx"))
	if changes != changesBefore {
		t.Errorf("%d health changes of the moved guests and their service", changes-changesBefore)
	}
	// Both migrations came before the checks noticed: one question answered all nine checks
	// of both guests, none since (the checks go to the new nodes directly).
	mark := time.Now()
	waitFor(t, 15*time.Second, "two more runs of every check of the moved guests", func() (bool, string) {
		for slug := range resultsOf(t, lab, moving...) {
			if at := latestAt(t, lab, slug); !at.After(mark.Add(4 * time.Second)) {
				return false, fmt.Sprintf("%s last ran at %s", slug, at)
			}
		}
		return true, ""
	})
	if q := ssh.clusterQuestions(); len(q) != 1 {
		t.Errorf("cluster questions %v, want one for the cluster", q)
	}
	if v := reg.Value("oikos_scheduler_cluster_queries_total"); v != 1 {
		t.Errorf("oikos_scheduler_cluster_queries_total %v", v)
	}
	if v := reg.Value("oikos_scheduler_guest_moves_total"); v < 2 {
		t.Errorf("oikos_scheduler_guest_moves_total %v", v)
	}
	waitFor(t, 5*time.Second, "a drift discovery asked for", func() (bool, string) {
		ids := drifts()
		return len(ids) == 1, fmt.Sprint(ids)
	})
	var incidents int
	if err := lab.DB.QueryRow(context.Background(), `SELECT count(*) FROM signals WHERE kind = 'incident'`).Scan(&incidents); err != nil || incidents != 0 {
		t.Errorf("%d incidents (%v)", incidents, err)
	}

	// The graph follows (what the api does with the drift report's moves): the note goes.
	ctx := context.Background()
	for guest, host := range map[string]string{"lxc:web": "boreas", "vm:hass": "ceres"} {
		if _, err := lab.DB.Exec(ctx, `UPDATE entities SET attributes = attributes || jsonb_build_object('host', $2::text) WHERE slug = $1`,
			guest, host); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lab.DB.Exec(ctx, `UPDATE check_defs SET config = config || '{"host": "proxmox-host:ceres"}', updated_at = now()
WHERE slug = 'check:vm.hass.proxmox-guest'`); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.DB.Exec(ctx, `UPDATE check_defs SET config = config || '{"host": "proxmox-host:boreas"}', updated_at = now()
WHERE slug = 'check:lxc.web.proxmox-guest'`); err != nil {
		t.Fatal(err)
	}
	reloaded := time.Now()
	runner.Reload() // as NOTIFY oikos_checks does when the api re-derives the checks
	waitFor(t, 15*time.Second, "the moved guests checked through their graph's node, without a note", func() (bool, string) {
		for slug, r := range resultsOf(t, lab, moving...) {
			at := latestAt(t, lab, slug)
			if r.health != results.HealthUp || r.summary["moved"] != nil || !at.After(reloaded) {
				return false, fmt.Sprintf("%s: %s %s %v", slug, r.health, r.reason, r.summary["moved"])
			}
		}
		return true, ""
	})
	if q := ssh.clusterQuestions(); len(q) != 1 {
		t.Errorf("cluster questions %v after the graph followed", q)
	}
}

func latestAt(t *testing.T, lab *labtest.Lab, checkSlug string) time.Time {
	t.Helper()
	var at time.Time
	if err := lab.DB.QueryRow(context.Background(), `SELECT cr.at FROM check_results cr JOIN check_defs cd ON cd.id = cr.check_id
WHERE cd.slug = $1`, checkSlug).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}
