package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// memGraph is an in-memory Graph: entities by slug and `hosts` edges.
type memGraph struct {
	entities map[string]Entity // by slug
	hostOf   map[string]string // guest ID -> host slug
	fail     error             // returned by every lookup when set (an outage)
}

func (g *memGraph) EntityBySlug(_ context.Context, slug string) (Entity, error) {
	if g.fail != nil {
		return Entity{}, g.fail
	}
	e, ok := g.entities[slug]
	if !ok {
		return Entity{}, fmt.Errorf("entity %s: %w", slug, ErrNotFound)
	}
	return e, nil
}

func (g *memGraph) EntityByName(_ context.Context, types []string, name string) (Entity, error) {
	if g.fail != nil {
		return Entity{}, g.fail
	}
	for _, e := range g.entities {
		if e.Name == name && slices.Contains(types, e.Type) {
			return e, nil
		}
	}
	return Entity{}, fmt.Errorf("entity named %s among %v: %w", name, types, ErrNotFound)
}

func (g *memGraph) HostOf(_ context.Context, guestID string) (Entity, error) {
	if g.fail != nil {
		return Entity{}, g.fail
	}
	slug, ok := g.hostOf[guestID]
	if !ok {
		return Entity{}, fmt.Errorf("hosts edge into %s: %w", guestID, ErrNotFound)
	}
	return g.entities[slug], nil
}

// testParents is a slice of the ontology's is-a tree. Guests are machines
// here on purpose: resolution must still hop through their host.
var testParents = map[string]string{
	"proxmox-host": "host", "host": "machine", "workstation": "machine", "vps": "machine",
	"lxc": "guest", "vm": "guest", "guest": "machine",
}

func testIsA(typ, ancestor string) bool {
	for t := typ; t != ""; t = testParents[t] {
		if t == ancestor {
			return true
		}
	}
	return false
}

func ent(typ, name string, attrs map[string]any) Entity {
	return Entity{ID: "id-" + typ + "-" + name, Slug: typ + ":" + name, Type: typ, Name: name, Attributes: attrs}
}

func testGraph() *memGraph {
	g := &memGraph{entities: map[string]Entity{}, hostOf: map[string]string{}}
	for _, e := range []Entity{
		ent("proxmox-host", "atlas", map[string]any{"lan_ipv4": "127.0.10.1", "ssh_port": 2222, "user": "root", "node": "atlas"}),
		ent("proxmox-host", "borealis", map[string]any{"lan_ipv4": "127.0.10.2", "ssh_port": float64(2222)}),
		ent("proxmox-host", "bare", map[string]any{}),
		// An old-style "host" entity with the same name as a Proxmox host.
		ent("host", "atlas", map[string]any{"lan_ipv4": "127.0.11.9"}),
	} {
		g.entities[e.Slug] = e
	}
	g.hostOf["id-lxc-edge"] = "proxmox-host:borealis"
	g.hostOf["id-lxc-stale"] = "proxmox-host:borealis"
	g.hostOf["id-lxc-badhost"] = "proxmox-host:bare"
	g.hostOf["id-lxc-wrongedge"] = "host:atlas"
	return g
}

func TestResolve(t *testing.T) {
	t.Parallel()
	type want struct {
		addr, user, kind, host, os string
		vmid                       int
		wrapped                    string // Wrap("echo hi")
	}
	tests := []struct {
		name    string
		e       Entity
		want    want
		wantErr []error  // errors.Is targets
		errHas  []string // substrings of the error
	}{
		{
			name: "lxc via host attribute name",
			e:    ent("lxc", "jellyfin", map[string]any{"vmid": 101, "host": "atlas"}),
			want: want{addr: "127.0.10.1:2222", user: "root", kind: KindLXC, host: "proxmox-host:atlas", os: "linux", vmid: 101,
				wrapped: "pct exec 101 -- sh -c 'echo hi'"},
		},
		{
			name: "lxc via host attribute full slug",
			e:    ent("lxc", "pihole", map[string]any{"vmid": "102", "host": "proxmox-host:atlas"}),
			want: want{addr: "127.0.10.1:2222", user: "root", kind: KindLXC, host: "proxmox-host:atlas", os: "linux", vmid: 102,
				wrapped: "pct exec 102 -- sh -c 'echo hi'"},
		},
		{
			name: "lxc via hosts edge with no host attribute",
			e:    ent("lxc", "edge", map[string]any{"vmid": float64(103)}),
			want: want{addr: "127.0.10.2:2222", user: "root", kind: KindLXC, host: "proxmox-host:borealis", os: "linux", vmid: 103,
				wrapped: "pct exec 103 -- sh -c 'echo hi'"},
		},
		{
			name: "lxc with a stale host attribute falls back to the edge",
			e:    ent("lxc", "stale", map[string]any{"vmid": 104, "host": "gone"}),
			want: want{addr: "127.0.10.2:2222", user: "root", kind: KindLXC, host: "proxmox-host:borealis", os: "linux", vmid: 104,
				wrapped: "pct exec 104 -- sh -c 'echo hi'"},
		},
		{
			name:    "lxc with neither attribute nor edge",
			e:       ent("lxc", "orphan", map[string]any{"vmid": 105}),
			wantErr: []error{ErrResolution},
			errHas:  []string{"lxc:orphan", "no `host` attribute", "no `hosts` edge"},
		},
		{
			name:    "lxc without vmid",
			e:       ent("lxc", "novmid", map[string]any{"host": "atlas"}),
			wantErr: []error{ErrResolution},
			errHas:  []string{"lxc:novmid", "vmid"},
		},
		{
			name:    "lxc whose host has no address",
			e:       ent("lxc", "badhost", map[string]any{"vmid": 106}),
			wantErr: []error{ErrResolution},
			errHas:  []string{"lxc:badhost", "proxmox-host:bare", "no address"},
		},
		{
			name:    "lxc whose host slug is not a proxmox host",
			e:       ent("lxc", "wrongslug", map[string]any{"vmid": 107, "host": "host:atlas"}),
			wantErr: []error{ErrResolution},
			errHas:  []string{"lxc:wrongslug", "host:atlas", "not a proxmox-host"},
		},
		{
			name:    "lxc whose hosts edge comes from a non-proxmox host",
			e:       ent("lxc", "wrongedge", map[string]any{"vmid": 108}),
			wantErr: []error{ErrResolution},
			errHas:  []string{"lxc:wrongedge", "not a proxmox-host"},
		},
		{
			name: "vm with guest agent",
			e:    ent("vm", "homeassistant", map[string]any{"vmid": 200, "host": "atlas", "qemu_guest_agent": true}),
			want: want{addr: "127.0.10.1:2222", user: "root", kind: KindVM, host: "proxmox-host:atlas", os: "linux", vmid: 200,
				wrapped: "qm guest exec 200 --timeout 45 -- sh -c 'echo hi'"},
		},
		{
			name:    "vm without guest agent attribute",
			e:       ent("vm", "noagent", map[string]any{"vmid": 201, "host": "atlas"}),
			wantErr: []error{ErrResolution, ErrNoGuestAgent},
			errHas:  []string{"vm:noagent", "qemu_guest_agent"},
		},
		{
			name:    "vm with guest agent false",
			e:       ent("vm", "agentoff", map[string]any{"vmid": 202, "host": "atlas", "qemu_guest_agent": false}),
			wantErr: []error{ErrResolution, ErrNoGuestAgent},
			errHas:  []string{"vm:agentoff"},
		},
		{
			name: "machine prefers public over mesh over lan",
			e: ent("vps", "edge", map[string]any{"public_ipv4": "127.0.13.1", "mesh_ipv4": "127.0.14.1",
				"lan_ipv4": "127.0.15.1", "ssh_port": 2222}),
			want: want{addr: "127.0.13.1:2222", user: "root", kind: KindMachine, os: "linux", wrapped: "echo hi"},
		},
		{
			name: "machine prefers mesh over lan",
			e:    ent("host", "rclone", map[string]any{"mesh_ipv4": "127.0.14.2", "lan_ipv4": "127.0.11.2", "ssh_port": "2222"}),
			want: want{addr: "127.0.14.2:2222", user: "root", kind: KindMachine, os: "linux", wrapped: "echo hi"},
		},
		{
			name: "machine with lan only, default port, user and os",
			e:    ent("workstation", "mac-mini", map[string]any{"lan_ipv4": "127.0.12.1", "user": "dtoro", "os": "darwin"}),
			want: want{addr: "127.0.12.1:22", user: "dtoro", kind: KindMachine, os: "darwin", wrapped: "echo hi"},
		},
		{
			name:    "machine with no address",
			e:       ent("host", "nowhere", map[string]any{"user": "root"}),
			wantErr: []error{ErrResolution},
			errHas:  []string{"host:nowhere", "public_ipv4", "mesh_ipv4", "lan_ipv4"},
		},
		{
			name:    "machine with a hostname instead of an address",
			e:       ent("host", "named", map[string]any{"lan_ipv4": "nas.lab.example"}),
			wantErr: []error{ErrResolution},
			errHas:  []string{"host:named", "not an IP address"},
		},
		{
			name:    "machine with a bad port",
			e:       ent("host", "badport", map[string]any{"lan_ipv4": "127.0.11.3", "ssh_port": 70000}),
			wantErr: []error{ErrResolution},
			errHas:  []string{"host:badport", "ssh_port"},
		},
		{
			name:    "not a machine",
			e:       ent("service", "jellyfin", map[string]any{"unit": "jellyfin.service"}),
			wantErr: []error{ErrResolution, ErrNotRunnable},
			errHas:  []string{"service:jellyfin", `"service"`},
		},
	}
	r := &Resolver{Graph: testGraph(), IsA: testIsA, GuestExecTimeout: 45 * time.Second}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Resolve(context.Background(), tt.e)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("resolved to %+v, want an error", got)
				}
				for _, w := range tt.wantErr {
					if !errors.Is(err, w) {
						t.Errorf("error %q does not match %v", err, w)
					}
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Slug != tt.e.Slug || got.Addr != tt.want.addr || got.User != tt.want.user || got.Kind != tt.want.kind ||
				got.Host != tt.want.host || got.OS != tt.want.os || got.VMID != tt.want.vmid {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			wrapped, err := got.Wrap("echo hi")
			if err != nil || wrapped != tt.want.wrapped {
				t.Errorf("Wrap = %q, %v; want %q", wrapped, err, tt.want.wrapped)
			}
		})
	}
}

func TestResolveOutageIsNotAResolutionError(t *testing.T) {
	t.Parallel()
	outage := errors.New("connection refused")
	g := testGraph()
	g.fail = outage
	var logs bytes.Buffer
	r := &Resolver{Graph: g, IsA: testIsA, Logger: zerolog.New(&logs)}
	for _, e := range []Entity{
		ent("lxc", "jellyfin", map[string]any{"vmid": 101, "host": "atlas"}),
		ent("lxc", "edge", map[string]any{"vmid": 103}),
	} {
		_, err := r.Resolve(context.Background(), e)
		if !errors.Is(err, outage) || errors.Is(err, ErrResolution) {
			t.Errorf("%s: err = %v, want the outage and not ErrResolution", e.Slug, err)
		}
	}
	if !strings.Contains(logs.String(), "graph lookup error") {
		t.Errorf("outage not logged as such: %s", logs.String())
	}
}

func TestResolveLogsConfigurationProblems(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	r := &Resolver{Graph: testGraph(), IsA: testIsA, Logger: zerolog.New(&logs)}
	_, err := r.Resolve(context.Background(), ent("lxc", "orphan", map[string]any{"vmid": 105}))
	if !errors.Is(err, ErrResolution) {
		t.Fatalf("err = %v", err)
	}
	got := logs.String()
	if !strings.Contains(got, "configuration problem") || !strings.Contains(got, "lxc:orphan") {
		t.Errorf("resolution failure not logged as a configuration problem: %s", got)
	}
}

func TestResolveDefaultGuestExecTimeoutAndNilIsA(t *testing.T) {
	t.Parallel()
	r := &Resolver{Graph: testGraph()} // exact type names only
	tgt, err := r.Resolve(context.Background(), ent("vm", "ha", map[string]any{"vmid": 200, "host": "atlas", "qemu_guest_agent": 1}))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tgt.Wrap("true"); got != "qm guest exec 200 --timeout 600 -- sh -c true" {
		t.Errorf("Wrap = %q", got)
	}
	// Without IsA, a workstation is not known to be a machine.
	if _, err := r.Resolve(context.Background(), ent("workstation", "w", map[string]any{"lan_ipv4": "127.0.12.1"})); !errors.Is(err, ErrResolution) {
		t.Errorf("err = %v, want ErrResolution", err)
	}
}
