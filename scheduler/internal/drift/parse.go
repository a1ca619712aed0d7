package drift

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// LiveGuest is one guest a Proxmox host reports.
type LiveGuest struct {
	Kind   string `json:"kind"` // lxc or vm
	VMID   int    `json:"vmid"`
	Name   string `json:"name"`
	Status string `json:"status"`
	Lock   string `json:"lock,omitempty"`
}

// ParsePctList reads `pct list`: a header `VMID Status Lock Name` printed with
// "%-10s %-10s %-12s %-20s", one row per container. The Lock column is blank-padded when
// empty, so columns are cut at the header's positions rather than split on whitespace. No
// containers prints nothing at all (not even the header).
func ParsePctList(out string) ([]LiveGuest, error) {
	lines := nonEmptyLines(out)
	if len(lines) == 0 {
		return nil, nil
	}
	header := lines[0]
	statusAt := strings.Index(header, "Status")
	lockAt := strings.Index(header, "Lock")
	nameAt := strings.Index(header, "Name")
	if !strings.HasPrefix(strings.TrimSpace(header), "VMID") || statusAt < 0 || lockAt < statusAt || nameAt < lockAt {
		return nil, fmt.Errorf("pct list: unexpected header %q", header)
	}
	var out2 []LiveGuest
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 2 {
			return nil, fmt.Errorf("pct list: short row %q", l)
		}
		vmid, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("pct list: vmid %q is not a number", f[0])
		}
		g := LiveGuest{Kind: "lxc", VMID: vmid, Status: f[1]}
		// Lock and Name by column; a value wider than its column pushes the rest right,
		// which only a Status or Lock longer than its width could do — fall back to fields.
		if len(l) > nameAt && strings.TrimSpace(l[statusAt:min(lockAt, len(l))]) == f[1] {
			g.Lock = strings.TrimSpace(l[lockAt:nameAt])
			g.Name = strings.TrimSpace(l[nameAt:])
		} else {
			switch len(f) {
			case 3:
				g.Name = f[2]
			default:
				if len(f) >= 4 {
					g.Lock, g.Name = f[2], strings.Join(f[3:], " ")
				}
			}
		}
		if strings.Contains(g.Lock, " ") {
			// A lock never contains a space; this row did not line up with the header.
			return nil, fmt.Errorf("pct list: cannot split row %q", l)
		}
		out2 = append(out2, g)
	}
	return out2, nil
}

// ParseQmList reads `qm list`: header `VMID NAME STATUS MEM(MB) BOOTDISK(GB) PID` with the
// VMID right-aligned. A name may contain spaces (the default "VM 100") and a long one pushes
// the later columns right, so the row is read from both ends: the VMID first, then the
// four fixed columns from the right, and the name is what lies between.
func ParseQmList(out string) ([]LiveGuest, error) {
	lines := nonEmptyLines(out)
	if len(lines) == 0 {
		return nil, nil
	}
	if h := strings.Fields(lines[0]); len(h) < 6 || h[0] != "VMID" || h[1] != "NAME" {
		return nil, fmt.Errorf("qm list: unexpected header %q", lines[0])
	}
	var guests []LiveGuest
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 6 {
			return nil, fmt.Errorf("qm list: short row %q", l)
		}
		vmid, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("qm list: vmid %q is not a number", f[0])
		}
		n := len(f)
		if _, err := strconv.Atoi(f[n-1]); err != nil {
			return nil, fmt.Errorf("qm list: pid %q is not a number in %q", f[n-1], l)
		}
		guests = append(guests, LiveGuest{Kind: "vm", VMID: vmid, Status: f[n-4], Name: strings.Join(f[1:n-4], " ")})
	}
	return guests, nil
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// GuestConfig is what `pct config VMID` / `qm config VMID` say about a guest, in the graph's
// attribute names (seeds/ontology.yaml, guest), so adopting it is a copy. Zero values were not
// in the config.
type GuestConfig struct {
	Hostname     string   `json:"hostname,omitempty"`
	Cores        int      `json:"cores,omitempty"`
	MemoryMB     int      `json:"memory_mb,omitempty"`
	SwapMB       int      `json:"swap_mb,omitempty"`
	DiskGB       int      `json:"disk_gb,omitempty"`
	Storage      string   `json:"storage,omitempty"`
	OSType       string   `json:"ostype,omitempty"`
	OnBoot       bool     `json:"onboot"`
	Tags         []string `json:"tags,omitempty"`
	Unprivileged bool     `json:"unprivileged,omitempty"`
	GuestAgent   bool     `json:"qemu_guest_agent,omitempty"`
}

// ParseGuestConfig reads the "key: value" lines of pct config (kind lxc) or qm config (vm).
// Snapshot sections ("[name]") end the current configuration. A disk's size is read from the
// root disk (rootfs for a container; the first of scsi0, virtio0, sata0, ide0 that is not a
// CD-ROM for a VM) in G, with T and M converted.
func ParseGuestConfig(kind, out string) GuestConfig {
	kv := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			break
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	var c GuestConfig
	num := func(k string) int { n, _ := strconv.Atoi(kv[k]); return n }
	c.Cores, c.MemoryMB, c.SwapMB, c.OSType = num("cores"), num("memory"), num("swap"), kv["ostype"]
	c.OnBoot = kv["onboot"] == "1"
	c.Unprivileged = kv["unprivileged"] == "1"
	if tags := kv["tags"]; tags != "" {
		c.Tags = append(c.Tags, strings.FieldsFunc(tags, func(r rune) bool { return r == ';' || r == ',' || r == ' ' })...)
	}
	disk := ""
	if kind == "lxc" {
		c.Hostname, disk = kv["hostname"], kv["rootfs"]
	} else {
		c.Hostname = kv["name"]
		a, _, _ := strings.Cut(kv["agent"], ",")
		c.GuestAgent = a == "1" || strings.Contains(kv["agent"], "enabled=1")
		for _, k := range []string{"scsi0", "virtio0", "sata0", "ide0"} {
			if v := kv[k]; v != "" && !strings.Contains(v, "media=cdrom") {
				disk = v
				break
			}
		}
	}
	if disk != "" {
		vol, opts, _ := strings.Cut(disk, ",")
		c.Storage, _, _ = strings.Cut(vol, ":")
		for _, o := range strings.Split(opts, ",") {
			if size, ok := strings.CutPrefix(o, "size="); ok {
				c.DiskGB = sizeGB(size)
			}
		}
	}
	return c
}

// sizeGB reads a Proxmox size (32G, 1T, 512M) in whole GiB, rounding up.
func sizeGB(s string) int {
	if s == "" {
		return 0
	}
	unit := s[len(s)-1]
	n, err := strconv.ParseFloat(strings.TrimRight(s, "KMGTkmgt"), 64)
	if err != nil {
		return 0
	}
	switch unit {
	case 'T', 't':
		n *= 1024
	case 'M', 'm':
		n /= 1024
	case 'K', 'k':
		n /= 1024 * 1024
	}
	return int(math.Ceil(n))
}
