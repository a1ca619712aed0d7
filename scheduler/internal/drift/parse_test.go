package drift

import (
	"fmt"
	"reflect"
	"testing"
)

func TestParsePctList(t *testing.T) {
	t.Parallel()
	row := func(vmid, status, lock, name string) string {
		return fmt.Sprintf("%-10s %-10s %-12s %-20s\n", vmid, status, lock, name)
	}
	tests := []struct {
		name string
		out  string
		want []LiveGuest
		bad  bool
	}{
		{name: "no containers prints nothing", out: "", want: nil},
		{name: "rows with trailing spaces and an empty lock",
			out: row("VMID", "Status", "Lock", "Name") + row("100", "running", "", "pihole") + row("101", "stopped", "backup", "dns") +
				row("9999", "running", "", "CT9999"),
			want: []LiveGuest{
				{Kind: "lxc", VMID: 100, Status: "running", Name: "pihole"},
				{Kind: "lxc", VMID: 101, Status: "stopped", Lock: "backup", Name: "dns"},
				{Kind: "lxc", VMID: 9999, Status: "running", Name: "CT9999"},
			}},
		{name: "a name longer than its column", out: row("VMID", "Status", "Lock", "Name") +
			row("102", "running", "", "a-very-long-container-hostname-indeed"),
			want: []LiveGuest{{Kind: "lxc", VMID: 102, Status: "running", Name: "a-very-long-container-hostname-indeed"}}},
		{name: "not pct list", out: "hello world\n1 2 3\n", bad: true},
		{name: "bad vmid", out: row("VMID", "Status", "Lock", "Name") + row("x", "running", "", "a"), bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePctList(tc.out)
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseQmList(t *testing.T) {
	t.Parallel()
	row := func(vmid, name, status, mem, disk, pid string) string {
		return fmt.Sprintf("%10s %-20s %-10s %-10s %12s %-10s\n", vmid, name, status, mem, disk, pid)
	}
	header := row("VMID", "NAME", "STATUS", "MEM(MB)", "BOOTDISK(GB)", "PID")
	tests := []struct {
		name string
		out  string
		want []LiveGuest
		bad  bool
	}{
		{name: "no vms prints nothing", out: "", want: nil},
		{name: "default name with a space, long name pushing columns, stopped pid 0",
			out: header + row("100", "web", "running", "2048", "32.00", "1234") +
				row("101", "VM 101", "stopped", "512", "0.00", "0") +
				row("9300", "jammy-server-cloudimg-amd64", "stopped", "4096", "0.00", "0"),
			want: []LiveGuest{
				{Kind: "vm", VMID: 100, Name: "web", Status: "running"},
				{Kind: "vm", VMID: 101, Name: "VM 101", Status: "stopped"},
				{Kind: "vm", VMID: 9300, Name: "jammy-server-cloudimg-amd64", Status: "stopped"},
			}},
		{name: "wrong header", out: "VMID Status Lock Name\n100 running  x\n", bad: true},
		{name: "short row", out: header + "100 web running\n", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseQmList(tc.out)
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseGuestConfig(t *testing.T) {
	lxc := `arch: amd64
cores: 4
features: nesting=1
hostname: jellyfin
memory: 4096
net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:65,ip=dhcp,type=veth
onboot: 1
ostype: debian
rootfs: local-lvm:vm-101-disk-0,size=16G
swap: 512
tags: media;prod
unprivileged: 1

[before-upgrade]
cores: 2
`
	got := ParseGuestConfig("lxc", lxc)
	want := GuestConfig{Hostname: "jellyfin", Cores: 4, MemoryMB: 4096, SwapMB: 512, DiskGB: 16, Storage: "local-lvm",
		OSType: "debian", OnBoot: true, Tags: []string{"media", "prod"}, Unprivileged: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lxc:\n got %+v\nwant %+v", got, want)
	}
	vm := `agent: 1,fstrim_cloned_disks=1
boot: order=scsi0;net0
cores: 2
ide2: local:iso/debian-12.iso,media=cdrom,size=628M
memory: 8192
name: home-assistant
ostype: l26
scsi0: local-zfs:vm-200-disk-0,iothread=1,size=1T
`
	got = ParseGuestConfig("vm", vm)
	want = GuestConfig{Hostname: "home-assistant", Cores: 2, MemoryMB: 8192, DiskGB: 1024, Storage: "local-zfs", OSType: "l26",
		GuestAgent: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("vm:\n got %+v\nwant %+v", got, want)
	}
	if c := ParseGuestConfig("vm", "scsi0: local:vm-1-disk-0,size=512M\n"); c.DiskGB != 1 {
		t.Errorf("512M = %d GiB, want 1 (rounded up)", c.DiskGB)
	}
}
