package storage

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// mnt is one line of the mount table.
type mnt struct {
	source, target, fstype, options string
	sizeKB, usedKB                  int64
}

// table is the machine's mount table in /proc/mounts order: df's file systems plus the
// kernel's pseudo file systems.
func (t Tools) table() []mnt {
	var out []mnt
	pseudo := func(src, target, fstype, opts string) {
		out = append(out, mnt{source: src, target: target, fstype: fstype, options: opts})
	}
	lxc := t.M.Role() == state.LXC
	mounts := t.M.Mounts()
	byTarget := map[string]state.Mount{}
	for _, m := range mounts {
		byTarget[m.Target] = m
	}
	add := func(m state.Mount) {
		opts := "rw,nosuid,nodev,relatime"
		switch {
		case m.Target == "/" && lxc:
			opts = "rw,relatime"
		case m.Target == "/":
			opts = "rw,relatime,errors=remount-ro"
		case m.FSType == "tmpfs" && m.Target == "/run":
			opts = fmt.Sprintf("rw,nosuid,nodev,noexec,relatime,size=%dk,mode=755,inode64", m.SizeKB)
		case m.FSType == "tmpfs" && m.Target == "/run/lock":
			opts = "rw,nosuid,nodev,noexec,relatime,size=5120k,inode64"
		case m.FSType == "tmpfs":
			opts = "rw,nosuid,nodev,inode64"
		case m.FSType == "devtmpfs":
			opts = fmt.Sprintf("rw,nosuid,relatime,size=%dk,nr_inodes=%d,mode=755,inode64", m.SizeKB, m.SizeKB/4)
		case m.FSType == "vfat":
			opts = "rw,relatime,fmask=0022,dmask=0022,codepage=437,iocharset=iso8859-1,shortname=mixed,errors=remount-ro"
		case m.FSType == "fuse":
			opts = "rw,nosuid,nodev,relatime,user_id=0,group_id=0,default_permissions,allow_other"
		}
		fstype := m.FSType
		if fstype == "fuse" {
			fstype = "fuse"
		}
		out = append(out, mnt{source: m.Source, target: m.Target, fstype: fstype, options: opts, sizeKB: m.SizeKB, usedKB: m.UsedKB})
	}
	if r, ok := byTarget["/"]; ok {
		add(r)
	}
	if lxc {
		pseudo("none", "/dev", "tmpfs", "rw,relatime,size=492k,mode=755,uid=100000,gid=100000,inode64")
		pseudo("proc", "/proc", "proc", "rw,nosuid,nodev,noexec,relatime")
		pseudo("sysfs", "/sys", "sysfs", "ro,nosuid,nodev,noexec,relatime")
		pseudo("devpts", "/dev/pts", "devpts", "rw,nosuid,noexec,relatime,gid=100005,mode=620,ptmxmode=666,max=1026")
	} else {
		pseudo("sysfs", "/sys", "sysfs", "rw,nosuid,nodev,noexec,relatime")
		pseudo("proc", "/proc", "proc", "rw,nosuid,nodev,noexec,relatime")
		if d, ok := byTarget["/dev"]; ok {
			add(d)
		}
		pseudo("devpts", "/dev/pts", "devpts", "rw,nosuid,noexec,relatime,gid=5,mode=620,ptmxmode=000")
		pseudo("securityfs", "/sys/kernel/security", "securityfs", "rw,nosuid,nodev,noexec,relatime")
		pseudo("cgroup2", "/sys/fs/cgroup", "cgroup2", "rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot")
	}
	names := make([]string, 0, len(byTarget))
	for target := range byTarget {
		if target != "/" && !(target == "/dev" && !lxc) && !(lxc && target == "/dev") {
			names = append(names, target)
		}
	}
	sort.SliceStable(names, func(i, j int) bool {
		return strings.Count(names[i], "/") < strings.Count(names[j], "/") || (strings.Count(names[i], "/") == strings.Count(names[j], "/") && names[i] < names[j])
	})
	for _, n := range names {
		add(byTarget[n])
	}
	for _, p := range t.M.ZFSPools() {
		out = append(out, mnt{source: p, target: "/" + p, fstype: "zfs", options: "rw,relatime,xattr,noacl,casesensitive"})
	}
	return out
}

// ProcMounts is the text of /proc/mounts.
func (t Tools) ProcMounts() string {
	var b strings.Builder
	for _, m := range t.table() {
		fmt.Fprintf(&b, "%s %s %s %s 0 0\n", m.source, m.target, m.fstype, m.options)
	}
	return b.String()
}

func (t Tools) mount(_ context.Context, inv *shell.Invocation) int {
	o, ok := getopt(inv, inv.Args[1:], map[string]string{"types": "t=", "all": "a", "verbose": "v", "read-only": "r",
		"options": "o=", "show-labels": "l", "fake": "f", "bind": "B", "help": "h"})
	if !ok {
		return 1
	}
	if len(o.args) == 0 && !o.has("all") {
		types := strings.Split(o.vals["types"], ",")
		for _, m := range t.table() {
			if o.vals["types"] != "" && !contains(types, m.fstype) {
				continue
			}
			fmt.Fprintf(inv.Stdout, "%s on %s type %s (%s)\n", m.source, m.target, m.fstype, m.options)
		}
		return 0
	}
	if o.has("all") {
		return 0 // everything in /etc/fstab is mounted already
	}
	target := o.args[len(o.args)-1]
	if len(o.args) == 1 {
		fmt.Fprintf(inv.Stderr, "mount: %s: can't find in /etc/fstab.\n", target)
		return 1
	}
	fmt.Fprintf(inv.Stderr, "mount: %s: special device %s does not exist.\n", target, o.args[0])
	return 32
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var findmntCols = map[string]bool{"TARGET": true, "SOURCE": true, "FSTYPE": true, "OPTIONS": true, "SIZE": true, "USED": true,
	"AVAIL": true, "USE%": true, "FSROOT": true, "UUID": true, "LABEL": true, "VFS-OPTIONS": true, "FS-OPTIONS": true}

func (t Tools) findmnt(_ context.Context, inv *shell.Invocation) int {
	o, ok := getopt(inv, inv.Args[1:], map[string]string{"list": "l", "noheadings": "n", "output": "o=", "types": "t=",
		"df": "D", "json": "J", "raw": "r", "real": "", "pseudo": "", "source": "S=", "target": "T=", "first-only": "f",
		"kernel": "k", "mountpoint": "M=", "nofsroot": "v", "ascii": "a", "uniq": "u", "fstab": "s", "evaluate": "e",
		"canonicalize": "c", "pairs": "P", "bytes": "b", "submounts": "R", "help": "h"})
	if !ok {
		return 1
	}
	cols := []string{"TARGET", "SOURCE", "FSTYPE", "OPTIONS"}
	if o.has("df") {
		cols = []string{"SOURCE", "FSTYPE", "SIZE", "USED", "AVAIL", "USE%", "TARGET"}
	}
	if v, ok := o.vals["output"]; ok {
		cols = nil
		for _, c := range strings.Split(v, ",") {
			c = strings.ToUpper(c)
			if !findmntCols[c] {
				fmt.Fprintf(inv.Stderr, "findmnt: unknown column: %s\n", c)
				return 1
			}
			cols = append(cols, c)
		}
	}
	ms := t.table()
	if ty := o.vals["types"]; ty != "" {
		types := strings.Split(ty, ",")
		var kept []mnt
		for _, m := range ms {
			if contains(types, m.fstype) != strings.HasPrefix(ty, "no") {
				kept = append(kept, m)
			}
		}
		ms = kept
	}
	if o.has("real") || o.has("df") {
		var kept []mnt
		for _, m := range ms {
			if m.sizeKB > 0 || m.fstype == "zfs" {
				kept = append(kept, m)
			}
		}
		ms = kept
	}
	want := append([]string(nil), o.args...)
	for _, k := range []string{"source", "target", "mountpoint"} {
		if v, ok := o.vals[k]; ok {
			want = append(want, v)
		}
	}
	list := o.has("list") || o.has("raw") || o.has("df") || o.has("pairs") || len(want) > 0 || o.vals["types"] != ""
	if len(want) > 0 {
		var kept []mnt
		for _, m := range ms {
			for _, w := range want {
				if m.target == w || m.source == w {
					kept = append(kept, m)
					break
				}
			}
		}
		if len(kept) == 0 {
			return 1
		}
		ms = kept
	}
	cell := func(m mnt, c string) string {
		free := m.sizeKB - m.usedKB
		if m.fstype == "ext4" {
			free -= m.sizeKB / 20
		}
		switch c {
		case "TARGET":
			return m.target
		case "SOURCE":
			return m.source
		case "FSTYPE":
			return m.fstype
		case "OPTIONS", "VFS-OPTIONS":
			return m.options
		case "FS-OPTIONS":
			return "rw"
		case "FSROOT":
			return "/"
		case "SIZE":
			return sizeOrBytes(m.sizeKB, o.has("bytes"))
		case "USED":
			return sizeOrBytes(m.usedKB, o.has("bytes"))
		case "AVAIL":
			return sizeOrBytes(max(free, 0), o.has("bytes"))
		case "USE%":
			if m.sizeKB == 0 {
				return "-"
			}
			return strconv.Itoa(int(float64(m.usedKB)*100/float64(m.sizeKB)+0.999)) + "%"
		}
		return ""
	}
	if o.has("json") {
		fmt.Fprintln(inv.Stdout, "{\n   \"filesystems\": [")
		for i, m := range ms {
			var f []string
			for _, c := range cols {
				f = append(f, fmt.Sprintf("         %q: %q", strings.ToLower(c), cell(m, c)))
			}
			end := ","
			if i == len(ms)-1 {
				end = ""
			}
			fmt.Fprintf(inv.Stdout, "      {\n%s\n      }%s\n", strings.Join(f, ",\n"), end)
		}
		fmt.Fprintln(inv.Stdout, "   ]\n}")
		return 0
	}
	if !list {
		ms = dfsOrder(ms)
	}
	var rows [][]string
	for _, m := range ms {
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = cell(m, c)
		}
		if !list && len(cols) > 0 && cols[0] == "TARGET" && m.target != "/" {
			row[0] = treePrefix(ms, m) + row[0]
		}
		rows = append(rows, row)
	}
	if o.has("raw") {
		for _, r := range rows {
			fmt.Fprintln(inv.Stdout, strings.Join(r, " "))
		}
		return 0
	}
	right := map[string]bool{"SIZE": true, "USED": true, "AVAIL": true, "USE%": true}
	writeTable(inv, cols, rows, !o.has("noheadings"), func(c string) bool { return right[c] }, "")
	return 0
}

func sizeOrBytes(kb int64, bytes bool) string {
	if bytes {
		return strconv.FormatInt(kb*1024, 10)
	}
	return Human(kb * 1024)
}

// parentOf is the mount a target is mounted under.
func parentOf(ms []mnt, target string) string {
	best := ""
	for _, m := range ms {
		if m.target != target && (m.target == "/" || strings.HasPrefix(target, m.target+"/")) && len(m.target) > len(best) {
			best = m.target
		}
	}
	return best
}

// treePrefix draws findmnt's tree for m: one level per ancestor below /.
func treePrefix(ms []mnt, m mnt) string {
	var chain []string
	for p := parentOf(ms, m.target); p != "" && p != "/"; p = parentOf(ms, p) {
		chain = append([]string{p}, chain...)
	}
	isLast := func(target string) bool {
		parent := parentOf(ms, target)
		last := ""
		for _, x := range ms {
			if parentOf(ms, x.target) == parent && x.target != "/" {
				last = x.target
			}
		}
		return last == target
	}
	var b strings.Builder
	for _, anc := range chain {
		if isLast(anc) {
			b.WriteString("  ")
		} else {
			b.WriteString("│ ")
		}
	}
	if isLast(m.target) {
		b.WriteString("└─")
	} else {
		b.WriteString("├─")
	}
	return b.String()
}

// dfsOrder puts every mount right after its parent, children in table order, as findmnt's
// tree shows them.
func dfsOrder(ms []mnt) []mnt {
	var out []mnt
	var walk func(parent string)
	walk = func(parent string) {
		for _, m := range ms {
			if m.target != "/" && parentOf(ms, m.target) == parent {
				out = append(out, m)
				walk(m.target)
			}
		}
	}
	for _, m := range ms {
		if m.target == "/" {
			out = append(out, m)
		}
	}
	walk("/")
	return out
}
