package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// lvmSize renders LVM's sizes: two decimals, a lower-case unit, "<" when rounded up.
func lvmSize(b int64) string {
	units := []string{"b", "k", "m", "g", "t"}
	v := float64(b)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := fmt.Sprintf("%.2f%s", v, units[i])
	if fmt.Sprintf("%.2f", v) != fmt.Sprintf("%.2f", float64(int64(v*100))/100) {
		s = "<" + fmt.Sprintf("%.2f%s", float64(int64(v*100+1))/100, units[i])
	}
	return s
}

// lvm answers pvs, vgs and lvs for the node's "pve" volume group (lvm(8)).
func (t Tools) lvm(_ context.Context, inv *shell.Invocation) int {
	o, code := lvmOpts(inv)
	if code != 0 {
		return code
	}
	devs := t.devices()
	p3 := find(devs, "nvme0n1p3")
	if p3 == nil {
		fmt.Fprintln(inv.Stderr, "  No volume groups found.")
		return 5
	}
	var lvTotal int64
	for _, c := range p3.children {
		if c.name != "pve-data_tmeta" {
			lvTotal += c.size
		}
	}
	meta := find(devs, "pve-data_tmeta").size
	lvTotal += 2 * meta
	free := p3.size - lvTotal
	pool := find(devs, "pve-data-tpool")
	root, swap := find(devs, "pve-root"), find(devs, "pve-swap")
	var head []string
	var rows [][]string
	switch inv.Name() {
	case "pvs":
		head = []string{"PV", "VG", "Fmt", "Attr", "PSize", "PFree"}
		rows = [][]string{{"/dev/nvme0n1p3", "pve", "lvm2", "a--", lvmSize(p3.size), lvmSize(free)}}
	case "vgs":
		head = []string{"VG", "#PV", "#LV", "#SN", "Attr", "VSize", "VFree"}
		rows = [][]string{{"pve", "1", "3", "0", "wz--n-", lvmSize(p3.size), lvmSize(free)}}
	default:
		head = []string{"LV", "VG", "Attr", "LSize", "Pool", "Origin", "Data%", "Meta%", "Move", "Log", "Cpy%Sync", "Convert"}
		rows = [][]string{
			{"data", "pve", "twi-a-tz--", lvmSize(pool.size), "", "", "2.34", "0.25", "", "", "", ""},
			{"root", "pve", "-wi-ao----", lvmSize(root.size), "", "", "", "", "", "", "", ""},
			{"swap", "pve", "-wi-ao----", lvmSize(swap.size), "", "", "", "", "", "", "", ""},
		}
	}
	if o.units == "b" {
		for _, r := range rows {
			for i, c := range r {
				if strings.HasSuffix(c, "g") || strings.HasSuffix(c, "t") {
					r[i] = strings.TrimPrefix(c, "<")
				}
			}
		}
	}
	if o.sep != "" || o.noHead {
		if !o.noHead {
			fmt.Fprintln(inv.Stdout, "  "+strings.Join(head, o.sep))
		}
		for _, r := range rows {
			fmt.Fprintln(inv.Stdout, "  "+strings.Join(r, orDefault(o.sep, " ")))
		}
		return 0
	}
	right := map[string]bool{"PSize": true, "PFree": true, "VSize": true, "VFree": true, "LSize": true, "#PV": true, "#LV": true, "#SN": true}
	widths := make([]int, len(head))
	for i, h := range head {
		widths[i] = len(h)
		for _, r := range rows {
			widths[i] = max(widths[i], len(r[i]))
		}
	}
	for _, r := range append([][]string{head}, rows...) {
		var b strings.Builder
		b.WriteString(" ")
		for i, c := range r {
			b.WriteByte(' ')
			if right[head[i]] {
				b.WriteString(strings.Repeat(" ", widths[i]-len(c)) + c)
			} else {
				b.WriteString(c + strings.Repeat(" ", widths[i]-len(c)))
			}
		}
		fmt.Fprintln(inv.Stdout, strings.TrimRight(b.String(), " "))
	}
	return 0
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

type lvmOpt struct {
	noHead bool
	sep    string
	units  string
}

// lvmOpts reads the reporting options pvs/vgs/lvs share; LVM refuses others with its own words.
func lvmOpts(inv *shell.Invocation) (lvmOpt, int) {
	var o lvmOpt
	args := inv.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--noheadings":
			o.noHead = true
		case a == "--separator" && i+1 < len(args):
			i++
			o.sep = args[i]
		case a == "--units" && i+1 < len(args):
			i++
			o.units = args[i]
		case a == "-a" || a == "--all" || a == "-v" || a == "--nosuffix" || a == "-q" || a == "--reportformat" || a == "-o" || a == "--options" || a == "-O":
			if a == "--reportformat" || a == "-o" || a == "--options" || a == "-O" {
				i++
			}
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(inv.Stderr, "%s: unrecognized option '%s'\n  Error during parsing of command line.\n", inv.Name(), a)
			return o, 3
		case a == "pve" || a == "/dev/nvme0n1p3" || strings.HasPrefix(a, "pve/"):
		default:
			fmt.Fprintf(inv.Stderr, "  Volume group \"%s\" not found\n  Cannot process volume group %s\n", a, a)
			return o, 5
		}
	}
	return o, 0
}

// pool is one ZFS pool of the machine: a mirror of two 4 TB disks.
type pool struct {
	name              string
	size, alloc       int64
	disks             []string
	datasets          [][2]string // name, mountpoint
	usedFrac, refFrac []float64
}

func (t Tools) pools() []pool {
	var out []pool
	for i, p := range t.M.ZFSPools() {
		size := 3706 * gib // 3.62T
		alloc := int64(float64(size) * (0.18 + 0.07*float64(i)))
		out = append(out, pool{
			name: p, size: size, alloc: alloc,
			disks:    []string{fmt.Sprintf("ata-WDC_WD40EFZX-68AWUN0_WD-WX%02d1D80A%s", i*2, serialOf(p)), fmt.Sprintf("ata-WDC_WD40EFZX-68AWUN0_WD-WX%02d1D80A%s", i*2+1, serialOf(p+"b"))},
			datasets: [][2]string{{p, "/" + p}, {p + "/backups", "/" + p + "/backups"}, {p + "/media", "/" + p + "/media"}},
			usedFrac: []float64{1, 0.35, 0.65}, refFrac: []float64{0, 0.35, 0.65},
		})
	}
	return out
}

// zfsSize renders ZFS's sizes: three significant digits, an upper-case unit ("418G", "1.23T").
func zfsSize(b int64) string {
	units := []string{"B", "K", "M", "G", "T", "P"}
	v := float64(b)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%dB", b)
	case b%(int64(1)<<(10*i)) == 0:
		return fmt.Sprintf("%d%s", b>>(10*i), units[i])
	case v < 10:
		return fmt.Sprintf("%.2f%s", v, units[i])
	case v < 100:
		return fmt.Sprintf("%.1f%s", v, units[i])
	}
	return fmt.Sprintf("%.0f%s", v, units[i])
}

func (t Tools) zfs(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	if len(args) == 0 {
		fmt.Fprintln(inv.Stderr, "usage: zfs command args ...\nwhere 'command' is one of the following:\n\n\tversion\n\n\tcreate [-Pnpuv] [-o property=value] ... <filesystem>\n\tdestroy [-fnpRrv] <filesystem|volume>\n\n\tlist [-Hp] [-r|-d max] [-o property[,...]] [-s property]...\n\t    [-S property]... [-t type[,...]] [filesystem|volume|snapshot] ...")
		return 2
	}
	switch args[0] {
	case "version":
		fmt.Fprintln(inv.Stdout, "zfs-2.2.6-pve1\nzfs-kmod-2.2.6-pve1")
		return 0
	case "list":
	default:
		fmt.Fprintf(inv.Stderr, "unrecognized command '%s'\nusage: zfs command args ...\n", args[0])
		return 2
	}
	scripted, parsable := false, false
	cols := []string{"name", "used", "avail", "refer", "mountpoint"}
	var names []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" && i+1 < len(args):
			i++
			cols = strings.Split(args[i], ",")
		case a == "-t" || a == "-s" || a == "-S" || a == "-d":
			i++
		case strings.HasPrefix(a, "-") && strings.Trim(a[1:], "Hprd") == "":
			scripted = scripted || strings.Contains(a, "H")
			parsable = parsable || strings.Contains(a, "p")
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(inv.Stderr, "invalid option '%s'\nusage:\n\tlist [-Hp] [-r|-d max] [-o property[,...]] [-s property]...\n\t    [-S property]... [-t type[,...]] [filesystem|volume|snapshot] ...\n", strings.TrimLeft(a, "-")[:1])
			return 2
		default:
			names = append(names, a)
		}
	}
	var rows [][]string
	for _, p := range t.pools() {
		avail := p.size*94/100/2 - p.alloc/2
		for j, ds := range p.datasets {
			if len(names) > 0 && !contains(names, ds[0]) && !contains(names, p.name) {
				continue
			}
			used := int64(float64(p.alloc/2) * p.usedFrac[j])
			refer := int64(float64(p.alloc/2)*p.refFrac[j]) + 98304
			vals := map[string]string{"name": ds[0], "mountpoint": ds[1], "type": "filesystem", "compression": "lz4",
				"used": zfsSize(used), "avail": zfsSize(avail), "available": zfsSize(avail), "refer": zfsSize(refer), "referenced": zfsSize(refer)}
			if parsable {
				vals["used"], vals["avail"], vals["available"] = fmt.Sprint(used), fmt.Sprint(avail), fmt.Sprint(avail)
				vals["refer"], vals["referenced"] = fmt.Sprint(refer), fmt.Sprint(refer)
			}
			row := make([]string, len(cols))
			for k, c := range cols {
				v, ok := vals[c]
				if !ok {
					fmt.Fprintf(inv.Stderr, "bad property list: invalid property '%s'\n", c)
					return 2
				}
				row[k] = v
			}
			rows = append(rows, row)
		}
	}
	if len(names) > 0 && len(rows) == 0 {
		fmt.Fprintf(inv.Stderr, "cannot open '%s': dataset does not exist\n", names[0])
		return 1
	}
	writeZFS(inv, cols, rows, scripted, map[string]bool{"used": true, "avail": true, "available": true, "refer": true, "referenced": true})
	return 0
}

// writeZFS prints a zfs/zpool table: upper-case headers, two spaces between columns, sizes
// right-aligned; -H: tab-separated, no header.
func writeZFS(inv *shell.Invocation, cols []string, rows [][]string, scripted bool, right map[string]bool) {
	if scripted {
		for _, r := range rows {
			fmt.Fprintln(inv.Stdout, strings.Join(r, "\t"))
		}
		return
	}
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = strings.ToUpper(c)
	}
	widths := make([]int, len(cols))
	for i := range cols {
		widths[i] = len(head[i])
		for _, r := range rows {
			widths[i] = max(widths[i], len(r[i]))
		}
	}
	for _, r := range append([][]string{head}, rows...) {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			if right[cols[i]] {
				b.WriteString(strings.Repeat(" ", widths[i]-len(c)) + c)
			} else if i < len(r)-1 {
				b.WriteString(c + strings.Repeat(" ", widths[i]-len(c)))
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(inv.Stdout, strings.TrimRight(b.String(), " "))
	}
}

func (t Tools) zpool(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	if len(args) == 0 {
		fmt.Fprintln(inv.Stderr, "usage: zpool command args ...\nwhere 'command' is one of the following:\n\n\tversion\n\n\tlist [-gHLpPv] [-o property[,...]] [-T d|u] [pool] ... [interval [count]]\n\tstatus [-c [script1,script2,...]] [-DegiLpPstvx] [-T d|u] [pool] ...\n\t    [interval [count]]")
		return 2
	}
	pools := t.pools()
	var names []string
	flags := ""
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") {
			flags += a[1:]
		} else {
			names = append(names, a)
		}
	}
	for _, n := range names {
		found := false
		for _, p := range pools {
			found = found || p.name == n
		}
		if !found {
			fmt.Fprintf(inv.Stderr, "cannot open '%s': no such pool\n", n)
			return 1
		}
	}
	want := func(p pool) bool { return len(names) == 0 || contains(names, p.name) }
	switch args[0] {
	case "version":
		fmt.Fprintln(inv.Stdout, "zfs-2.2.6-pve1\nzfs-kmod-2.2.6-pve1")
		return 0
	case "list":
		if strings.Trim(flags, "HpPvgL") != "" {
			fmt.Fprintf(inv.Stderr, "invalid option '%c'\nusage:\n\tlist [-gHLpPv] [-o property[,...]] [-T d|u] [pool] ... [interval [count]]\n", strings.Trim(flags, "HpPvgL")[0])
			return 2
		}
		cols := []string{"name", "size", "alloc", "free", "ckpoint", "expandsz", "frag", "cap", "dedup", "health", "altroot"}
		var rows [][]string
		for _, p := range pools {
			if !want(p) {
				continue
			}
			rows = append(rows, []string{p.name, zfsSize(p.size), zfsSize(p.alloc), zfsSize(p.size - p.alloc), "-", "-", "3%",
				fmt.Sprintf("%d%%", p.alloc*100/p.size), "1.00x", "ONLINE", "-"})
		}
		writeZFS(inv, cols, rows, strings.Contains(flags, "H"), map[string]bool{"size": true, "alloc": true, "free": true, "ckpoint": true,
			"expandsz": true, "frag": true, "cap": true, "dedup": true, "health": true})
		return 0
	case "status":
		if strings.Contains(flags, "x") {
			fmt.Fprintln(inv.Stdout, "all pools are healthy")
			return 0
		}
		first := true
		for _, p := range pools {
			if !want(p) {
				continue
			}
			if !first {
				fmt.Fprintln(inv.Stdout)
			}
			first = false
			back := int(t.M.Now().Weekday()) // the last Sunday before today, when the scrub ended
			if back == 0 {
				back = 7
			}
			scrub := t.M.Now().Truncate(24*time.Hour).AddDate(0, 0, -back).Add(5*time.Hour + 48*time.Minute + 17*time.Second)
			w := len(p.disks[0]) + 4
			fmt.Fprintf(inv.Stdout, "  pool: %s\n state: ONLINE\n  scan: scrub repaired 0B in 05:%02d:17 with 0 errors on %s\nconfig:\n\n", p.name, len(p.name)*7%60, scrub.Format("Mon Jan _2 15:04:05 2006"))
			fmt.Fprintf(inv.Stdout, "\t%-*s STATE     READ WRITE CKSUM\n\t%-*s ONLINE       0     0     0\n\t  %-*s ONLINE       0     0     0\n", w, "NAME", w, p.name, w-2, "mirror-0")
			for _, d := range p.disks {
				fmt.Fprintf(inv.Stdout, "\t    %-*s ONLINE       0     0     0\n", w-4, d)
			}
			fmt.Fprintln(inv.Stdout, "\nerrors: No known data errors")
		}
		return 0
	}
	fmt.Fprintf(inv.Stderr, "unrecognized command '%s'\nusage: zpool command args ...\n", args[0])
	return 2
}
