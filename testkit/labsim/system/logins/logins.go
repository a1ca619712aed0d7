// Package logins simulates who is and was logged in to a machine: who, w, last and lastlog,
// over one session of the login user from the operator's network and the machine's boots
// (labsim/system/state). Formats follow who(1), w(1), last(1) and lastlog(8) (util-linux
// and shadow on Debian 12/13).
package logins

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// Tools are the login programs bound to one machine.
type Tools struct{ M state.Machine }

// Programs lists who, w, last and lastlog (lastlog is gone from Debian 13, as in the distro).
func (t Tools) Programs() shell.Registry {
	reg := shell.Registry{"who": t.who, "w": t.w, "last": t.last, "users": t.users}
	if t.M.Distro() != "debian-13" {
		reg["lastlog"] = t.lastlog
	}
	return reg
}

// session is the operator's current login: on pts/0 from the client's address.
type session struct {
	user, tty, from string
	at              time.Time
}

func (t Tools) sessions() []session {
	from := "192.0.2.1"
	if g := t.M.Gateway(); g != "" {
		from = g
	}
	now := t.M.Now()
	return []session{{t.M.User(), "pts/0", from, now.Add(-3 * time.Minute).Truncate(time.Minute)}}
}

func usage(inv *shell.Invocation, msg string, code int) int {
	fmt.Fprintf(inv.Stderr, "%s: %s\nTry '%s --help' for more information.\n", inv.Name(), msg, inv.Name())
	return code
}

// checkFlags refuses an option outside allowed (letters) and longs, as getopt does.
func checkFlags(inv *shell.Invocation, allowed string, longs []string, code int) ([]string, bool) {
	var args []string
	for _, a := range inv.Args[1:] {
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			ok := false
			for _, l := range longs {
				ok = ok || l == name
			}
			if !ok {
				return nil, usage(inv, fmt.Sprintf("unrecognized option '--%s'", name), code) == 0
			}
			args = append(args, a)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, c := range a[1:] {
				if !strings.ContainsRune(allowed, c) && !(c >= '0' && c <= '9') {
					return nil, usage(inv, fmt.Sprintf("invalid option -- '%c'", c), code) == 0
				}
			}
			args = append(args, a)
		default:
			args = append(args, a)
		}
	}
	return args, true
}

func (t Tools) who(_ context.Context, inv *shell.Invocation) int {
	args, ok := checkFlags(inv, "abdHlmpqrstTuw", []string{"all", "boot", "heading", "count", "runlevel", "short", "users", "mesg", "dead", "login", "process", "time"}, 1)
	if !ok {
		return 1
	}
	has := func(c string, long string) bool {
		for _, a := range args {
			if a == "--"+long || (!strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") && strings.Contains(a, c)) {
				return true
			}
		}
		return false
	}
	if has("b", "boot") {
		fmt.Fprintf(inv.Stdout, "         system boot  %s\n", t.M.Boot().Format("2006-01-02 15:04"))
		return 0
	}
	if has("r", "runlevel") {
		fmt.Fprintf(inv.Stdout, "         run-level 5  %s\n", t.M.Boot().Format("2006-01-02 15:04"))
		return 0
	}
	if has("q", "count") {
		ss := t.sessions()
		names := make([]string, len(ss))
		for i, s := range ss {
			names[i] = s.user
		}
		fmt.Fprintf(inv.Stdout, "%s\n# users=%d\n", strings.Join(names, " "), len(ss))
		return 0
	}
	if has("H", "heading") {
		fmt.Fprintln(inv.Stdout, "NAME     LINE         TIME             COMMENT")
	}
	for _, s := range t.sessions() {
		fmt.Fprintf(inv.Stdout, "%-8s %-12s %s (%s)\n", s.user, s.tty, s.at.Format("2006-01-02 15:04"), s.from)
	}
	return 0
}

func (t Tools) users(_ context.Context, inv *shell.Invocation) int {
	var names []string
	for _, s := range t.sessions() {
		names = append(names, s.user)
	}
	fmt.Fprintln(inv.Stdout, strings.Join(names, " "))
	return 0
}

// loads reads /proc/loadavg's three figures through the machine's file.
func loads(inv *shell.Invocation) string {
	data, err := inv.FS().ReadFile("/proc/loadavg")
	if err != nil {
		return "0.00, 0.00, 0.00"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "0.00, 0.00, 0.00"
	}
	return f[0] + ", " + f[1] + ", " + f[2]
}

// Uptime renders the "up …" part of uptime(1) and w(1).
func Uptime(d time.Duration) string {
	days := int(d.Hours()) / 24
	h, m := int(d.Hours())%24, int(d.Minutes())%60
	s := ""
	switch {
	case days == 1:
		s = "1 day, "
	case days > 1:
		s = fmt.Sprintf("%d days, ", days)
	}
	if h == 0 {
		return s + fmt.Sprintf("%d min", m)
	}
	return s + fmt.Sprintf("%2d:%02d", h, m)
}

func (t Tools) w(_ context.Context, inv *shell.Invocation) int {
	args, ok := checkFlags(inv, "hiusfoVn", []string{"no-header", "ip-addr", "no-current", "short", "from", "old-style", "help", "version"}, 1)
	if !ok {
		return 1
	}
	header, short := true, false
	for _, a := range args {
		if a == "-h" || a == "--no-header" {
			header = false
		}
		if a == "-s" || a == "--short" {
			short = true
		}
	}
	now := t.M.Now()
	ss := t.sessions()
	if header {
		fmt.Fprintf(inv.Stdout, " %s up %s,  %d user,  load average: %s\n", now.Format("15:04:05"), Uptime(now.Sub(t.M.Boot())), len(ss), loads(inv))
		if short {
			fmt.Fprintln(inv.Stdout, "USER     TTY      FROM             IDLE WHAT")
		} else {
			fmt.Fprintln(inv.Stdout, "USER     TTY      FROM             LOGIN@   IDLE   JCPU   PCPU WHAT")
		}
	}
	for _, s := range ss {
		if short {
			fmt.Fprintf(inv.Stdout, "%-8s %-8s %-16s  0.00s w\n", s.user, s.tty, s.from)
			continue
		}
		fmt.Fprintf(inv.Stdout, "%-8s %-8s %-16s %s    0.00s  0.02s  0.00s w\n", s.user, s.tty, s.from, s.at.Format("15:04"))
	}
	return 0
}

func (t Tools) last(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	n := -1
	var names []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" || a == "--limit":
			if i+1 >= len(args) {
				return usage(inv, "option requires an argument -- 'n'", 1)
			}
			i++
			v, err := strconv.Atoi(args[i])
			if err != nil {
				fmt.Fprintf(inv.Stderr, "last: failed to parse number: '%s'\n", args[i])
				return 1
			}
			n = v
		case len(a) > 1 && a[0] == '-' && isDigits(a[1:]):
			n, _ = strconv.Atoi(a[1:])
		case a == "-x" || a == "--system" || a == "-F" || a == "--fulltimes" || a == "-a" || a == "--hostlast" || a == "-i" || a == "--ip" || a == "-w" || a == "--fullnames" || a == "-R" || a == "--nohostname":
		case strings.HasPrefix(a, "--"):
			return usage(inv, fmt.Sprintf("unrecognized option '%s'", a), 1)
		case strings.HasPrefix(a, "-"):
			return usage(inv, fmt.Sprintf("invalid option -- '%c'", a[1]), 1)
		default:
			names = append(names, a)
		}
	}
	now := t.M.Now()
	boot := t.M.Boot()
	kernel := t.M.Kernel()
	type rec struct{ user, tty, host, when string }
	var recs []rec
	from := t.sessions()[0].from
	for _, s := range t.sessions() {
		recs = append(recs, rec{s.user, s.tty, s.from, s.at.Format("Mon Jan _2 15:04") + "   still logged in"})
	}
	for k := 1; k <= 3; k++ {
		in := now.Add(-time.Duration(k*26) * time.Hour).Truncate(time.Minute)
		if in.Before(boot) {
			break
		}
		d := time.Duration(12+k*7) * time.Minute
		recs = append(recs, rec{t.M.User(), "pts/0", from, fmt.Sprintf("%s - %s  (%02d:%02d)", in.Format("Mon Jan _2 15:04"), in.Add(d).Format("15:04"), int(d.Hours()), int(d.Minutes())%60)})
	}
	recs = append(recs, rec{"reboot", "system boot", kernel, boot.Format("Mon Jan _2 15:04") + "   still running"})
	shown := 0
	for _, r := range recs {
		if len(names) > 0 && !contains(names, r.user) && !contains(names, r.tty) {
			continue
		}
		if n >= 0 && shown >= n {
			break
		}
		fmt.Fprintf(inv.Stdout, "%-8s %-12s %-16s %s\n", r.user, r.tty, r.host, r.when)
		shown++
	}
	fmt.Fprintf(inv.Stdout, "\nwtmp begins %s\n", boot.AddDate(0, -2, 0).Format("Mon Jan _2 15:04:05 2006"))
	return 0
}

func isDigits(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil && s != ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// systemUsers are the accounts of a fresh Debian system (uid < 1000 show "Never logged in").
var systemUsers = []string{"root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy",
	"www-data", "backup", "list", "irc", "_apt", "nobody", "systemd-network", "messagebus", "sshd"}

func (t Tools) lastlog(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	only := ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-u" || a == "--user":
			if i+1 < len(args) {
				i++
				only = args[i]
			}
		case a == "-b" || a == "-t" || a == "--before" || a == "--time":
			i++
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(inv.Stderr, "lastlog: unrecognized option '%s'\nUsage: lastlog [options]\n", a)
			return 2
		}
	}
	s := t.sessions()[0]
	users := append([]string(nil), systemUsers...)
	if t.M.User() != "root" {
		users = append(users, t.M.User())
	}
	if only != "" {
		if !contains(users, only) {
			fmt.Fprintf(inv.Stderr, "lastlog: Unknown user or range: %s\n", only)
			return 1
		}
		users = []string{only}
	}
	fmt.Fprintln(inv.Stdout, "Username         Port     From                                       Latest")
	for _, u := range users {
		if u == s.user {
			fmt.Fprintf(inv.Stdout, "%-16s %-8s %-42s %s\n", u, s.tty, s.from, s.at.Format("Mon Jan _2 15:04:05 -0700 2006"))
			continue
		}
		fmt.Fprintf(inv.Stdout, "%-16s                                            **Never logged in**\n", u)
	}
	return 0
}
