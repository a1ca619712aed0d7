package drift

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
)

// dialLog records which hosts one scheduler's SSH reached.
type dialLog struct {
	inner Executor
	mu    sync.Mutex
	hosts map[string]int
}

func (d *dialLog) Exec(ctx context.Context, t remote.Target, cmd string, out io.Writer) (remote.Result, error) {
	d.mu.Lock()
	d.hosts[t.Slug]++
	d.mu.Unlock()
	return d.inner.Exec(ctx, t, cmd, out)
}

func (d *dialLog) reached() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, v := range d.hosts {
		out[k] = v
	}
	return out
}

// holdLease writes unit's scheduler_leases row: held by holder at gen for a minute.
func holdLease(t *testing.T, lab *labtest.Lab, unit, holder string, gen int64) {
	t.Helper()
	if _, err := lab.DB.Exec(context.Background(), `INSERT INTO scheduler_leases (resource, holder, expires_at, generation)
VALUES ($1, $2, now() + interval '1 minute', $3)
ON CONFLICT (resource) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, generation = EXCLUDED.generation`,
		unit, holder, gen); err != nil {
		t.Fatal(err)
	}
}

// startWithNotifier starts s, then n, and waits until n listens.
func startWithNotifier(t *testing.T, s *Service, n *eventbus.Notifier) {
	t.Helper()
	connected := make(chan struct{}, 1)
	n.OnConnect(func() {
		select {
		case connected <- struct{}{}:
		default:
		}
	})
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("notifier did not connect")
	}
}

// With several schedulers each Proxmox host is listed by the holder of its lease through its
// own SSH, never by the scheduler running the report; a missing guest's configuration is read
// by its host's holder; a host nobody holds is reported unlisted with the reason; a listing
// whose lease moved on while it ran is not stored (fenced by the generation).
func TestDriftListsEachHostThroughItsHolder(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inventory)})
	lab.Exec(t, "proxmox-host:boreas", "pct create 160 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname behind --cores 3")
	cfg, err := pgx.ParseConfig(lab.DB.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	// a holds atlas, b holds boreas; ceres's lease has no live holder.
	holdLease(t, lab, "host:proxmox-host:atlas", "sched-a", 1)
	holdLease(t, lab, "host:proxmox-host:boreas", "sched-b", 1)
	var mu sync.Mutex
	views := map[string]map[string]int64{
		"sched-a": {"host:proxmox-host:atlas": 1},
		"sched-b": {"host:proxmox-host:boreas": 1},
	}
	logs := map[string]*dialLog{}
	services := map[string]*Service{}
	for _, id := range []string{"sched-a", "sched-b"} {
		logs[id] = &dialLog{inner: lab.SSH, hosts: map[string]int{}}
		n := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
		services[id] = newService(t, lab, func(o *Options) {
			o.SSH, o.Notifier, o.SchedulerID, o.Poll, o.ListWait = logs[id], n, id, time.Hour, 3*time.Second
			o.Lease = func(unit string) (int64, bool) {
				mu.Lock()
				defer mu.Unlock()
				g, ok := views[id][unit]
				return g, ok
			}
		})
		startWithNotifier(t, services[id], n)
	}

	rep, err := services["sched-a"].RunNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byHost := map[string]HostReport{}
	for _, h := range rep.Hosts {
		byHost[h.Host] = h
	}
	if h := byHost["proxmox-host:atlas"]; !h.Reachable || h.Scheduler != "sched-a" {
		t.Errorf("atlas %+v", h)
	}
	if h := byHost["proxmox-host:boreas"]; !h.Reachable || h.Scheduler != "sched-b" {
		t.Errorf("boreas %+v", h)
	}
	if h := byHost["proxmox-host:ceres"]; h.Reachable || !strings.Contains(h.Error, "no scheduler holds its lease") {
		t.Errorf("ceres %+v", h)
	}
	if len(rep.Missing) != 1 || rep.Missing[0].VMID != 160 || rep.Missing[0].Config == nil || rep.Missing[0].Config.Cores != 3 {
		t.Errorf("missing %+v", rep.Missing)
	}
	if got := logs["sched-a"].reached(); len(got) != 1 || got["proxmox-host:atlas"] == 0 {
		t.Errorf("sched-a reached %v, want atlas only", got)
	}
	if got := logs["sched-b"].reached(); len(got) != 1 || got["proxmox-host:boreas"] < 3 { // pct list, qm list, pct config
		t.Errorf("sched-b reached %v, want boreas only", got)
	}

	// boreas's lease moved to generation 2 while b still believes in 1: b lists, but its
	// listing is not stored, and the report says who held it.
	holdLease(t, lab, "host:proxmox-host:boreas", "sched-b", 2)
	rep, err = services["sched-a"].RunNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range rep.Hosts {
		if h.Host == "proxmox-host:boreas" && (h.Reachable || !strings.Contains(h.Error, "its lease holder sched-b did not answer")) {
			t.Errorf("fenced boreas %+v", h)
		}
	}
	var stored int
	if err := lab.DB.QueryRow(context.Background(), `SELECT count(*) FROM drift_listings WHERE report_id = $1 AND host_slug = 'proxmox-host:boreas'`,
		rep.ID).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("%d fenced listings stored (%v)", stored, err)
	}
}

// A cluster is listed by the holder of its first member's lease, through that member's
// connection, fenced by its lease; a scheduler holding only a later member lists nothing
// while that holder answers, and takes over (through its own member) when nobody holds the
// first one.
func TestDriftClusterListedByAMembersHolder(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: []byte(clusterInventory)})
	cfg, err := pgx.ParseConfig(lab.DB.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	holdLease(t, lab, "host:proxmox-host:atlas", "sched-b", 1)
	holdLease(t, lab, "host:proxmox-host:boreas", "sched-a", 1)
	holdLease(t, lab, "host:proxmox-host:delta", "sched-a", 1)
	var mu sync.Mutex
	views := map[string]map[string]int64{
		"sched-a": {"host:proxmox-host:boreas": 1, "host:proxmox-host:delta": 1},
		"sched-b": {"host:proxmox-host:atlas": 1},
	}
	logs := map[string]*cmdLog{}
	services := map[string]*Service{}
	for _, id := range []string{"sched-a", "sched-b"} {
		logs[id] = newCmdLog(lab.SSH)
		n := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
		services[id] = newService(t, lab, func(o *Options) {
			o.SSH, o.Notifier, o.SchedulerID, o.Poll, o.HostTimeout = logs[id], n, id, time.Hour, 2*time.Second
			o.Lease = func(unit string) (int64, bool) {
				mu.Lock()
				defer mu.Unlock()
				g, ok := views[id][unit]
				return g, ok
			}
		})
		startWithNotifier(t, services[id], n)
	}
	rep, err := services["sched-a"].RunNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Clusters[0]; c.Via != "proxmox-host:atlas" || c.Error != "" {
		t.Errorf("cluster %+v, want listed through atlas", c)
	}
	if got := logs["sched-b"].take(); len(got) != 1 || len(got["proxmox-host:atlas"]) != 1 || got["proxmox-host:atlas"][0] != ClusterResourcesCommand {
		t.Errorf("sched-b sent %v, want the cluster listing through atlas", got)
	}
	if got := logs["sched-a"].take(); len(got) != 1 || len(got["proxmox-host:delta"]) != 2 {
		t.Errorf("sched-a sent %v, want delta's pct list and qm list only", got)
	}
	for _, h := range rep.Hosts {
		if h.Cluster != "" && h.Scheduler != "sched-b" {
			t.Errorf("member %+v: listed by %q, want sched-b", h, h.Scheduler)
		}
	}

	// Nobody holds atlas any more: sched-a takes over through boreas.
	mu.Lock()
	delete(views["sched-b"], "host:proxmox-host:atlas")
	mu.Unlock()
	if _, err := lab.DB.Exec(context.Background(), `DELETE FROM scheduler_leases WHERE resource = 'host:proxmox-host:atlas'`); err != nil {
		t.Fatal(err)
	}
	rep, err = services["sched-a"].RunNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Clusters[0]; c.Via != "proxmox-host:boreas" {
		t.Errorf("cluster %+v, want taken over through boreas", c)
	}
	if got := logs["sched-a"].take(); len(got["proxmox-host:boreas"]) != 1 || len(got["proxmox-host:atlas"]) != 0 {
		t.Errorf("sched-a sent %v", got)
	}
	if got := logs["sched-b"].take(); len(got) != 0 {
		t.Errorf("sched-b sent %v, holding nothing", got)
	}
}
