// Package storage simulates what a machine reports about its disks and file systems:
// lsblk, findmnt, mount, /proc/mounts, the LVM reports (pvs, vgs, lvs) of a Proxmox node,
// zfs and zpool where the machine has ZFS pools, and smartctl on hosts with real disks. The
// layout follows the machine's role (a Proxmox node's LVM-thin install, a Debian installer's
// partitions on a host or VM, a container's root volume) and its sizes agree with df.
// Formats follow lsblk(8), findmnt(8), mount(8), pvs(8)/vgs(8)/lvs(8), zfs-list(8),
// zpool-list(8), zpool-status(8) and smartctl(8).
package storage

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// Tools are the storage programs bound to one machine.
type Tools struct{ M state.Machine }

// Programs lists the machine's storage programs: which exist depends on its role and pools.
func (t Tools) Programs() shell.Registry {
	reg := shell.Registry{"lsblk": t.lsblk, "findmnt": t.findmnt, "mount": t.mount}
	switch t.M.Role() {
	case state.Proxmox:
		reg["pvs"], reg["vgs"], reg["lvs"] = t.lvm, t.lvm, t.lvm
		reg["smartctl"] = t.smartctl
	case state.Linux:
		reg["smartctl"] = t.smartctl
	}
	if len(t.M.ZFSPools()) > 0 && t.M.Role() != state.LXC {
		reg["zfs"], reg["zpool"] = t.zfs, t.zpool
	}
	return reg
}

// dev is one block device of lsblk's tree.
type dev struct {
	name, majmin, typ string
	size              int64 // bytes
	ro, rm            bool
	fstype, fsver     string
	label, uuid       string
	mount             string
	model, serial     string
	children          []*dev
}

const gib = int64(1) << 30

func (t Tools) rootMount() state.Mount {
	for _, m := range t.M.Mounts() {
		if m.Target == "/" {
			return m
		}
	}
	return state.Mount{Source: "/dev/sda1", FSType: "ext4", Target: "/", SizeKB: int64(t.M.DiskGB()) << 20}
}

func uuid(seed string) string {
	var h uint64 = 1469598103934665603
	for _, c := range seed {
		h = (h ^ uint64(c)) * 1099511628211
	}
	g := h * 2654435761
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", uint32(h>>32), uint16(h>>16), uint16(h), uint16(g>>48), g&0xffffffffffff)
}

// devices is the machine's block device tree.
func (t Tools) devices() []*dev {
	root := t.rootMount()
	rootSize := root.SizeKB * 1024
	host := t.M.Hostname()
	switch t.M.Role() {
	case state.Proxmox:
		swap, data := 8*gib, rootSize*7/2
		meta := data / 100
		p3 := rootSize + swap + data + 2*meta + 16*gib
		pool := func() *dev {
			return &dev{name: "pve-data-tpool", majmin: "252:4", typ: "lvm", size: data,
				children: []*dev{{name: "pve-data", majmin: "252:5", typ: "lvm", size: data, ro: true}}}
		}
		return []*dev{{
			name: "nvme0n1", majmin: "259:0", typ: "disk", size: p3 + gib + 1031168, model: "Samsung SSD 980 PRO 1TB", serial: "S5GXNF0R" + serialOf(host),
			children: []*dev{
				{name: "nvme0n1p1", majmin: "259:1", typ: "part", size: 1031168},
				{name: "nvme0n1p2", majmin: "259:2", typ: "part", size: gib, fstype: "vfat", fsver: "FAT32", uuid: strings.ToUpper(uuid(host + "efi")[:9]), mount: "/boot/efi"},
				{name: "nvme0n1p3", majmin: "259:3", typ: "part", size: p3, fstype: "LVM2_member", fsver: "LVM2 001", uuid: uuid(host + "pv"),
					children: []*dev{
						{name: "pve-swap", majmin: "252:0", typ: "lvm", size: swap, fstype: "swap", fsver: "1", uuid: uuid(host + "swap"), mount: "[SWAP]"},
						{name: "pve-root", majmin: "252:1", typ: "lvm", size: rootSize, fstype: "ext4", fsver: "1.0", uuid: uuid(host + "root"), mount: "/"},
						{name: "pve-data_tmeta", majmin: "252:2", typ: "lvm", size: meta, children: []*dev{pool()}},
						{name: "pve-data_tdata", majmin: "252:3", typ: "lvm", size: data, children: []*dev{pool()}},
					}},
			},
		}}
	case state.LXC:
		name := strings.TrimPrefix(root.Source, "/dev/mapper/")
		return []*dev{{name: name, majmin: "252:6", typ: "lvm", size: rootSize, fstype: "ext4", fsver: "1.0", uuid: uuid(host + "root"), mount: "/"}}
	case state.Darwin:
		return nil
	}
	swap := int64(975) << 20
	disk := &dev{name: "sda", majmin: "8:0", typ: "disk", size: rootSize + swap + 2<<20, model: "QEMU HARDDISK", serial: "drive-scsi0",
		children: []*dev{
			{name: "sda1", majmin: "8:1", typ: "part", size: rootSize, fstype: "ext4", fsver: "1.0", uuid: uuid(host + "root"), mount: "/"},
			{name: "sda2", majmin: "8:2", typ: "part", size: 1024},
			{name: "sda5", majmin: "8:5", typ: "part", size: swap, fstype: "swap", fsver: "1", uuid: uuid(host + "swap"), mount: "[SWAP]"},
		}}
	if t.M.Role() == state.Linux {
		disk.model, disk.serial = "WDC WDS500G2B0A-00SM50", "2108A4800"+serialOf(host)
		return []*dev{disk}
	}
	return []*dev{disk, {name: "sr0", majmin: "11:0", typ: "rom", size: gib, rm: true, model: "QEMU DVD-ROM", serial: "QM00003"}}
}

func serialOf(host string) string {
	var h uint32 = 2166136261
	for _, c := range host {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("%06d", h%1000000)
}

// Human renders bytes the way util-linux does (size_to_human_string): powers of 1024, one
// decimal unless it is zero ("476.9G", "1007K", "8G").
func Human(b int64) string {
	units := []string{"B", "K", "M", "G", "T", "P"}
	v := float64(b)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(b, 10) + "B"
	}
	r := math.Round(v*10) / 10
	if r == math.Trunc(r) {
		return fmt.Sprintf("%d%s", int64(r), units[i])
	}
	return fmt.Sprintf("%.1f%s", r, units[i])
}

// fsUse finds df's figures for a mounted device.
func (t Tools) fsUse(d *dev) (avail, pct string) {
	if d.mount == "" || d.mount == "[SWAP]" {
		return "", ""
	}
	for _, m := range t.M.Mounts() {
		if m.Target == d.mount {
			free := m.SizeKB - m.UsedKB
			if m.FSType == "ext4" {
				free -= m.SizeKB / 20
			}
			return Human(free * 1024), fmt.Sprintf("%d%%", int(math.Ceil(float64(m.UsedKB)*100/float64(m.SizeKB))))
		}
	}
	return "", ""
}

var lsblkCols = map[string]bool{"NAME": true, "KNAME": true, "PATH": true, "MAJ:MIN": true, "RM": true, "SIZE": true, "RO": true,
	"TYPE": true, "MOUNTPOINT": true, "MOUNTPOINTS": true, "FSTYPE": true, "FSVER": true, "LABEL": true, "UUID": true,
	"FSAVAIL": true, "FSUSE%": true, "MODEL": true, "SERIAL": true, "ROTA": true, "TRAN": true, "VENDOR": true}

func (t Tools) cell(d *dev, col string, bytes, fullPath bool) string {
	switch col {
	case "NAME", "KNAME":
		if fullPath {
			return devPath(d)
		}
		return d.name
	case "PATH":
		return devPath(d)
	case "MAJ:MIN":
		return d.majmin
	case "RM":
		return boolDigit(d.rm)
	case "RO":
		return boolDigit(d.ro)
	case "SIZE":
		if bytes {
			return strconv.FormatInt(d.size, 10)
		}
		return Human(d.size)
	case "TYPE":
		return d.typ
	case "MOUNTPOINT", "MOUNTPOINTS":
		return d.mount
	case "FSTYPE":
		return d.fstype
	case "FSVER":
		return d.fsver
	case "LABEL":
		return d.label
	case "UUID":
		return d.uuid
	case "FSAVAIL":
		a, _ := t.fsUse(d)
		return a
	case "FSUSE%":
		_, p := t.fsUse(d)
		return p
	case "MODEL":
		return d.model
	case "SERIAL":
		return d.serial
	case "ROTA":
		return "0"
	case "TRAN":
		if d.typ == "disk" && strings.HasPrefix(d.name, "nvme") {
			return "nvme"
		}
		if d.typ == "disk" {
			return "sata"
		}
		return ""
	case "VENDOR":
		if d.typ == "disk" && d.model == "QEMU HARDDISK" {
			return "QEMU    "
		}
		return ""
	}
	return ""
}

func devPath(d *dev) string {
	if d.typ == "lvm" {
		return "/dev/mapper/" + d.name
	}
	return "/dev/" + d.name
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (t Tools) lsblk(_ context.Context, inv *shell.Invocation) int {
	o, ok := getopt(inv, inv.Args[1:], map[string]string{"all": "a", "bytes": "b", "nodeps": "d", "fs": "f", "json": "J",
		"list": "l", "noheadings": "n", "output": "o=", "paths": "p", "pairs": "P", "raw": "r", "tree": "", "ascii": "i",
		"output-all": "O", "exclude": "e=", "include": "I=", "scsi": "S", "topology": "t", "perms": "m", "help": "h"})
	if !ok {
		return 1
	}
	cols := []string{"NAME", "MAJ:MIN", "RM", "SIZE", "RO", "TYPE", "MOUNTPOINTS"}
	if o.has("fs") {
		cols = []string{"NAME", "FSTYPE", "FSVER", "LABEL", "UUID", "FSAVAIL", "FSUSE%", "MOUNTPOINTS"}
	}
	if o.has("scsi") {
		cols = []string{"NAME", "HCTL", "TYPE", "VENDOR", "MODEL", "REV", "SERIAL", "TRAN"}
	}
	if v, ok := o.vals["output"]; ok {
		if strings.HasPrefix(v, "+") {
			v = strings.Join(cols, ",") + "," + v[1:]
		}
		cols = nil
		for _, c := range strings.Split(v, ",") {
			c = strings.ToUpper(strings.TrimSpace(c))
			if !lsblkCols[c] && c != "HCTL" && c != "REV" {
				fmt.Fprintf(inv.Stderr, "lsblk: unknown column: %s\n", c)
				return 1
			}
			cols = append(cols, c)
		}
	}
	devs := t.devices()
	if len(o.args) > 0 {
		var picked []*dev
		for _, a := range o.args {
			d := find(devs, a)
			if d == nil {
				fmt.Fprintf(inv.Stderr, "lsblk: %s: not a block device\n", a)
				return 32
			}
			picked = append(picked, d)
		}
		devs = picked
	}
	if o.has("scsi") {
		var disks []*dev
		for _, d := range devs {
			if d.typ == "disk" && !strings.HasPrefix(d.name, "nvme") || d.typ == "rom" {
				disks = append(disks, &dev{name: d.name, typ: d.typ, model: d.model, serial: d.serial})
			}
		}
		devs = disks
	}
	if o.has("nodeps") {
		flat := make([]*dev, len(devs))
		for i, d := range devs {
			c := *d
			c.children = nil
			flat[i] = &c
		}
		devs = flat
	}
	bytes, paths := o.has("bytes"), o.has("paths")
	if o.has("json") {
		t.lsblkJSON(inv, devs, cols, bytes, paths)
		return 0
	}
	var rows [][]string
	var walk func(ds []*dev, prefix string)
	list := o.has("list") || o.has("raw") || o.has("pairs")
	walk = func(ds []*dev, prefix string) {
		for i, d := range ds {
			row := make([]string, len(cols))
			for j, c := range cols {
				row[j] = t.cell(d, c, bytes, paths)
				if c == "HCTL" {
					row[j] = map[bool]string{true: "0:0:0:0", false: "1:0:0:0"}[d.typ == "disk"]
				}
				if c == "REV" {
					row[j] = "2.5+"
				}
			}
			branch, next := "", prefix
			if !list && prefix != "\x00" {
				if i == len(ds)-1 {
					branch, next = "└─", prefix+"  "
				} else {
					branch, next = "├─", prefix+"│ "
				}
			}
			if prefix == "\x00" {
				next = ""
				if list {
					next = "\x00"
				}
			} else if cols[0] == "NAME" || cols[0] == "KNAME" {
				row[0] = prefix + branch + row[0]
			}
			rows = append(rows, row)
			walk(d.children, next)
		}
	}
	walk(devs, "\x00")
	switch {
	case o.has("pairs"):
		for _, r := range rows {
			parts := make([]string, len(cols))
			for i, c := range cols {
				parts[i] = fmt.Sprintf("%s=%q", c, r[i])
			}
			fmt.Fprintln(inv.Stdout, strings.Join(parts, " "))
		}
	case o.has("raw"):
		if !o.has("noheadings") {
			fmt.Fprintln(inv.Stdout, strings.Join(cols, " "))
		}
		for _, r := range rows {
			fmt.Fprintln(inv.Stdout, strings.Join(r, " "))
		}
	default:
		right := map[string]bool{"RM": true, "SIZE": true, "RO": true, "FSAVAIL": true, "FSUSE%": true, "ROTA": true}
		writeTable(inv, cols, rows, !o.has("noheadings"), func(c string) bool { return right[c] }, "MAJ:MIN")
	}
	return 0
}

func find(devs []*dev, name string) *dev {
	for _, d := range devs {
		if d.name == name || devPath(d) == name || "/dev/"+d.name == name {
			return d
		}
		if c := find(d.children, name); c != nil {
			return c
		}
	}
	return nil
}

// writeTable aligns columns as libsmartcols does: one space between columns, numbers
// right-aligned, the last column unpadded, a MAJ:MIN column aligned on its colon.
func writeTable(inv *shell.Invocation, cols []string, rows [][]string, header bool, right func(string) bool, colon string) {
	widths := make([]int, len(cols))
	majW := 0
	for i, c := range cols {
		widths[i] = len(c)
		if c == colon {
			for _, r := range rows {
				maj, _, _ := strings.Cut(r[i], ":")
				majW = max(majW, len(maj))
			}
		}
	}
	for _, r := range rows {
		for i, c := range r {
			if cols[i] == colon {
				maj, min, _ := strings.Cut(c, ":")
				c = strings.Repeat(" ", majW-len(maj)) + maj + ":" + min
				r[i] = c
			}
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		for i, c := range r {
			pad := widths[i] - len([]rune(c))
			switch {
			case i == len(r)-1 && !right(cols[i]):
				b.WriteString(c)
			case right(cols[i]):
				b.WriteString(strings.Repeat(" ", pad) + c)
			default:
				b.WriteString(c + strings.Repeat(" ", pad))
			}
			if i < len(r)-1 {
				b.WriteByte(' ')
			}
		}
		fmt.Fprintln(inv.Stdout, strings.TrimRight(b.String(), " "))
	}
	if header {
		line(cols)
	}
	for _, r := range rows {
		line(r)
	}
}

func (t Tools) lsblkJSON(inv *shell.Invocation, devs []*dev, cols []string, bytes, paths bool) {
	var b strings.Builder
	var obj func(d *dev, ind string, last bool)
	obj = func(d *dev, ind string, last bool) {
		b.WriteString(ind + "{\n")
		in := ind + "   "
		var fields []string
		for _, c := range cols {
			key := strings.ToLower(c)
			v := t.cell(d, c, bytes, paths)
			switch c {
			case "RM", "RO", "ROTA":
				fields = append(fields, fmt.Sprintf("%s\"%s\": %t", in, key, v == "1"))
			case "SIZE":
				if bytes {
					fields = append(fields, fmt.Sprintf("%s\"%s\": %s", in, key, v))
				} else {
					fields = append(fields, fmt.Sprintf("%s\"%s\": %q", in, key, v))
				}
			case "MOUNTPOINTS":
				mp := "null"
				if v != "" {
					mp = strconv.Quote(v)
				}
				fields = append(fields, fmt.Sprintf("%s\"%s\": [\n%s    %s\n%s]", in, key, in, mp, in))
			default:
				if v == "" {
					fields = append(fields, fmt.Sprintf("%s\"%s\": null", in, key))
				} else {
					fields = append(fields, fmt.Sprintf("%s\"%s\": %q", in, key, v))
				}
			}
		}
		if len(d.children) > 0 {
			var cb strings.Builder
			cb.WriteString(in + "\"children\": [\n")
			saved := b
			b = strings.Builder{}
			for i, c := range d.children {
				obj(c, in+"   ", i == len(d.children)-1)
			}
			cb.WriteString(b.String())
			b = saved
			cb.WriteString(in + "]")
			fields = append(fields, cb.String())
		}
		b.WriteString(strings.Join(fields, ",\n") + "\n")
		if last {
			b.WriteString(ind + "}\n")
		} else {
			b.WriteString(ind + "},\n")
		}
	}
	b.WriteString("{\n   \"blockdevices\": [\n")
	for i, d := range devs {
		obj(d, "      ", i == len(devs)-1)
	}
	b.WriteString("   ]\n}\n")
	fmt.Fprint(inv.Stdout, b.String())
}
