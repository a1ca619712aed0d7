package fleet_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/fleet"
	"github.com/oikos-hq/oikos/scheduler/internal/fleet/fleettest"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestIsA(t *testing.T) {
	t.Parallel()
	parents := map[string]string{"machine": "", "host": "machine", "proxmox-host": "host", "lxc": "guest", "guest": "machine",
		"loop-a": "loop-b", "loop-b": "loop-a"}
	for _, c := range []struct {
		typ, anc string
		want     bool
	}{
		{"proxmox-host", "proxmox-host", true},
		{"proxmox-host", "machine", true},
		{"proxmox-host", "guest", false},
		{"lxc", "machine", true},
		{"machine", "lxc", false},
		{"unknown", "unknown", true},
		{"unknown", "machine", false},
		{"loop-a", "machine", false}, // a cycle ends the walk
	} {
		if got := fleet.IsA(parents, c.typ, c.anc); got != c.want {
			t.Errorf("IsA(%s, %s) = %v, want %v", c.typ, c.anc, got, c.want)
		}
	}
}

func TestResolveSeededFleet(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ids := fleettest.SeedInventory(t, db.Pool)
	g := fleet.New(db.Pool, fleet.Options{Logger: zerolog.Nop()})
	ctx := context.Background()

	for _, c := range []struct {
		ref              string
		kind, addr, host string
		wrapped          string
	}{
		// host attribute as a bare name
		{"lxc:jellyfin", remote.KindLXC, "127.0.10.1:2222", "proxmox-host:atlas", "pct exec 101 -- sh -c 'uptime -p'"},
		// host attribute as a full slug (the `host:` prefix bug)
		{"lxc:caddy", remote.KindLXC, "127.0.10.1:2222", "proxmox-host:atlas", "pct exec 107 -- sh -c 'uptime -p'"},
		// no host attribute at all: the hosts edge
		{"lxc:ntfy", remote.KindLXC, "127.0.10.3:2222", "proxmox-host:ceres", "pct exec 306 -- sh -c 'uptime -p'"},
		{"vm:homeassistant", remote.KindVM, "127.0.10.1:2222", "proxmox-host:atlas", "qm guest exec 150 --timeout 600 -- sh -c 'uptime -p'"},
		{"proxmox-host:boreas", remote.KindMachine, "127.0.10.2:2222", "", "uptime -p"},
		{"vps:edge", remote.KindMachine, "127.0.13.1:2222", "", "uptime -p"},
		{"workstation:forge", remote.KindMachine, "127.0.12.2:2222", "", "uptime -p"},
		// by id as well as by slug
		{ids["lxc:ntfy"], remote.KindLXC, "127.0.10.3:2222", "proxmox-host:ceres", "pct exec 306 -- sh -c 'uptime -p'"},
	} {
		tg, e, err := g.Resolve(ctx, c.ref)
		if err != nil {
			t.Errorf("Resolve(%s): %v", c.ref, err)
			continue
		}
		wrapped, err := tg.Wrap("uptime -p")
		if err != nil {
			t.Errorf("%s: wrap: %v", c.ref, err)
		}
		if tg.Kind != c.kind || tg.Addr != c.addr || tg.Host != c.host || wrapped != c.wrapped || e.ID == "" {
			t.Errorf("Resolve(%s) = kind %s addr %s host %s wrapped %q, want %s %s %s %q",
				c.ref, tg.Kind, tg.Addr, tg.Host, wrapped, c.kind, c.addr, c.host, c.wrapped)
		}
	}
}

func TestResolveFailuresSayWhatIsMissing(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	fleettest.SeedTypes(t, db.Pool)
	p := db.Pool
	host := fleettest.InsertEntity(t, p, "proxmox-host", "atlas", "", map[string]any{"lan_ipv4": "127.0.10.1", "ssh_port": 2222})
	fleettest.InsertEntity(t, p, "lxc", "orphan", "", map[string]any{"vmid": 150})
	fleettest.InsertEntity(t, p, "lxc", "novmid", "", map[string]any{"host": "atlas"})
	fleettest.InsertEntity(t, p, "lxc", "stale", "", map[string]any{"vmid": 151, "host": "gone"})
	edged := fleettest.InsertEntity(t, p, "lxc", "stale-edged", "", map[string]any{"vmid": 152, "host": "gone"})
	fleettest.InsertEdge(t, p, "hosts", host, edged)
	fleettest.InsertEntity(t, p, "vm", "noagent", "", map[string]any{"vmid": 300, "host": "atlas", "qemu_guest_agent": false})
	fleettest.InsertEntity(t, p, "host", "noaddr", "", map[string]any{"ssh_port": 2222})
	g := fleet.New(p, fleet.Options{Logger: zerolog.Nop()})
	ctx := context.Background()

	for _, c := range []struct {
		ref, want string
		extra     error
	}{
		{"lxc:missing", "no such entity", remote.ErrNotFound},
		{"lxc:orphan", "no owning Proxmox host", nil},
		{"lxc:novmid", "missing `vmid`", nil},
		{"lxc:stale", "names no proxmox-host", nil},
		{"vm:noagent", "guest agent", remote.ErrNoGuestAgent},
		{"host:noaddr", "no address", nil},
	} {
		_, _, err := g.Resolve(ctx, c.ref)
		if !errors.Is(err, remote.ErrResolution) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.ref) {
			t.Errorf("Resolve(%s) = %v, want a resolution error naming it and saying %q", c.ref, err, c.want)
		}
		if c.extra != nil && !errors.Is(err, c.extra) {
			t.Errorf("Resolve(%s) = %v, want it to match %v", c.ref, err, c.extra)
		}
	}
	// A stale host attribute falls back to the edge rather than failing.
	if tg, _, err := g.Resolve(ctx, "lxc:stale-edged"); err != nil || tg.Host != "proxmox-host:atlas" {
		t.Errorf("stale attribute with an edge: %+v, %v", tg, err)
	}
}

func TestLookups(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	fleettest.SeedTypes(t, db.Pool)
	p := db.Pool
	live := fleettest.InsertEntity(t, p, "proxmox-host", "atlas", "", map[string]any{"lan_ipv4": "127.0.10.1"})
	gone := fleettest.InsertEntity(t, p, "proxmox-host", "old", "destroyed", map[string]any{"lan_ipv4": "127.0.10.9"})
	guest := fleettest.InsertEntity(t, p, "lxc", "web", "", map[string]any{"vmid": 120})
	fleettest.InsertEdge(t, p, "hosts", gone, guest)
	fleettest.InsertEdge(t, p, "hosts", live, guest)
	g := fleet.New(p, fleet.Options{})
	ctx := context.Background()

	if e, err := g.EntityByName(ctx, []string{"proxmox-host"}, "atlas"); err != nil || e.ID != live {
		t.Errorf("EntityByName = %+v, %v", e, err)
	}
	// Through is-a: a proxmox-host is found when asking for any machine.
	if e, err := g.EntityByName(ctx, []string{"machine"}, "atlas"); err != nil || e.ID != live {
		t.Errorf("EntityByName(machine) = %+v, %v", e, err)
	}
	if _, err := g.EntityByName(ctx, []string{"proxmox-host"}, "nope"); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("EntityByName(nope) = %v, want ErrNotFound", err)
	}
	// The live host wins over a destroyed one that still has an edge.
	if e, err := g.HostOf(ctx, guest); err != nil || e.ID != live {
		t.Errorf("HostOf = %+v, %v, want %s", e, err, live)
	}
	if _, err := g.HostOf(ctx, live); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("HostOf(host) = %v, want ErrNotFound", err)
	}
	if _, err := g.EntityBySlug(ctx, "lxc:none"); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("EntityBySlug(none) = %v", err)
	}
	if e, err := g.Lookup(ctx, guest); err != nil || e.Slug != "lxc:web" || e.Attributes["vmid"] != float64(120) {
		t.Errorf("Lookup(id) = %+v, %v", e, err)
	}
	// Two live entities with one name under an ancestor type are refused, not guessed.
	fleettest.InsertEntity(t, p, "host", "atlas", "", map[string]any{"lan_ipv4": "127.0.11.9"})
	if _, err := g.EntityByName(ctx, []string{"machine"}, "atlas"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ambiguous name: %v", err)
	}
}

// Where a command about an entity runs: on it when it is a machine or a guest, else along
// its runs-on edges, nearest first (a service on an LXC; a container on a docker host on a
// VM); an entity that runs on nothing that can run a command says what was tried.
func TestResolveRunsOn(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ids := fleettest.SeedInventory(t, db.Pool)
	p := db.Pool
	g := fleet.New(p, fleet.Options{Logger: zerolog.Nop()})
	ctx := context.Background()

	if tg, err := g.ResolveRunsOn(ctx, ids["lxc:jellyfin"]); err != nil || tg.Slug != "lxc:jellyfin" {
		t.Errorf("a guest runs its own commands: %+v, %v", tg, err)
	}
	if chain, err := g.RunsOn(ctx, ids["service:jellyfin"]); err != nil || len(chain) != 1 || chain[0] != "lxc:jellyfin" {
		t.Errorf("RunsOn(service:jellyfin) = %v, %v", chain, err)
	}
	if tg, err := g.ResolveRunsOn(ctx, ids["service:jellyfin"]); err != nil || tg.Slug != "lxc:jellyfin" || tg.Kind != remote.KindLXC {
		t.Errorf("a service runs on its LXC: %+v, %v", tg, err)
	}
	// Two hops, the first of which cannot run a command.
	app := fleettest.InsertEntity(t, p, "service", "deep", "", nil)
	mid := fleettest.InsertEntity(t, p, "service", "middle", "", nil)
	fleettest.InsertEdge(t, p, "runs-on", app, mid)
	fleettest.InsertEdge(t, p, "runs-on", mid, ids["lxc:jellyfin"])
	if chain, err := g.RunsOn(ctx, app); err != nil || strings.Join(chain, ",") != "service:middle,lxc:jellyfin" {
		t.Errorf("RunsOn(deep) = %v, %v", chain, err)
	}
	if tg, err := g.ResolveRunsOn(ctx, "service:deep"); err != nil || tg.Slug != "lxc:jellyfin" {
		t.Errorf("two hops: %+v, %v", tg, err)
	}
	// Nothing to run on.
	alone := fleettest.InsertEntity(t, p, "service", "alone", "", nil)
	if _, err := g.ResolveRunsOn(ctx, alone); !errors.Is(err, remote.ErrResolution) {
		t.Errorf("a service on nothing: %v, want a resolution error", err)
	}
	lost := fleettest.InsertEntity(t, p, "service", "lost", "", nil)
	other := fleettest.InsertEntity(t, p, "service", "nowhere", "", nil)
	fleettest.InsertEdge(t, p, "runs-on", lost, other)
	_, err := g.ResolveRunsOn(ctx, lost)
	if !errors.Is(err, remote.ErrResolution) || !strings.Contains(err.Error(), "service:lost runs on service:nowhere, none of which can run a command") {
		t.Errorf("a chain that ends nowhere runnable: %v", err)
	}
	if _, err := g.ResolveRunsOn(ctx, "service:missing"); !errors.Is(err, remote.ErrResolution) {
		t.Errorf("a missing entity: %v", err)
	}
}
