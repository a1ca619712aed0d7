package onboard

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/oikos-hq/oikos/shared/hostconnect"
)

func TestAddressAttribute(t *testing.T) {
	for ip, want := range map[string]string{
		"192.168.1.10": "lan_ipv4", "10.0.0.2": "lan_ipv4", "172.16.5.1": "lan_ipv4", "127.0.10.1": "lan_ipv4",
		"100.64.0.7": "mesh_ipv4", "100.127.255.1": "mesh_ipv4", "203.0.113.9": "public_ipv4", "100.128.0.1": "public_ipv4",
	} {
		if got := addressAttribute(netip.MustParseAddr(ip)); got != want {
			t.Errorf("%s: %s, want %s", ip, got, want)
		}
	}
}

func TestGuestName(t *testing.T) {
	taken := map[string]bool{"lxc:debian": true, "lxc:web": true, "lxc:web-400": true, "vm:vm-500": true}
	for _, c := range []struct {
		g    missingGuest
		want string
	}{
		{missingGuest{Kind: "lxc", VMID: 101, Name: "jellyfin"}, "jellyfin"},
		{missingGuest{Kind: "lxc", VMID: 102, Name: "x", Config: &guestConfig{Hostname: "Sonarr"}}, "sonarr"},
		{missingGuest{Kind: "vm", VMID: 100, Name: "VM 100"}, "vm-100"},
		{missingGuest{Kind: "vm", VMID: 200, Name: ""}, "vm-200"},
		{missingGuest{Kind: "lxc", VMID: 300, Name: "???"}, "ct-300"},
		{missingGuest{Kind: "lxc", VMID: 301, Name: "debian"}, "debian-301"},
		{missingGuest{Kind: "vm", VMID: 302, Name: "debian"}, "debian"},
		{missingGuest{Kind: "lxc", VMID: 400, Name: "web"}, "web-400-2"},
		{missingGuest{Kind: "vm", VMID: 500, Name: ""}, "vm-500-500"},
	} {
		if got := guestName(c.g, taken); got != c.want {
			t.Errorf("%+v: %q, want %q", c.g, got, c.want)
		}
	}
}

func TestFactAttributes(t *testing.T) {
	f := hostconnect.Facts{Hostname: "pve", OS: "linux", Arch: "amd64", Cores: 8, MemoryMB: 32000, PVEVersion: "8.3.0", Kernel: "6.8"}
	want := map[string]any{"hostname": "pve", "node": "pve", "os": "linux", "arch": "amd64", "cores": 8, "memory_mb": 32000,
		"pve_version": "8.3.0"}
	if got := factAttributes(f, true); !reflect.DeepEqual(got, want) {
		t.Errorf("proxmox: %v", got)
	}
	// What the ontology would refuse is left out; a plain host has no node or pve_version.
	got := factAttributes(hostconnect.Facts{Hostname: "nas", OS: "freebsd", Arch: "riscv64", PVEVersion: "8"}, false)
	if !reflect.DeepEqual(got, map[string]any{"hostname": "nas"}) {
		t.Errorf("plain host: %v", got)
	}
}
