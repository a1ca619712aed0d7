package proxmox

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// This file is pvesm status and pvesm list (pve-storage's CLI/pvesm.pm printers) and the
// storage figures pvesh shows under /nodes/N/storage.

// storage is one storage of a node with its figures in bytes.
type storage struct {
	ID, Type, Content  string
	Total, Used, Avail int64
}

// nodeStorages are the storages every simulated node has; usage grows with its guests'
// disks. The caller holds the lock.
func nodeStorages(h *lab.Host) []storage {
	var guestDisk int64
	for _, g := range h.Guests {
		guestDisk += int64(positiveOr(g.Cfg.DiskGB, 8)) << 30
	}
	const gib = int64(1) << 30
	local := storage{ID: "local", Type: "dir", Content: "backup,iso,vztmpl", Total: 94 * gib, Used: 11*gib + 734<<20}
	lvm := storage{ID: "local-lvm", Type: "lvmthin", Content: "images,rootdir", Total: 832 * gib, Used: guestDisk / 3}
	zfs := storage{ID: "local-zfs", Type: "zfspool", Content: "images,rootdir", Total: 899 * gib, Used: 2*gib + 512<<20}
	out := []storage{local, lvm, zfs}
	for i := range out {
		out[i].Avail = out[i].Total - out[i].Used
	}
	return out
}

var pvesmUsage = []string{
	"pvesm add <type> <storage> [OPTIONS]",
	"pvesm alloc <storage> <vmid> <filename> <size> [OPTIONS]",
	"pvesm apiinfo",
	"pvesm free <volume> [OPTIONS]",
	"pvesm list <storage> [OPTIONS]",
	"pvesm path <volume>",
	"pvesm remove <storage>",
	"pvesm scan cifs <server> [OPTIONS]",
	"pvesm scan nfs <server>",
	"pvesm set <storage> [OPTIONS]",
	"pvesm status  [OPTIONS]",
	"pvesm help [<extra-args>] [OPTIONS]",
}

func (pt *Tools) pvesm(_ context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 2 {
		return noCommand(inv, "pvesm")
	}
	pt.lab.Mu.Lock()
	defer pt.lab.Mu.Unlock()
	h := pt.lab.Host(host)
	a := parsePVEArgs(inv.Args[2:], nil)
	switch inv.Args[1] {
	case "status":
		st := nodeStorages(h)
		if id, ok := a.opts["storage"]; ok {
			if !storages[id] {
				fmt.Fprintf(inv.Stderr, "storage '%s' does not exist\n", id)
				return exitPVE
			}
			for _, s := range st {
				if s.ID == id {
					st = []storage{s}
				}
			}
		}
		io.WriteString(inv.Stdout, formatPvesmStatus(st))
		return 0
	case "list":
		if len(a.pos) == 0 {
			fmt.Fprint(inv.Stderr, "400 not enough arguments\npvesm list <storage> [OPTIONS]\n")
			return exitPVE
		}
		id := a.pos[0]
		if !storages[id] {
			fmt.Fprintf(inv.Stderr, "storage '%s' does not exist\n", id)
			return exitPVE
		}
		io.WriteString(inv.Stdout, formatPvesmList(pt.volumes(h, id)))
		return 0
	case "help":
		io.WriteString(inv.Stdout, usageList("pvesm", pvesmUsage))
		return 0
	}
	return unknownCommand(inv, "pvesm", inv.Args[1])
}

// volume is one line of pvesm list.
type volume struct {
	Volid, Format, Content string
	Size                   int64
	VMID                   int
}

// volumes lists what storage id holds on h: templates on local, guest disks where the
// guests live. The caller holds the lock.
func (pt *Tools) volumes(h *lab.Host, id string) []volume {
	var out []volume
	if id == "local" {
		for _, t := range pt.templates {
			if strings.HasPrefix(t.Volid, "local:") {
				out = append(out, volume{Volid: t.Volid, Format: "tzst", Content: "vztmpl", Size: int64(t.SizeMB * 1024 * 1024)})
			}
		}
	}
	for _, g := range h.SortedGuests() {
		if g.Storage != id {
			continue
		}
		content, size := "rootdir", int64(positiveOr(g.Cfg.DiskGB, 8))<<30
		if g.Cfg.Kind == fleet.GuestVM {
			content, size = "images", int64(vmDiskGB(g))<<30
		}
		out = append(out, volume{Volid: fmt.Sprintf("%s:vm-%d-disk-0", id, g.Cfg.VMID), Format: "raw", Content: content, Size: size, VMID: g.Cfg.VMID})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volid < out[j].Volid })
	return out
}

// formatPvesmStatus prints pvesm status: the name column as wide as the longest id plus
// one, then %10s %10s %15s %15s %15s and the use in percent with two decimals; sizes in KiB.
func formatPvesmStatus(st []storage) string {
	maxlen := 0
	for _, s := range st {
		maxlen = max(maxlen, len(s.ID))
	}
	maxlen++
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s %10s %10s %15s %15s %15s %8s\n", maxlen, "Name", "Type", "Status", "Total (KiB)", "Used (KiB)", "Available (KiB)", "%")
	sort.Slice(st, func(i, j int) bool { return st[i].ID < st[j].ID })
	for _, s := range st {
		per := 0.0
		if s.Total > 0 {
			per = float64(s.Used) * 100 / float64(s.Total)
		}
		fmt.Fprintf(&b, "%-*s %10s %10s %15d %15d %15d % 7.2f%%\n", maxlen, s.ID, s.Type, "active", s.Total/1024, s.Used/1024, s.Avail/1024, per)
	}
	return b.String()
}

// formatPvesmList prints pvesm list: "%-{longest volid}s %-7s %-9s %{digits of the
// largest size}s" with the VMID after the guests' volumes; volumes without a vmid follow.
func formatPvesmList(vols []volume) string {
	maxname, maxsize := 0, int64(0)
	for _, v := range vols {
		maxname = max(maxname, len(v.Volid))
		maxsize = max(maxsize, v.Size)
	}
	digits := len(fmt.Sprint(maxsize))
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s %-7s %-9s %*s %s\n", maxname, "Volid", "Format", "Type", digits, "Size", "VMID")
	for _, v := range vols {
		if v.VMID != 0 {
			fmt.Fprintf(&b, "%-*s %-7s %-9s %*d %d\n", maxname, v.Volid, v.Format, v.Content, digits, v.Size, v.VMID)
		}
	}
	for _, v := range vols {
		if v.VMID == 0 {
			fmt.Fprintf(&b, "%-*s %-7s %-9s %*d\n", maxname, v.Volid, v.Format, v.Content, digits, v.Size)
		}
	}
	return b.String()
}
