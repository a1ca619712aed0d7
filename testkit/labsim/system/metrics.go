package system

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// memory is one reading of the memory figures, in KiB.
type memory struct {
	total, free, used, shared, buffers, cached, available, swapTotal, swapFree int64
}

func (m *Machine) readMemory() memory {
	total := int64(m.cfg.MemoryMB) * 1024
	if m.cfg.Role == RoleProxmox || m.cfg.Role == RoleLinux || m.cfg.Role == RoleVM {
		total -= total / 40 // the kernel reserves a little
	}
	used := int64(float64(total) * m.jitter(m.memFrac, 0.04))
	cached := int64(float64(total) * m.jitter(0.22, 0.05))
	buffers := total / 60
	if used+cached+buffers > total {
		cached = total - used - buffers
	}
	free := total - used - cached - buffers
	swap := int64(min(m.cfg.MemoryMB, 8192)) * 1024 / 2
	if m.cfg.Role == RoleLXC {
		swap = 512 * 1024
		buffers = 0
	}
	return memory{
		total: total, free: free, used: used, shared: total / 200, buffers: buffers, cached: cached,
		available: free + cached*9/10 + buffers, swapTotal: swap, swapFree: swap - swap/50,
	}
}

func (m *Machine) loads() (float64, float64, float64) {
	base := m.loadPerCore * float64(m.cfg.Cores)
	return m.jitter(base, 0.3), m.jitter(base, 0.15), m.jitter(base, 0.08)
}

func (m *Machine) procLoadavg() string {
	l1, l5, l15 := m.loads()
	m.mu.Lock()
	running, total, last := 1+m.rng.Intn(2), 90+len(m.units)*6+m.rng.Intn(20), m.nextPID+m.rng.Intn(50)
	m.mu.Unlock()
	return fmt.Sprintf("%.2f %.2f %.2f %d/%d %d\n", l1, l5, l15, running, total, last)
}

func (m *Machine) procMeminfo() string {
	mem := m.readMemory()
	var b strings.Builder
	line := func(k string, v int64) { fmt.Fprintf(&b, "%-16s%8d kB\n", k+":", v) }
	line("MemTotal", mem.total)
	line("MemFree", mem.free)
	line("MemAvailable", mem.available)
	line("Buffers", mem.buffers)
	line("Cached", mem.cached)
	line("SwapCached", 0)
	line("Active", mem.used*6/10+mem.cached/2)
	line("Inactive", mem.used*3/10+mem.cached/2)
	line("SwapTotal", mem.swapTotal)
	line("SwapFree", mem.swapFree)
	line("Dirty", 128)
	line("Writeback", 0)
	line("AnonPages", mem.used*8/10)
	line("Mapped", mem.used/10)
	line("Shmem", mem.shared)
	line("SReclaimable", mem.cached/12)
	return b.String()
}

// advanceCPU moves the /proc/stat counters to now and returns them.
func (m *Machine) advanceCPU() cpuCounters {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	dt := now.Sub(m.stat.last).Seconds()
	if dt < 0 {
		dt = 0
	}
	m.stat.last = now
	j := dt * 100 * float64(m.cfg.Cores)
	busy := m.cpuBusy * (1 + 0.3*(2*m.rng.Float64()-1))
	m.stat.user += j * busy * 0.7
	m.stat.system += j * busy * 0.25
	m.stat.soft += j * busy * 0.02
	m.stat.iowait += j * busy * 0.03
	m.stat.idle += j * (1 - busy)
	return m.stat
}

func (m *Machine) procStat() string {
	c := m.advanceCPU()
	var b strings.Builder
	row := func(name string, div float64) {
		fmt.Fprintf(&b, "%s %d %d %d %d %d %d %d 0 0 0\n", name, int64(c.user/div), int64(c.nice/div), int64(c.system/div),
			int64(c.idle/div), int64(c.iowait/div), int64(c.irq/div), int64(c.soft/div))
	}
	row("cpu ", 1)
	for i := 0; i < m.cfg.Cores; i++ {
		row("cpu"+strconv.Itoa(i), float64(m.cfg.Cores))
	}
	m.mu.Lock()
	procs := m.nextPID
	m.mu.Unlock()
	fmt.Fprintf(&b, "intr %d\nctxt %d\nbtime %d\nprocesses %d\nprocs_running 1\nprocs_blocked 0\n",
		int64(c.idle*3), int64(c.idle*5), m.boot.Unix(), procs)
	return b.String()
}

func (m *Machine) procUptime() string {
	up := m.now().Sub(m.boot).Seconds()
	return fmt.Sprintf("%.2f %.2f\n", up, up*float64(m.cfg.Cores)*0.95)
}

func (m *Machine) procCPUInfo() string {
	var b strings.Builder
	for i := 0; i < m.cfg.Cores; i++ {
		fmt.Fprintf(&b, "processor\t: %d\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD Ryzen 7 5800U with Radeon Graphics\ncpu MHz\t\t: 1896.435\ncpu cores\t: %d\n\n", i, m.cfg.Cores)
	}
	return b.String()
}

func (m *Machine) nproc(_ context.Context, inv *shell.Invocation) int {
	fmt.Fprintln(inv.Stdout, m.cfg.Cores)
	return 0
}

// uptimeText renders "12 days,  3:04" / "3:04" / "5 min" as uptime does.
func uptimeText(d time.Duration) string {
	days := int(d.Hours()) / 24
	h := int(d.Hours()) % 24
	mins := int(d.Minutes()) % 60
	var s string
	switch {
	case days == 1:
		s = "1 day, "
	case days > 1:
		s = fmt.Sprintf("%d days, ", days)
	}
	if h == 0 {
		return s + fmt.Sprintf("%d min", mins)
	}
	return s + fmt.Sprintf("%2d:%02d", h, mins)
}

func (m *Machine) uptimeLine() string {
	now := m.now()
	l1, l5, l15 := m.loads()
	if m.IsDarwin() {
		return fmt.Sprintf("%s  up %s, 2 users, load averages: %.2f %.2f %.2f", now.Format("15:04"), uptimeText(now.Sub(m.boot)), l1, l5, l15)
	}
	return fmt.Sprintf(" %s up %s,  1 user,  load average: %.2f, %.2f, %.2f", now.Format("15:04:05"), uptimeText(now.Sub(m.boot)), l1, l5, l15)
}

func (m *Machine) uptime(_ context.Context, inv *shell.Invocation) int {
	for _, a := range inv.Args[1:] {
		switch a {
		case "-p", "--pretty":
			d := m.now().Sub(m.boot)
			days, h, mins := int(d.Hours())/24, int(d.Hours())%24, int(d.Minutes())%60
			var parts []string
			plural := func(n int, unit string) {
				if n == 1 {
					parts = append(parts, "1 "+unit)
				} else if n > 1 {
					parts = append(parts, fmt.Sprintf("%d %ss", n, unit))
				}
			}
			plural(days/7, "week")
			plural(days%7, "day")
			plural(h, "hour")
			plural(mins, "minute")
			fmt.Fprintf(inv.Stdout, "up %s\n", strings.Join(parts, ", "))
			return 0
		case "-s", "--since":
			fmt.Fprintln(inv.Stdout, m.boot.Format("2006-01-02 15:04:05"))
			return 0
		}
	}
	fmt.Fprintln(inv.Stdout, m.uptimeLine())
	return 0
}

// cpuSplit is one top reading: user, system, idle, iowait percentages.
func (m *Machine) cpuSplit() (us, sy, id, wa float64) {
	busy := m.jitter(m.cpuBusy, 0.3) * 100
	us, sy, wa = busy*0.7, busy*0.27, busy*0.03
	return us, sy, 100 - us - sy - wa, wa
}

func (m *Machine) top(_ context.Context, inv *shell.Invocation) int {
	us, sy, id, wa := m.cpuSplit()
	if m.IsDarwin() {
		now := m.now()
		l1, l5, l15 := m.loads()
		mem := m.readMemory()
		fmt.Fprintf(inv.Stdout, "Processes: 612 total, 3 running, 609 sleeping, 2811 threads \n%s\nLoad Avg: %.2f, %.2f, %.2f \n", now.Format("2006/01/02 15:04:05"), l1, l5, l15)
		fmt.Fprintf(inv.Stdout, "CPU usage: %.2f%% user, %.2f%% sys, %.2f%% idle \n", us, sy+wa, id)
		fmt.Fprintf(inv.Stdout, "SharedLibs: 512M resident, 96M data, 48M linkedit.\nMemRegions: 183254 total, 5532M resident, 312M private, 2196M shared.\n")
		fmt.Fprintf(inv.Stdout, "PhysMem: %dM used (2119M wired, 1024M compressor), %dM unused.\n", (mem.total-mem.free)/1024, mem.free/1024)
		fmt.Fprintf(inv.Stdout, "VM: 246T vsize, 4871M framework vsize, 0(0) swapins, 0(0) swapouts.\nNetworks: packets: 12345678/12G in, 9876543/3G out.\nDisks: 4567890/80G read, 3456789/60G written.\n\n")
		fmt.Fprintf(inv.Stdout, "PID    COMMAND      %%CPU TIME     #TH   #WQ  #PORT MEM    PURG   CMPRS  PGRP  PPID  STATE    BOOSTS\n")
		fmt.Fprintf(inv.Stdout, "1      launchd      0.0  01:12.34 4/1   3    3456  24M    0B     2128K  1     0     sleeping *0[1]\n")
		return 0
	}
	mem := m.readMemory()
	units := m.sortedUnits()
	running := 0
	for _, u := range units {
		if u.active && state.IsService(u.name) {
			running++
		}
	}
	total := 20 + running*3
	fmt.Fprintf(inv.Stdout, "top - %s\n", strings.TrimPrefix(m.uptimeLine(), " "))
	fmt.Fprintf(inv.Stdout, "Tasks: %3d total,   1 running, %3d sleeping,   0 stopped,   0 zombie\n", total, total-1)
	fmt.Fprintf(inv.Stdout, "%%Cpu(s): %4.1f us, %4.1f sy,  0.0 ni, %4.1f id, %4.1f wa,  0.0 hi,  0.1 si,  0.0 st \n", us, sy, id, wa)
	mib := func(kb int64) float64 { return float64(kb) / 1024 }
	fmt.Fprintf(inv.Stdout, "MiB Mem : %8.1f total, %8.1f free, %8.1f used, %8.1f buff/cache     \n", mib(mem.total), mib(mem.free), mib(mem.used), mib(mem.cached+mem.buffers))
	fmt.Fprintf(inv.Stdout, "MiB Swap: %8.1f total, %8.1f free, %8.1f used. %8.1f avail Mem \n\n", mib(mem.swapTotal), mib(mem.swapFree), mib(mem.swapTotal-mem.swapFree), mib(mem.available))
	fmt.Fprintf(inv.Stdout, "    PID USER      PR  NI    VIRT    RES    SHR S  %%CPU  %%MEM     TIME+ COMMAND\n")
	fmt.Fprintf(inv.Stdout, "%7d %-8s  20   0  %6d  %5d   %4d S   0.0   0.1   0:03.21 %s\n", 1, "root", 168104, 12544, 9216, "systemd")
	for _, u := range units {
		if !u.active || !state.IsService(u.name) {
			continue
		}
		fmt.Fprintf(inv.Stdout, "%7d %-8s  20   0  %6d  %5d   %4d S   0.0   0.2   0:01.02 %s\n", u.pid, "root", 98304, 8192, 4096, state.ProcessName(u.name))
	}
	return 0
}

// mount is one row of df.
type mount struct {
	fs, fstype, target string
	size, used         int64 // KiB
}

func (m *Machine) mounts() []mount {
	gb := int64(m.cfg.DiskGB) * 1024 * 1024
	memKB := int64(m.cfg.MemoryMB) * 1024
	rootUsed := int64(float64(gb) * m.jitter(m.diskFrac, 0.01))
	switch m.cfg.Role {
	case RoleLXC:
		return []mount{
			{fs: "/dev/mapper/pve-vm--" + m.cfg.Hostname + "--disk--0", fstype: "ext4", target: "/", size: gb, used: rootUsed},
			{fs: "none", fstype: "tmpfs", target: "/dev", size: 492, used: 0},
			{fs: "tmpfs", fstype: "tmpfs", target: "/dev/shm", size: memKB / 2, used: 0},
			{fs: "tmpfs", fstype: "tmpfs", target: "/run", size: memKB / 5, used: 120},
			{fs: "tmpfs", fstype: "tmpfs", target: "/run/lock", size: 5120, used: 0},
		}
	case RoleDarwin:
		return []mount{
			{fs: "/dev/disk3s1s1", fstype: "apfs", target: "/", size: gb, used: 10 * 1024 * 1024},
			{fs: "devfs", fstype: "devfs", target: "/dev", size: 214, used: 214},
			{fs: "/dev/disk3s5", fstype: "apfs", target: "/System/Volumes/Data", size: gb, used: rootUsed},
		}
	case RoleProxmox:
		return []mount{
			{fs: "udev", fstype: "devtmpfs", target: "/dev", size: memKB / 2, used: 0},
			{fs: "tmpfs", fstype: "tmpfs", target: "/run", size: memKB / 10, used: 2100},
			{fs: "/dev/mapper/pve-root", fstype: "ext4", target: "/", size: gb, used: rootUsed},
			{fs: "tmpfs", fstype: "tmpfs", target: "/dev/shm", size: memKB / 2, used: 46000},
			{fs: "/dev/nvme0n1p2", fstype: "vfat", target: "/boot/efi", size: 1046512, used: 8944},
			{fs: "/dev/fuse", fstype: "fuse", target: "/etc/pve", size: 131072, used: 32},
		}
	}
	return []mount{
		{fs: "udev", fstype: "devtmpfs", target: "/dev", size: memKB / 2, used: 0},
		{fs: "tmpfs", fstype: "tmpfs", target: "/run", size: memKB / 10, used: 900},
		{fs: "/dev/sda1", fstype: "ext4", target: "/", size: gb, used: rootUsed},
		{fs: "tmpfs", fstype: "tmpfs", target: "/dev/shm", size: memKB / 2, used: 0},
	}
}

// dfHuman renders KiB the way df -h does (powers of 1024, one decimal below 10).
func dfHuman(kb int64, darwin bool) string {
	if kb == 0 {
		return "0"
	}
	b := float64(kb) * 1024
	units := []string{"B", "K", "M", "G", "T", "P"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	suffix := units[i]
	if darwin && i > 0 {
		suffix += "i"
	}
	if i == 0 {
		return fmt.Sprintf("%d%s", int64(b), suffix)
	}
	if b < 10 {
		return fmt.Sprintf("%.1f%s", math.Ceil(b*10)/10, suffix)
	}
	return fmt.Sprintf("%d%s", int64(math.Ceil(b)), suffix)
}

func (m *Machine) df(_ context.Context, inv *shell.Invocation) int {
	var human, posix, showType, inodes bool
	var paths, onlyTypes, skipTypes []string
	args := inv.Args[1:]
	bad := func(msg string) int {
		fmt.Fprintf(inv.Stderr, "df: %s\nTry 'df --help' for more information.\n", msg)
		return 1
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		long, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		value := func() string {
			if hasVal {
				return val
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--human-readable" || a == "--si":
			human = true
		case a == "--portability":
			posix = true
		case a == "--print-type":
			showType = true
		case a == "--inodes":
			inodes = true
		case strings.HasPrefix(a, "--") && (long == "type" || long == "exclude-type"):
			if long == "type" {
				onlyTypes = append(onlyTypes, value())
			} else {
				skipTypes = append(skipTypes, value())
			}
		case strings.HasPrefix(a, "--") && m.IsDarwin():
		case strings.HasPrefix(a, "--"):
			switch long {
			case "all", "local", "total", "sync", "no-sync", "block-size", "output", "help", "version":
			default:
				return bad(fmt.Sprintf("unrecognized option '--%s'", long))
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				switch c := a[j]; c {
				case 'h', 'H':
					human = true
				case 'P':
					posix = true
				case 'T':
					showType = true
				case 'i':
					inodes = true
				case 'a', 'k', 'l', 'm', 'g':
				case 't', 'x', 'B':
					v := a[j+1:]
					if v == "" && i+1 < len(args) {
						i++
						v = args[i]
					}
					if c == 't' {
						onlyTypes = append(onlyTypes, v)
					} else if c == 'x' {
						skipTypes = append(skipTypes, v)
					}
					j = len(a)
				default:
					if m.IsDarwin() {
						continue
					}
					return bad(fmt.Sprintf("invalid option -- '%c'", c))
				}
			}
		default:
			paths = append(paths, a)
		}
	}
	all := m.mounts()
	if len(onlyTypes) > 0 || len(skipTypes) > 0 {
		var kept []mount
		for _, mt := range all {
			if (len(onlyTypes) == 0 || slices.Contains(onlyTypes, mt.fstype)) && !slices.Contains(skipTypes, mt.fstype) {
				kept = append(kept, mt)
			}
		}
		all = kept
	}
	if len(all) == 0 {
		fmt.Fprintln(inv.Stderr, "df: no file systems processed")
		return 1
	}
	rows := all
	if len(paths) > 0 {
		rows = nil
		for _, p := range paths {
			abs := inv.Abs(p)
			if _, err := inv.FS().Stat(abs); err != nil {
				inv.Errorf("%s: No such file or directory", p)
				return 1
			}
			best := all[0]
			bestLen := -1
			for _, mt := range all {
				covers := mt.target == "/" || abs == mt.target || strings.HasPrefix(abs, mt.target+"/")
				if covers && len(mt.target) > bestLen {
					best, bestLen = mt, len(mt.target)
				}
			}
			rows = append(rows, best)
		}
	}
	darwin := m.IsDarwin()
	header := []string{"Filesystem"}
	if showType {
		header = append(header, "Type")
	}
	switch {
	case inodes:
		header = append(header, "Inodes", "IUsed", "IFree", "IUse%")
	case human:
		header = append(header, "Size", "Used", "Avail", "Use%")
	case posix:
		header = append(header, "1024-blocks", "Used", "Available", "Capacity")
	default:
		header = append(header, "1K-blocks", "Used", "Available", "Use%")
	}
	if darwin && !posix {
		header[len(header)-1] = "Capacity"
		header = append(header, "iused", "ifree", "%iused")
	}
	header = append(header, "Mounted on")
	table := [][]string{header}
	for _, r := range rows {
		avail := r.size - r.used
		if r.fstype == "ext4" {
			avail -= r.size / 20 // reserved blocks
		}
		if avail < 0 {
			avail = 0
		}
		pct := "0%"
		if r.used+avail > 0 {
			pct = fmt.Sprintf("%d%%", int64(math.Ceil(float64(r.used)*100/float64(r.used+avail))))
		}
		row := []string{r.fs}
		if showType {
			row = append(row, r.fstype)
		}
		if inodes {
			total, used := r.size/16, r.used/64+int64(len(r.target))*11
			if r.fstype == "vfat" || r.fstype == "fuse" {
				total, used = 0, 0
			}
			f := func(n int64) string {
				if human && n >= 1024 {
					return dfHuman((n+1023)/1024, false) // a count, scaled as df -h scales bytes
				}
				return strconv.FormatInt(n, 10)
			}
			ipct := "-"
			if total > 0 {
				ipct = fmt.Sprintf("%d%%", int64(math.Ceil(float64(used)*100/float64(total))))
			}
			row = append(row, f(total), f(used), f(total-used), ipct, r.target)
			table = append(table, row)
			continue
		}
		if human {
			row = append(row, dfHuman(r.size, darwin), dfHuman(r.used, darwin), dfHuman(avail, darwin), pct)
		} else {
			row = append(row, strconv.FormatInt(r.size, 10), strconv.FormatInt(r.used, 10), strconv.FormatInt(avail, 10), pct)
		}
		if darwin && !posix {
			row = append(row, "404k", "3.1G", "0%")
		}
		row = append(row, r.target)
		table = append(table, row)
	}
	writeDFTable(inv, table, posix)
	return 0
}

// writeDFTable aligns columns as GNU df does: the first column left-aligned, numbers
// right-aligned, the mount point last and unpadded.
func writeDFTable(inv *shell.Invocation, table [][]string, posix bool) {
	widths := make([]int, len(table[0]))
	for _, row := range table {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for r, row := range table {
		var b strings.Builder
		for i, c := range row {
			switch {
			case i == len(row)-1:
				b.WriteString(c)
			case i == 0 || (r == 0 && posix) || (i == 1 && table[0][1] == "Type"):
				fmt.Fprintf(&b, "%-*s ", widths[i], c)
			default:
				fmt.Fprintf(&b, "%*s ", widths[i], c)
			}
		}
		fmt.Fprintln(inv.Stdout, b.String())
	}
}

func (m *Machine) free(_ context.Context, inv *shell.Invocation) int {
	unit := "k"
	for _, a := range inv.Args[1:] {
		switch a {
		case "-b", "--bytes":
			unit = "b"
		case "-k", "--kibi", "--kilo":
			unit = "k"
		case "-m", "--mebi", "--mega":
			unit = "m"
		case "-g", "--gibi", "--giga":
			unit = "g"
		case "-h", "--human":
			unit = "h"
		case "-w", "--wide", "-t", "--total", "-l", "--lohi", "-v", "--committed", "--si":
		default:
			if strings.HasPrefix(a, "--") {
				fmt.Fprintf(inv.Stderr, "free: unrecognized option '%s'\n\nUsage:\n free [options]\n\nOptions:\n -b, --bytes         show output in bytes\n -h, --human         show human-readable output\n\nFor more details see free(1).\n", a)
				return 1
			}
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(inv.Stderr, "free: invalid option -- '%c'\n\nUsage:\n free [options]\n\nOptions:\n -b, --bytes         show output in bytes\n -h, --human         show human-readable output\n\nFor more details see free(1).\n", a[1])
				return 1
			}
		}
	}
	mem := m.readMemory()
	f := func(kb int64) string {
		switch unit {
		case "b":
			return strconv.FormatInt(kb*1024, 10)
		case "m":
			return strconv.FormatInt(kb/1024, 10)
		case "g":
			return strconv.FormatInt(kb/1024/1024, 10)
		case "h":
			return freeHuman(kb)
		}
		return strconv.FormatInt(kb, 10)
	}
	fmt.Fprintln(inv.Stdout, "               total        used        free      shared  buff/cache   available")
	fmt.Fprintf(inv.Stdout, "%-8s%12s%12s%12s%12s%12s%12s\n", "Mem:", f(mem.total), f(mem.used), f(mem.free), f(mem.shared), f(mem.buffers+mem.cached), f(mem.available))
	fmt.Fprintf(inv.Stdout, "%-8s%12s%12s%12s\n", "Swap:", f(mem.swapTotal), f(mem.swapTotal-mem.swapFree), f(mem.swapFree))
	return 0
}

func freeHuman(kb int64) string {
	v := float64(kb) * 1024
	units := []string{"B", "Ki", "Mi", "Gi", "Ti"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%dB", int64(v))
	}
	if v < 10 {
		return fmt.Sprintf("%.1f%s", v, units[i])
	}
	return fmt.Sprintf("%d%s", int64(math.Round(v)), units[i])
}

func (m *Machine) vmStat(_ context.Context, inv *shell.Invocation) int {
	mem := m.readMemory()
	page := int64(16384)
	pages := func(kb int64) int64 { return kb * 1024 / page }
	rows := []struct {
		k string
		v int64
	}{
		{"Pages free", pages(mem.free)}, {"Pages active", pages(mem.used * 6 / 10)}, {"Pages inactive", pages(mem.cached)},
		{"Pages speculative", pages(mem.free / 20)}, {"Pages throttled", 0}, {"Pages wired down", pages(mem.used * 3 / 10)},
		{"Pages purgeable", 2345}, {"\"Translation faults\"", 123456789}, {"Pages copy-on-write", 1234567},
		{"Pages zero filled", 23456789}, {"Pages reactivated", 12345}, {"Pages purged", 23456},
		{"File-backed pages", pages(mem.cached)}, {"Anonymous pages", pages(mem.used * 6 / 10)},
		{"Pages stored in compressor", pages(mem.used / 10)}, {"Pages occupied by compressor", pages(mem.used / 20)},
		{"Decompressions", 234567}, {"Compressions", 345678}, {"Pageins", 456789}, {"Pageouts", 1234},
		{"Swapins", 0}, {"Swapouts", 0},
	}
	fmt.Fprintf(inv.Stdout, "Mach Virtual Memory Statistics: (page size of %d bytes)\n", page)
	for _, r := range rows {
		fmt.Fprintf(inv.Stdout, "%-29s%16d.\n", r.k+":", r.v)
	}
	return 0
}

func (m *Machine) sysctl(_ context.Context, inv *shell.Invocation) int {
	valueOnly := false
	var names []string
	for _, a := range inv.Args[1:] {
		switch {
		case a == "-n":
			valueOnly = true
		case strings.HasPrefix(a, "-"):
		default:
			names = append(names, a)
		}
	}
	l1, l5, l15 := m.loads()
	mem := m.readMemory()
	var values map[string]string
	if m.IsDarwin() {
		values = map[string]string{
			"hw.ncpu": strconv.Itoa(m.cfg.Cores), "hw.logicalcpu": strconv.Itoa(m.cfg.Cores), "hw.physicalcpu": strconv.Itoa(m.cfg.Cores),
			"hw.memsize":               strconv.FormatInt(int64(m.cfg.MemoryMB)*1024*1024, 10),
			"vm.loadavg":               fmt.Sprintf("{ %.2f %.2f %.2f }", l1, l5, l15),
			"kern.boottime":            fmt.Sprintf("{ sec = %d, usec = 0 } %s", m.boot.Unix(), m.boot.Format("Mon Jan _2 15:04:05 2006")),
			"kern.hostname":            m.cfg.Hostname,
			"kern.osrelease":           "24.1.0",
			"machdep.cpu.brand_string": "Apple M2",
			"vm.swapusage":             fmt.Sprintf("total = %.2fM  used = %.2fM  free = %.2fM  (encrypted)", float64(mem.swapTotal)/1024, float64(mem.swapTotal-mem.swapFree)/1024, float64(mem.swapFree)/1024),
			"hw.pagesize":              "16384",
			"kern.osproductversion":    "15.1",
			"kern.ostype":              "Darwin",
			"kern.version":             darwinVersion,
			"hw.model":                 "Mac14,3",
			"hw.machine":               "arm64",
		}
	} else {
		values = map[string]string{
			"kernel.hostname": m.cfg.Hostname, "vm.swappiness": "60", "net.ipv4.ip_forward": "1",
			"kernel.osrelease": m.kernelRelease(), "fs.file-max": "9223372036854775807",
		}
	}
	code := 0
	for _, n := range names {
		v, ok := values[n]
		if !ok {
			if m.IsDarwin() {
				fmt.Fprintf(inv.Stderr, "sysctl: unknown oid '%s'\n", n)
			} else {
				fmt.Fprintf(inv.Stderr, "sysctl: cannot stat /proc/sys/%s: No such file or directory\n", strings.ReplaceAll(n, ".", "/"))
			}
			code = 255
			if m.IsDarwin() {
				code = 1
			}
			continue
		}
		if valueOnly {
			fmt.Fprintln(inv.Stdout, v)
		} else if m.IsDarwin() {
			fmt.Fprintf(inv.Stdout, "%s: %s\n", n, v)
		} else {
			fmt.Fprintf(inv.Stdout, "%s = %s\n", n, v)
		}
	}
	return code
}
