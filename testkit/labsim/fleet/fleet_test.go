package fleet

import (
	"errors"
	"reflect"
	"testing"
)

const smallInventory = `
entities:
  - {type: cluster, name: olympus}
  - type: proxmox-host
    name: atlas
    attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas-node, os: linux, cores: 8, gateway: 192.0.2.1}
  - {type: vps, name: edge, attributes: {public_ipv4: 127.0.13.1, mesh_ipv4: 127.0.14.1, lan_ipv4: 127.0.15.1, ssh_port: "2222", os: linux}}
  - {type: workstation, name: studio, attributes: {mesh_ipv4: 127.0.12.1, user: dana, os: darwin}}
  - {type: lxc, name: jellyfin, attributes: {vmid: 101, host: atlas, hostname: jf, memory_mb: 2048, cores: 2}}
  - {type: lxc, name: caddy, attributes: {vmid: "107", host: "proxmox-host:atlas"}}
  - {type: lxc, name: ntfy, attributes: {vmid: 306, onboot: false}}
  - {type: lxc, name: gone, state: destroyed, attributes: {vmid: 999, host: atlas}}
  - {type: vm, name: homeassistant, attributes: {vmid: 150, host: atlas, qemu_guest_agent: 1}}
  - {type: service, name: jellyfin, attributes: {unit: jellyfin.service, port: 8096, url: "https://media.lab.example/health"}}
  - {type: reverse-proxy, name: caddy, attributes: {unit: caddy.service, port: 443}}
  - {type: container, name: kuma, attributes: {container_name: uptime-kuma}}
  - {type: service, name: kuma, attributes: {port: 3001}}
  - {type: ingress-route, name: jellyfin.lab.example, attributes: {public_host: jellyfin.lab.example}}
  - {type: ingress-route, name: status.lab.example, attributes: {public_host: status.lab.example}}
  - {type: lxc-template, name: alpine, attributes: {volid: "local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz"}}
relationships:
  - {type: member-of, source: "proxmox-host:atlas", target: "cluster:olympus"}
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:ntfy"}
  - {type: runs-on, source: "service:jellyfin", target: "lxc:jellyfin"}
  - {type: runs-on, source: "reverse-proxy:caddy", target: "lxc:caddy"}
  - {type: runs-on, source: "container:kuma", target: "vps:edge"}
  - {type: runs-on, source: "service:kuma", target: "container:kuma"}
  - {type: routes-to, source: "ingress-route:jellyfin.lab.example", target: "service:jellyfin"}
  - {type: routes-to, source: "ingress-route:status.lab.example", target: "service:kuma"}
`

func TestFromInventory(t *testing.T) {
	t.Parallel()
	f, err := FromInventory([]byte(smallInventory))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Hosts) != 3 {
		t.Fatalf("hosts: %+v", f.Hosts)
	}
	atlas, edge, studio := f.Hosts[0], f.Hosts[1], f.Hosts[2]
	if atlas.Kind != KindProxmox || atlas.Addr != "127.0.10.1:2222" || atlas.Node != "atlas-node" || atlas.Cluster != "olympus" ||
		!reflect.DeepEqual(atlas.Gateways, []string{"192.0.2.1"}) || atlas.Cores != 8 {
		t.Fatalf("atlas: %+v", atlas)
	}
	if edge.Kind != KindLinux || edge.Addr != "127.0.13.1:2222" || edge.User != "root" ||
		!reflect.DeepEqual(edge.Containers, []string{"uptime-kuma"}) || !reflect.DeepEqual(edge.Units, []string{"docker.service"}) {
		t.Fatalf("edge (public address first, string port, containers): %+v", edge)
	}
	if studio.Kind != KindDarwin || studio.Addr != "127.0.12.1:22" || studio.User != "dana" {
		t.Fatalf("studio: %+v", studio)
	}
	want := []Guest{
		{VMID: 101, Kind: GuestLXC, Name: "jellyfin", Hostname: "jf", Status: StatusRunning, MemoryMB: 2048, Cores: 2,
			Units: []string{"jellyfin.service"}, Listeners: []Listener{{Port: 8096, Unit: "jellyfin.service"}}},
		{VMID: 107, Kind: GuestLXC, Name: "caddy", Hostname: "caddy", Status: StatusRunning,
			Units: []string{"caddy.service"}, Listeners: []Listener{{Port: 443, Unit: "caddy.service"}}},
		{VMID: 306, Kind: GuestLXC, Name: "ntfy", Hostname: "ntfy", Status: StatusStopped},
		{VMID: 150, Kind: GuestVM, Name: "homeassistant", Hostname: "homeassistant", Status: StatusRunning, GuestAgent: true},
	}
	if !reflect.DeepEqual(atlas.Guests, want) {
		t.Fatalf("guests:\n%+v\nwant\n%+v", atlas.Guests, want)
	}
	wantRoutes := map[string]RouteTarget{
		"jellyfin.lab.example": {Host: "atlas", VMID: 101, Unit: "jellyfin.service"},
		"media.lab.example":    {Host: "atlas", VMID: 101, Unit: "jellyfin.service"},
		"status.lab.example":   {Host: "edge"},
	}
	if !reflect.DeepEqual(f.Routes, wantRoutes) {
		t.Fatalf("routes: %+v", f.Routes)
	}
	if !reflect.DeepEqual(f.Templates, []string{"local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz"}) {
		t.Fatalf("templates: %v", f.Templates)
	}
}

func TestFleetFromInventoryErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml string }{
		{"not yaml", "entities: [ {"},
		{"guest without host", "entities:\n  - {type: lxc, name: a, attributes: {vmid: 1}}\n"},
		{"guest on a plain host", "entities:\n  - {type: host, name: h, attributes: {lan_ipv4: 127.0.11.1}}\n  - {type: lxc, name: a, attributes: {vmid: 100, host: h}}\n"},
		{"bad vmid", "entities:\n  - {type: proxmox-host, name: p, attributes: {lan_ipv4: 127.0.10.1}}\n  - {type: lxc, name: a, attributes: {vmid: abc, host: p}}\n"},
		{"duplicate vmid", "entities:\n  - {type: proxmox-host, name: p, attributes: {lan_ipv4: 127.0.10.1}}\n  - {type: lxc, name: a, attributes: {vmid: 100, host: p}}\n  - {type: vm, name: b, attributes: {vmid: 100, host: p}}\n"},
		{"bad port", "entities:\n  - {type: host, name: h, attributes: {lan_ipv4: 127.0.11.1, ssh_port: many}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := FromInventory([]byte(tc.yaml)); !errors.Is(err, ErrInventory) {
				t.Fatalf("want ErrInventory, got %v", err)
			}
		})
	}
}
