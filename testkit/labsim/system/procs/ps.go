// Package procs simulates ps(1) (procps-ng 4.0): the BSD (aux), System V (-ef) and -o
// formats, --sort, -p and -C, over the machine's process table — init, the kernel's
// kthreadd where there is a kernel of its own, one process per running service, and the
// caller's session — read from labsim/system/state.
package procs

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// Tool is ps bound to one machine.
type Tool struct{ M state.Machine }

// Program is the ps command.
func (t Tool) Program() shell.Program { return t.ps }

// proc is one row of the process table.
type proc struct {
	pid, ppid     int
	user, tty     string
	stat, comm    string
	args          string
	cpu, mem      float64
	vsz, rss      int
	start         time.Time
	cpuTime       time.Duration
	nice, threads int
}

// procTable is the machine's processes: init, the kernel threads of a real kernel, one per
// running service, and the caller's session (sshd, bash, the ps itself).
func (m Tool) procTable() []proc {
	boot := m.M.Boot()
	totalKB := float64(m.M.MemoryMB()) * 1024
	last := 0
	row := func(pid, ppid int, user, comm, args string, rss int, start time.Time) proc {
		return proc{pid: pid, ppid: ppid, user: user, tty: "?", stat: "Ss", comm: comm, args: args,
			cpu: float64(pid%7) / 10, mem: float64(rss) * 100 / totalKB, vsz: rss*3 + 10240, rss: rss, start: start,
			cpuTime: time.Duration(pid%300) * time.Second, threads: 1}
	}
	out := []proc{row(1, 0, "root", "systemd", "/sbin/init", 12544, boot)}
	if m.M.Role() != state.LXC {
		k := row(2, 0, "root", "kthreadd", "[kthreadd]", 0, boot)
		k.stat, k.vsz = "S", 0
		out = append(out, k)
	}
	for _, u := range m.M.Units() {
		last = max(last, u.PID)
		if !u.Active || !state.IsService(u.Name) {
			continue
		}
		name := state.ProcessName(u.Name)
		p := row(u.PID, 1, "root", name, "/usr/sbin/"+name, 6000+u.PID%9000, u.Since)
		if name == "sshd" {
			p.args = "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"
		}
		out = append(out, p)
	}
	now := m.M.Now()
	user := m.M.User()
	sess := row(last+100, 1, "root", "sshd", "sshd: "+user+"@notty", 11000, now.Add(-3*time.Minute))
	bash := row(last+101, sess.pid, user, "bash", "bash", 4096, now.Add(-3*time.Minute))
	self := row(last+102, bash.pid, user, "ps", "ps", 3800, now)
	self.stat, self.cpu, self.cpuTime = "R+", 0, 0
	bash.stat, bash.cpuTime, sess.cpuTime = "Ss", 0, 0
	out = append(out, sess, bash, self)
	sort.SliceStable(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// psColumn is one -o column: header, right-aligned, width and value.
type psColumn struct {
	header string
	right  bool
	width  int
	value  func(p proc, now time.Time) string
}

func psStart(t, now time.Time) string {
	switch {
	case now.Sub(t) < 24*time.Hour && t.YearDay() == now.YearDay():
		return t.Format("15:04")
	case t.Year() == now.Year():
		return t.Format("Jan02")
	}
	return t.Format("2006")
}

func cputime(d time.Duration, long bool) string {
	if long {
		return fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func elapsed(d time.Duration) string {
	days, h, mi, s := int(d.Hours())/24, int(d.Hours())%24, int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case days > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, mi, s)
	case h > 0:
		return fmt.Sprintf("%02d:%02d:%02d", h, mi, s)
	}
	return fmt.Sprintf("%02d:%02d", mi, s)
}

var psColumns = map[string]psColumn{
	"pid":     {"PID", true, 7, func(p proc, _ time.Time) string { return strconv.Itoa(p.pid) }},
	"ppid":    {"PPID", true, 7, func(p proc, _ time.Time) string { return strconv.Itoa(p.ppid) }},
	"user":    {"USER", false, 8, func(p proc, _ time.Time) string { return p.user }},
	"uid":     {"UID", true, 5, func(p proc, _ time.Time) string { return map[string]string{"root": "0"}[p.user] + "" }},
	"comm":    {"COMMAND", false, 15, func(p proc, _ time.Time) string { return p.comm }},
	"args":    {"COMMAND", false, 0, func(p proc, _ time.Time) string { return p.args }},
	"cmd":     {"CMD", false, 0, func(p proc, _ time.Time) string { return p.args }},
	"%cpu":    {"%CPU", true, 4, func(p proc, _ time.Time) string { return fmt.Sprintf("%.1f", p.cpu) }},
	"%mem":    {"%MEM", true, 4, func(p proc, _ time.Time) string { return fmt.Sprintf("%.1f", p.mem) }},
	"rss":     {"RSS", true, 5, func(p proc, _ time.Time) string { return strconv.Itoa(p.rss) }},
	"vsz":     {"VSZ", true, 6, func(p proc, _ time.Time) string { return strconv.Itoa(p.vsz) }},
	"stat":    {"STAT", false, 4, func(p proc, _ time.Time) string { return p.stat }},
	"ttyname": {"TTY", false, 8, func(p proc, _ time.Time) string { return p.tty }},
	"tty":     {"TT", false, 8, func(p proc, _ time.Time) string { return p.tty }},
	"time":    {"TIME", true, 8, func(p proc, _ time.Time) string { return cputime(p.cpuTime, true) }},
	"etime":   {"ELAPSED", true, 11, func(p proc, now time.Time) string { return elapsed(now.Sub(p.start)) }},
	"etimes":  {"ELAPSED", true, 7, func(p proc, now time.Time) string { return strconv.Itoa(int(now.Sub(p.start).Seconds())) }},
	"start":   {"STARTED", true, 8, func(p proc, now time.Time) string { return psStart(p.start, now) }},
	"lstart":  {"STARTED", false, 24, func(p proc, _ time.Time) string { return p.start.Format("Mon Jan _2 15:04:05 2006") }},
	"ni":      {"NI", true, 3, func(p proc, _ time.Time) string { return strconv.Itoa(p.nice) }},
	"nlwp":    {"NLWP", true, 4, func(p proc, _ time.Time) string { return strconv.Itoa(p.threads) }},
	"pri":     {"PRI", true, 3, func(p proc, _ time.Time) string { return "19" }},
	"psr":     {"PSR", true, 3, func(p proc, _ time.Time) string { return strconv.Itoa(p.pid % 2) }},
	"ucomm":   {"COMMAND", false, 15, func(p proc, _ time.Time) string { return p.comm }},
	"command": {"COMMAND", false, 0, func(p proc, _ time.Time) string { return p.args }},
}

var psAliases = map[string]string{"pcpu": "%cpu", "pmem": "%mem", "rssize": "rss", "rsz": "rss", "vsize": "vsz", "s": "stat",
	"tname": "tty", "tt": "tty", "cputime": "time", "euser": "user", "uname": "user", "ucmd": "comm", "nice": "ni", "thcount": "nlwp"}

func psUsage(inv *shell.Invocation, msg string) int {
	fmt.Fprintf(inv.Stderr, "error: %s\n\nUsage:\n ps [options]\n\n Try 'ps --help <simple|list|output|threads|misc|all>'\n  or 'ps --help <s|l|o|t|m|a>'\n for additional help text.\n\nFor more details see ps(1).\n", msg)
	return 1
}

func (m Tool) ps(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	var cols []string
	all, full, bsd, noHeader := false, false, false, false
	var sortKey string
	var pids, names []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if v, ok := strings.CutPrefix(a, "--"); ok && strings.Contains(v, "=") {
				return strings.SplitN(v, "=", 2)[1]
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "aux" || a == "auxw" || a == "auxww" || a == "axu" || a == "-aux":
			all, bsd = true, true
		case a == "ax" || a == "axww":
			all = true
			cols = []string{"pid", "tty", "stat", "time", "command"}
		case a == "-e" || a == "-A":
			all = true
		case a == "-ef" || a == "-eF":
			all, full = true, true
		case a == "-f":
			full = true
		case a == "-o" || a == "--format" || strings.HasPrefix(a, "--format=") || a == "o":
			for _, c := range strings.Split(next(), ",") {
				c = strings.ToLower(strings.SplitN(c, "=", 2)[0])
				if al, ok := psAliases[c]; ok {
					c = al
				}
				if _, ok := psColumns[c]; !ok {
					return psUsage(inv, fmt.Sprintf("unknown user-defined format specifier \"%s\"", c))
				}
				cols = append(cols, c)
			}
		case a == "-eo":
			all = true
			a = "-o"
			i--
			args[i+1] = "-o"
		case a == "--sort" || strings.HasPrefix(a, "--sort="):
			sortKey = next()
		case a == "-p" || a == "--pid" || strings.HasPrefix(a, "--pid="):
			pids = append(pids, strings.Split(next(), ",")...)
		case a == "-C":
			names = append(names, strings.Split(next(), ",")...)
		case a == "--no-headers" || a == "--no-heading" || a == "h":
			noHeader = true
		case a == "-w" || a == "ww" || a == "-ww" || a == "--cols" || a == "-H" || a == "--forest":
		case strings.HasPrefix(a, "--"):
			return psUsage(inv, "unknown gnu long option")
		case strings.HasPrefix(a, "-"):
			for _, c := range a[1:] {
				if !strings.ContainsRune("eAfFlwH", c) {
					return psUsage(inv, "unsupported SysV option")
				}
				all = all || c == 'e' || c == 'A'
				full = full || c == 'f'
			}
		default:
			if strings.Trim(a, "auxwf") != "" {
				return psUsage(inv, "unsupported option (BSD syntax)")
			}
			all, bsd = true, true
		}
	}
	now := m.M.Now()
	procs := m.procTable()
	self := procs[len(procs)-1]
	var rows []proc
	for _, p := range procs {
		switch {
		case len(pids) > 0:
			if !containsStr(pids, strconv.Itoa(p.pid)) {
				continue
			}
		case len(names) > 0:
			if !containsStr(names, p.comm) {
				continue
			}
		case !all && p.ppid != self.ppid && p.pid != self.ppid:
			continue
		}
		rows = append(rows, p)
	}
	if sortKey != "" {
		desc := strings.HasPrefix(sortKey, "-")
		k := strings.TrimLeft(sortKey, "-+")
		if al, ok := psAliases[k]; ok {
			k = al
		}
		less := func(a, b proc) bool {
			switch k {
			case "%cpu":
				return a.cpu < b.cpu
			case "%mem", "rss":
				return a.rss < b.rss
			case "start_time", "etime":
				return a.start.Before(b.start)
			}
			return a.pid < b.pid
		}
		sort.SliceStable(rows, func(i, j int) bool {
			if desc {
				return less(rows[j], rows[i])
			}
			return less(rows[i], rows[j])
		})
	}
	if len(cols) == 0 {
		switch {
		case bsd:
			m.psAux(inv, rows, now, noHeader)
			return 0
		case full:
			if !noHeader {
				fmt.Fprintln(inv.Stdout, "UID          PID    PPID  C STIME TTY          TIME CMD")
			}
			for _, p := range rows {
				fmt.Fprintf(inv.Stdout, "%-8s %7d %7d %2d %-5s %-8s %8s %s\n", p.user, p.pid, p.ppid, int(p.cpu), psStart(p.start, now), p.tty, cputime(p.cpuTime, true), p.args)
			}
			return 0
		}
		cols = []string{"pid", "ttyname", "time", "cmd"}
		if !all {
			for i := range rows {
				rows[i].tty = "pts/0"
			}
		}
	}
	var lines []string
	if !noHeader {
		var hs []string
		for i, c := range cols {
			col := psColumns[c]
			hs = append(hs, pad(col.header, col.width, col.right, i == len(cols)-1))
		}
		lines = append(lines, strings.Join(hs, " "))
	}
	for _, p := range rows {
		var vs []string
		for i, c := range cols {
			col := psColumns[c]
			vs = append(vs, pad(col.value(p, now), col.width, col.right, i == len(cols)-1))
		}
		lines = append(lines, strings.Join(vs, " "))
	}
	for _, l := range lines {
		fmt.Fprintln(inv.Stdout, strings.TrimRight(l, " "))
	}
	if len(rows) == 0 {
		return 1
	}
	return 0
}

func pad(s string, w int, right, last bool) string {
	if len(s) >= w || (last && !right) {
		return s
	}
	if right {
		return strings.Repeat(" ", w-len(s)) + s
	}
	return s + strings.Repeat(" ", w-len(s))
}

func (m Tool) psAux(inv *shell.Invocation, rows []proc, now time.Time, noHeader bool) {
	if !noHeader {
		fmt.Fprintln(inv.Stdout, "USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND")
	}
	for _, p := range rows {
		user := p.user
		if len(user) > 8 {
			user = user[:7] + "+"
		}
		fmt.Fprintf(inv.Stdout, "%-8s %7d %4.1f %4.1f %6d %5d %-8s %-4s %5s %6s %s\n", user, p.pid, p.cpu, p.mem, p.vsz, p.rss, p.tty, p.stat,
			psStart(p.start, now), cputime(p.cpuTime, false), p.args)
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
