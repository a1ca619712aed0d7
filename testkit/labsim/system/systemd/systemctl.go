// Package systemd simulates systemctl and journalctl (systemd 252 on Debian 12, 257 on
// Debian 13) over a machine's units (labsim/system/state): services and timers, their
// status, properties and unit files, the timers' schedule, and a journal fabricated from the
// units' state. Formats follow systemctl(1), journalctl(1), systemd.time(7) and
// systemd.journal-fields(7); an option or verb the lab does not model is refused with the
// real tools' messages and exit codes.
package systemd

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// Tools are the systemd programs bound to one machine.
type Tools struct{ M state.Machine }

// Programs lists systemctl and journalctl.
func (t Tools) Programs() shell.Registry {
	return shell.Registry{"systemctl": t.systemctl, "journalctl": t.journalctl}
}

// Version is the systemd version of the machine's distribution.
func (t Tools) Version() string {
	if t.M.Distro() == "debian-13" {
		return "257.8-1~deb13u2"
	}
	return "252.31-1~deb12u1"
}

func (t Tools) unitDir() string {
	if t.M.Distro() == "debian-13" {
		return "/usr/lib/systemd/system"
	}
	return "/lib/systemd/system"
}

// Stamp is systemd's timestamp format ("Mon 2026-07-13 10:15:02 UTC").
func Stamp(at time.Time) string { return at.UTC().Format("Mon 2006-01-02 15:04:05 MST") }

// Relative renders a time span as systemd's format_timestamp_relative does ("2h 3min",
// "3 days", "1 weeks 2 days"), without the " ago"/" left" suffix.
func Relative(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	day, week, month, year := 24*time.Hour, 7*24*time.Hour, 2629800*time.Second, 31557600*time.Second
	n := func(v time.Duration, unit string) string {
		if v == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", v, unit)
	}
	switch {
	case d >= year:
		return n(d/year, "year") + " " + n((d%year)/month, "month")
	case d >= month:
		return n(d/month, "month") + " " + n((d%month)/day, "day")
	case d >= week:
		return n(d/week, "week") + " " + n((d%week)/day, "day")
	case d >= 2*day:
		return fmt.Sprintf("%d days", d/day)
	case d >= 25*time.Hour:
		return fmt.Sprintf("1 day %dh", (d-day)/time.Hour)
	case d >= 6*time.Hour:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dmin", d/time.Hour, (d%time.Hour)/time.Minute)
	case d >= 5*time.Minute:
		return fmt.Sprintf("%dmin", d/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dmin %ds", d/time.Minute, (d%time.Minute)/time.Second)
	case d >= time.Second:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// BaseTimers are the timer units a Debian machine of the role has.
func BaseTimers(role string) []string {
	if role == state.Darwin {
		return nil
	}
	ts := []string{"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "logrotate.timer", "man-db.timer", "systemd-tmpfiles-clean.timer"}
	if role != state.LXC {
		ts = append(ts, "e2scrub_all.timer", "fstrim.timer")
	}
	if role == state.Proxmox {
		ts = append(ts, "pve-daily-update.timer")
	}
	return ts
}

// schedule is a timer's calendar: its period, the offset of the elapse in the period and
// its OnCalendar= text.
type schedule struct {
	period   time.Duration
	offset   time.Duration
	calendar string
}

func scheduleOf(name string) schedule {
	h := fnv.New32a()
	h.Write([]byte(name))
	jit := time.Duration(h.Sum32()%3600) * time.Second
	day := 24 * time.Hour
	switch name {
	case "apt-daily.timer":
		return schedule{12 * time.Hour, 6*time.Hour + 3*jit, "*-*-* 6,18:00"}
	case "apt-daily-upgrade.timer":
		return schedule{day, 6*time.Hour + jit, "*-*-* 6:00"}
	case "dpkg-db-backup.timer", "logrotate.timer":
		return schedule{day, 0, "daily"}
	case "man-db.timer":
		return schedule{day, 4 * jit, "daily"}
	case "e2scrub_all.timer":
		return schedule{7 * day, 6*day + 3*time.Hour + 10*time.Minute + jit/10, "Sun *-*-* 03:10:00"}
	case "fstrim.timer":
		return schedule{7 * day, jit, "weekly"}
	case "pve-daily-update.timer":
		return schedule{day, time.Hour + 2*jit, "*-*-* 1:00"}
	case "systemd-tmpfiles-clean.timer":
		return schedule{day, 15*time.Minute + jit/4, ""}
	}
	return schedule{day, 3*time.Hour + jit, "daily"}
}

// elapses returns a timer's next and last elapse (last zero when it has not run since boot).
func (t Tools) elapses(name string) (next, last time.Time) {
	now, boot := t.M.Now(), t.M.Boot()
	s := scheduleOf(name)
	var base time.Time
	if s.calendar == "" { // OnBootSec=15min, OnUnitActiveSec=1d
		base = boot.Add(s.offset)
	} else {
		base = now.Truncate(24 * time.Hour)
		if s.period == 7*24*time.Hour {
			base = base.AddDate(0, 0, -((int(base.Weekday()) + 6) % 7)) // Monday
		}
		base = base.Add(s.offset)
		for base.After(now) {
			base = base.Add(-s.period)
		}
	}
	for !base.After(now) {
		base = base.Add(s.period)
	}
	last = base.Add(-s.period)
	if last.Before(boot) {
		last = time.Time{}
	}
	return base, last
}

// opts is a parsed systemctl command line.
type opts struct {
	verb  string
	names []string
	flags map[string]string
}

func (o opts) has(keys ...string) bool {
	for _, k := range keys {
		if _, ok := o.flags[k]; ok {
			return true
		}
	}
	return false
}

// systemctl's options (systemctl(1)); the ones after "=" take a value.
var (
	systemctlLong = map[string]bool{
		"all": false, "type": true, "state": true, "property": true, "value": false, "no-legend": false, "legend": true,
		"plain": false, "no-pager": false, "full": false, "quiet": false, "now": false, "failed": false, "lines": true,
		"output": true, "system": false, "no-block": false, "no-ask-password": false, "recursive": false, "reverse": false,
		"show-types": false, "signal": true, "kill-whom": true, "runtime": false, "force": false, "job-mode": true,
		"user": false, "timestamp": true, "with-dependencies": false, "no-wall": false, "dry-run": false, "host": true,
		"machine": true, "wait": false, "no-reload": false,
	}
	systemctlShortVal  = "tpnosHM"
	systemctlShortFlag = "aqlfrP"
	shortToLong        = map[byte]string{'a': "all", 't': "type", 'p': "property", 'q': "quiet", 'l': "full", 'n': "lines",
		'o': "output", 's': "signal", 'r': "recursive", 'f': "force", 'H': "host", 'M': "machine"}
)

// parse reads args getopt_long-style; a refused option is reported as systemctl does.
func parse(inv *shell.Invocation, args []string, long map[string]bool, shortVal, shortFlag string, short map[byte]string) (opts, bool) {
	o := opts{flags: map[string]string{}}
	add := func(k, v string) {
		if k == "property" && o.flags[k] != "" {
			v = o.flags[k] + "," + v
		}
		o.flags[k] = v
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			o.names = append(o.names, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			k, v, hasV := strings.Cut(a[2:], "=")
			takes, ok := long[k]
			if !ok {
				fmt.Fprintf(inv.Stderr, "%s: unrecognized option '--%s'\n", inv.Name(), k)
				return o, false
			}
			if takes && !hasV {
				if i+1 >= len(args) {
					fmt.Fprintf(inv.Stderr, "%s: option '--%s' requires an argument\n", inv.Name(), k)
					return o, false
				}
				i++
				v = args[i]
			}
			add(k, v)
		case len(a) > 1 && a[0] == '-' && !isNumber(a):
			for j := 1; j < len(a); j++ {
				c := a[j]
				switch {
				case strings.IndexByte(shortVal, c) >= 0:
					v := a[j+1:]
					if v == "" {
						if i+1 >= len(args) {
							fmt.Fprintf(inv.Stderr, "%s: option requires an argument -- '%c'\n", inv.Name(), c)
							return o, false
						}
						i++
						v = args[i]
					}
					add(short[c], v)
					j = len(a)
				case strings.IndexByte(shortFlag, c) >= 0:
					if c == 'P' {
						add("value", "")
						add("property", "")
						continue
					}
					add(short[c], "")
				default:
					fmt.Fprintf(inv.Stderr, "%s: invalid option -- '%c'\n", inv.Name(), c)
					return o, false
				}
			}
		case o.verb == "":
			o.verb = a
		default:
			o.names = append(o.names, a)
		}
	}
	return o, true
}

func isNumber(s string) bool { _, err := strconv.Atoi(s); return err == nil }

func (t Tools) systemctl(_ context.Context, inv *shell.Invocation) int {
	o, ok := parse(inv, inv.Args[1:], systemctlLong, systemctlShortVal, systemctlShortFlag, shortToLong)
	if !ok {
		return 1
	}
	if o.has("user") {
		fmt.Fprintln(inv.Stderr, "Failed to connect to bus: $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR not defined (consider using --machine=<user>@.host --user to connect to bus of other user)")
		return 1
	}
	if o.verb == "" {
		o.verb = "list-units"
	}
	switch o.verb {
	case "list-units":
		return t.listUnits(inv, o)
	case "list-unit-files":
		return t.listUnitFiles(inv, o)
	case "list-timers":
		return t.listTimers(inv, o)
	case "is-active", "is-enabled", "is-failed":
		return t.isState(inv, o)
	case "status":
		return t.status(inv, o)
	case "show":
		return t.show(inv, o)
	case "cat":
		return t.cat(inv, o)
	case "start", "stop", "restart", "reload", "try-restart", "reload-or-restart", "enable", "disable", "kill":
		return t.change(inv, o)
	case "daemon-reload", "reset-failed":
		return 0
	}
	fmt.Fprintf(inv.Stderr, "Unknown command verb '%s'.\n", o.verb)
	return 1
}

// kind is a unit's type: "service", "timer", …
func kind(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return "service"
}

// sub is the unit's low-level state.
func sub(u state.Unit) (active, sub string) {
	if !u.Active {
		return "inactive", "dead"
	}
	if kind(u.Name) == "timer" {
		return "active", "waiting"
	}
	return "active", "running"
}

func (t Tools) isState(inv *shell.Invocation, o opts) int {
	if len(o.names) == 0 {
		fmt.Fprintln(inv.Stderr, "Too few arguments.")
		return 1
	}
	quiet := o.has("quiet")
	code := map[string]int{"is-active": 3, "is-enabled": 1, "is-failed": 1}[o.verb]
	okAny := false
	for _, n := range o.names {
		name := state.UnitName(n)
		u, exists := t.unit(name)
		var word string
		good := false
		switch o.verb {
		case "is-active":
			word, good = "inactive", u.Active
			if u.Active {
				word = "active"
			}
		case "is-failed":
			word = "inactive"
			if u.Active {
				word = "active"
			}
		case "is-enabled":
			if !exists {
				fmt.Fprintf(inv.Stderr, "Failed to get unit file state for %s: No such file or directory\n", name)
				continue
			}
			word, good = "disabled", u.Enabled
			if u.Enabled {
				word = "enabled"
			}
			if t.triggeredBy(name) != "" && !u.Enabled {
				word, good = "static", true
			}
		}
		if !quiet {
			fmt.Fprintln(inv.Stdout, word)
		}
		if good {
			okAny = true
		}
	}
	// is-active succeeds only if every unit is active; is-enabled and is-failed if any is.
	if o.verb == "is-active" {
		for _, n := range o.names {
			if u, _ := t.unit(state.UnitName(n)); !u.Active {
				return code
			}
		}
		return 0
	}
	if okAny {
		return 0
	}
	return code
}

func (t Tools) status(inv *shell.Invocation, o opts) int {
	if len(o.names) == 0 {
		units := t.M.Units()
		fmt.Fprintf(inv.Stdout, "● %s\n    State: running\n    Units: %d loaded (incl. loaded aliases)\n     Jobs: 0 queued\n   Failed: 0 units\n    Since: %s; %s ago\n  systemd: %s\n   CGroup: /\n",
			t.M.Hostname(), 180+len(units), Stamp(t.M.Boot()), Relative(t.M.Now().Sub(t.M.Boot())), strings.SplitN(t.Version(), "-", 2)[0])
		return 0
	}
	worst := 0
	for i, n := range o.names {
		if i > 0 {
			fmt.Fprintln(inv.Stdout)
		}
		if c := t.unitStatus(inv, state.UnitName(n), o); c > worst {
			worst = c
		}
	}
	return worst
}

func (t Tools) unitStatus(inv *shell.Invocation, name string, o opts) int {
	u, ok := t.unit(name)
	if !ok {
		fmt.Fprintf(inv.Stderr, "Unit %s could not be found.\n", name)
		return 4
	}
	if timer := t.triggeredBy(name); timer != "" {
		if _, own := t.M.Unit(name); !own {
			n := 10
			if v, ok := o.flags["lines"]; ok {
				n, _ = strconv.Atoi(v)
			}
			t.triggeredStatus(func(f string, a ...any) { fmt.Fprintf(inv.Stdout, f, a...) }, name, timer, u, n)
			return 3
		}
	}
	now := t.M.Now()
	act, sb := sub(u)
	dot := "○"
	if u.Active {
		dot = "●"
	}
	enabled := "disabled"
	if u.Enabled {
		enabled = "enabled"
	}
	w := inv.Stdout
	fmt.Fprintf(w, "%s %s - %s\n", dot, name, state.Describe(name))
	fmt.Fprintf(w, "     Loaded: loaded (%s/%s; %s; preset: enabled)\n", t.unitDir(), name, enabled)
	fmt.Fprintf(w, "     Active: %s (%s) since %s; %s ago\n", act, sb, Stamp(u.Since), Relative(now.Sub(u.Since)))
	if kind(name) == "timer" {
		next, _ := t.elapses(name)
		if u.Active {
			fmt.Fprintf(w, "    Trigger: %s; %s left\n", Stamp(next), Relative(next.Sub(now)))
		} else {
			fmt.Fprintln(w, "    Trigger: n/a")
		}
		fmt.Fprintf(w, "   Triggers: ● %s\n", strings.TrimSuffix(name, ".timer")+".service")
	} else if u.Active {
		proc := state.ProcessName(name)
		fmt.Fprintf(w, "   Main PID: %d (%s)\n      Tasks: %d (limit: 4915)\n     Memory: %.1fM\n        CPU: %s\n     CGroup: /system.slice/%s\n             └─%d /usr/sbin/%s\n",
			u.PID, proc, 1+u.PID%7, t.M.Jitter(48, 0.1), "1min 2.345s", name, u.PID, proc)
	}
	n := 10
	if v, ok := o.flags["lines"]; ok {
		n, _ = strconv.Atoi(v)
	}
	if n > 0 {
		fmt.Fprintln(w)
		for _, e := range lastN(t.unitEntries(u), n) {
			fmt.Fprintln(w, e.short(t.M.Hostname(), false))
		}
	}
	if !u.Active {
		return 3
	}
	return 0
}

// props are a unit's properties as systemctl show prints them, in its order.
func (t Tools) props(name string) [][2]string {
	u, ok := t.unit(name)
	act, sb := sub(u)
	load, file, fileState := "loaded", t.unitDir()+"/"+name, "disabled"
	if u.Enabled {
		fileState = "enabled"
	}
	if _, own := t.M.Unit(name); !own && ok {
		fileState = "static"
	}
	if !ok {
		load, file, fileState, act, sb = "not-found", "", "", "inactive", "dead"
	}
	pid, mem, enter := "0", "[not set]", ""
	if u.Active {
		if kind(name) == "service" {
			pid, mem = strconv.Itoa(u.PID), strconv.Itoa(40<<20+u.PID*4096)
		}
		enter = Stamp(u.Since)
	}
	out := [][2]string{}
	if kind(name) == "service" {
		out = append(out, [2]string{"Type", "simple"}, [2]string{"Restart", "on-failure"}, [2]string{"NRestarts", "0"},
			[2]string{"MainPID", pid}, [2]string{"ExecMainPID", pid}, [2]string{"Result", "success"}, [2]string{"MemoryCurrent", mem})
	}
	if kind(name) == "timer" && ok {
		next, last := t.elapses(name)
		lastS := "n/a"
		if !last.IsZero() {
			lastS = Stamp(last)
		}
		out = append(out, [2]string{"Unit", strings.TrimSuffix(name, ".timer") + ".service"},
			[2]string{"NextElapseUSecRealtime", Stamp(next)}, [2]string{"LastTriggerUSec", lastS}, [2]string{"Result", "success"})
	}
	return append(out, [2]string{"Id", name}, [2]string{"Names", name}, [2]string{"Description", state.Describe(name)},
		[2]string{"LoadState", load}, [2]string{"ActiveState", act}, [2]string{"SubState", sb},
		[2]string{"FragmentPath", file}, [2]string{"UnitFileState", fileState}, [2]string{"UnitFilePreset", "enabled"},
		[2]string{"ActiveEnterTimestamp", enter}, [2]string{"CanStart", "yes"}, [2]string{"CanStop", "yes"})
}

func (t Tools) show(inv *shell.Invocation, o opts) int {
	names := o.names
	if len(names) == 0 {
		fmt.Fprintf(inv.Stdout, "Version=%s\nArchitecture=x86-64\nSystemState=running\nNNames=%d\nNFailedUnits=0\n", strings.SplitN(t.Version(), "-", 2)[0], 180+len(t.M.Units()))
		return 0
	}
	var want []string
	if p := o.flags["property"]; p != "" {
		for _, k := range strings.Split(p, ",") {
			if k != "" {
				want = append(want, k)
			}
		}
	}
	for i, n := range names {
		if i > 0 && len(want) != 1 {
			fmt.Fprintln(inv.Stdout)
		}
		props := t.props(state.UnitName(n))
		get := map[string]string{}
		for _, p := range props {
			get[p[0]] = p[1]
		}
		if len(want) == 0 {
			for _, p := range props {
				if p[1] != "" || o.has("all") {
					fmt.Fprintf(inv.Stdout, "%s=%s\n", p[0], p[1])
				}
			}
			continue
		}
		for _, k := range want {
			v, ok := get[k]
			if !ok {
				continue // systemctl show skips a property the unit does not have
			}
			if o.has("value") {
				fmt.Fprintln(inv.Stdout, v)
			} else {
				fmt.Fprintf(inv.Stdout, "%s=%s\n", k, v)
			}
		}
	}
	return 0
}

func (t Tools) cat(inv *shell.Invocation, o opts) int {
	if len(o.names) == 0 {
		fmt.Fprintln(inv.Stderr, "Too few arguments.")
		return 1
	}
	for i, n := range o.names {
		name := state.UnitName(n)
		if _, ok := t.unit(name); !ok {
			fmt.Fprintf(inv.Stderr, "No files found for %s.\n", name)
			return 1
		}
		if i > 0 {
			fmt.Fprintln(inv.Stdout)
		}
		fmt.Fprintf(inv.Stdout, "# %s/%s\n", t.unitDir(), name)
		desc := state.Describe(name)
		if kind(name) == "timer" {
			s := scheduleOf(name)
			fmt.Fprintf(inv.Stdout, "[Unit]\nDescription=%s\n\n[Timer]\n", desc)
			if s.calendar == "" {
				fmt.Fprint(inv.Stdout, "OnBootSec=15min\nOnUnitActiveSec=1d\n")
			} else {
				fmt.Fprintf(inv.Stdout, "OnCalendar=%s\nRandomizedDelaySec=1h\nPersistent=true\n", s.calendar)
			}
			fmt.Fprint(inv.Stdout, "\n[Install]\nWantedBy=timers.target\n")
			continue
		}
		if _, own := t.M.Unit(name); !own {
			fmt.Fprintf(inv.Stdout, "[Unit]\nDescription=%s\n\n[Service]\nType=oneshot\nExecStart=/usr/lib/%s\n", desc, strings.TrimSuffix(name, ".service"))
			continue
		}
		proc := state.ProcessName(name)
		fmt.Fprintf(inv.Stdout, "[Unit]\nDescription=%s\nAfter=network.target\n\n[Service]\nType=simple\nExecStart=/usr/sbin/%s\nRestart=on-failure\n\n[Install]\nWantedBy=multi-user.target\n", desc, proc)
	}
	return 0
}

func (t Tools) change(inv *shell.Invocation, o opts) int {
	if len(o.names) == 0 {
		fmt.Fprintln(inv.Stderr, "Too few arguments.")
		return 1
	}
	verb := o.verb
	for _, n := range o.names {
		name := state.UnitName(n)
		now := t.M.Now()
		set := func(u *state.Unit, active bool, pid func() int) {
			if active && !u.Active {
				u.PID = pid()
			}
			u.Active, u.Since = active, now
		}
		ok := t.M.UpdateUnit(name, func(u *state.Unit, pid func() int) {
			switch verb {
			case "start":
				set(u, true, pid)
			case "stop", "kill":
				set(u, false, pid)
			case "restart", "reload-or-restart":
				u.Active = false
				set(u, true, pid)
			case "try-restart":
				if u.Active {
					u.Active = false
					set(u, true, pid)
				}
			case "enable":
				u.Enabled = true
				if o.has("now") {
					set(u, true, pid)
				}
			case "disable":
				u.Enabled = false
				if o.has("now") {
					set(u, false, pid)
				}
			}
		})
		if !ok {
			if verb == "enable" || verb == "disable" {
				fmt.Fprintf(inv.Stderr, "Failed to %s unit: Unit file %s does not exist.\n", verb, name)
				return 1
			}
			fmt.Fprintf(inv.Stderr, "Failed to %s %s: Unit %s not found.\n", verb, name, name)
			return 5
		}
		if verb == "enable" && !o.has("quiet") {
			target := "multi-user.target"
			if kind(name) == "timer" {
				target = "timers.target"
			}
			fmt.Fprintf(inv.Stderr, "Created symlink /etc/systemd/system/%s.wants/%s → %s/%s.\n", target, name, t.unitDir(), name)
		}
	}
	return 0
}

// legend reports whether the header and footer are shown (--no-legend, --legend=no).
func legend(o opts) bool {
	if o.has("no-legend") {
		return false
	}
	v, ok := o.flags["legend"]
	return !ok || !(v == "false" || v == "no" || v == "0")
}

// table writes rows as systemd's format-table does: columns separated by one space, each
// padded to its widest cell, the last one unpadded.
func table(inv *shell.Invocation, lead string, header []string, rows [][]string, showHeader bool) {
	widths := make([]int, len(header))
	all := rows
	if showHeader {
		all = append([][]string{header}, rows...)
	}
	for _, r := range all {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for ri, r := range all {
		var b strings.Builder
		if ri == 0 && showHeader {
			b.WriteString(strings.Repeat(" ", len([]rune(lead))))
		} else {
			b.WriteString(lead)
		}
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))+1))
		}
		fmt.Fprintln(inv.Stdout, b.String())
	}
}

func (t Tools) listUnits(inv *shell.Invocation, o opts) int {
	states := splitList(o.flags["state"])
	if o.has("failed") {
		states = []string{"failed"}
	}
	types := splitList(o.flags["type"])
	all := o.has("all")
	var rows [][]string
	for _, u := range t.M.Units() {
		if len(o.names) > 0 && !matchAny(o.names, u.Name) {
			continue
		}
		act, sb := sub(u)
		if len(types) > 0 && !contains(types, kind(u.Name)) {
			continue
		}
		if len(states) > 0 && !contains(states, act) && !contains(states, sb) && !contains(states, "loaded") {
			continue
		}
		if !u.Active && len(states) == 0 && !all {
			continue
		}
		rows = append(rows, []string{u.Name, "loaded", act, sb, state.Describe(u.Name)})
	}
	lead := "  "
	if o.has("plain") {
		lead = ""
	}
	leg := legend(o)
	if len(rows) == 0 && leg {
		fmt.Fprintln(inv.Stdout, "0 loaded units listed. Pass --all to see loaded but inactive units, too.")
		fmt.Fprintln(inv.Stdout, "To show all installed unit files use 'systemctl list-unit-files'.")
		return 0
	}
	table(inv, lead, []string{"UNIT", "LOAD", "ACTIVE", "SUB", "DESCRIPTION"}, rows, leg)
	if leg {
		fmt.Fprint(inv.Stdout, "\nLOAD   = Reflects whether the unit definition was properly loaded.\nACTIVE = The high-level unit activation state, i.e. generalization of SUB.\nSUB    = The low-level unit activation state, values depend on unit type.\n")
		if all {
			fmt.Fprintf(inv.Stdout, "%d loaded units listed.\n", len(rows))
		} else {
			fmt.Fprintf(inv.Stdout, "%d loaded units listed. Pass --all to see loaded but inactive units, too.\n", len(rows))
		}
		fmt.Fprintln(inv.Stdout, "To show all installed unit files use 'systemctl list-unit-files'.")
	}
	return 0
}

func (t Tools) listUnitFiles(inv *shell.Invocation, o opts) int {
	types := splitList(o.flags["type"])
	states := splitList(o.flags["state"])
	var rows [][]string
	for _, u := range t.M.Units() {
		st := "disabled"
		if u.Enabled {
			st = "enabled"
		}
		if (len(types) > 0 && !contains(types, kind(u.Name))) || (len(states) > 0 && !contains(states, st)) ||
			(len(o.names) > 0 && !matchAny(o.names, u.Name)) {
			continue
		}
		rows = append(rows, []string{u.Name, st, "enabled"})
	}
	leg := legend(o)
	table(inv, "", []string{"UNIT FILE", "STATE", "PRESET"}, rows, leg)
	if leg {
		fmt.Fprintf(inv.Stdout, "\n%d unit files listed.\n", len(rows))
	}
	return 0
}

func (t Tools) listTimers(inv *shell.Invocation, o opts) int {
	now := t.M.Now()
	type timer struct {
		next, last time.Time
		name       string
		active     bool
	}
	var ts []timer
	for _, u := range t.M.Units() {
		if kind(u.Name) != "timer" || (!u.Active && !o.has("all")) || (len(o.names) > 0 && !matchAny(o.names, u.Name)) {
			continue
		}
		next, last := t.elapses(u.Name)
		ts = append(ts, timer{next, last, u.Name, u.Active})
	}
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].active != ts[j].active {
			return ts[i].active
		}
		return ts[i].next.Before(ts[j].next)
	})
	var rows [][]string
	for _, x := range ts {
		next, left, last, passed := "-", "-", "-", "-"
		if x.active {
			next, left = Stamp(x.next), Relative(x.next.Sub(now))+" left"
		}
		if !x.last.IsZero() {
			last, passed = Stamp(x.last), Relative(now.Sub(x.last))+" ago"
		}
		rows = append(rows, []string{next, left, last, passed, x.name, strings.TrimSuffix(x.name, ".timer") + ".service"})
	}
	leg := legend(o)
	table(inv, "", []string{"NEXT", "LEFT", "LAST", "PASSED", "UNIT", "ACTIVATES"}, rows, leg && len(rows) > 0)
	if leg {
		if len(rows) > 0 {
			fmt.Fprintln(inv.Stdout)
		}
		fmt.Fprintf(inv.Stdout, "%d timers listed.\n", len(rows))
		if !o.has("all") {
			fmt.Fprintln(inv.Stdout, "Pass --all to see loaded but inactive timers, too.")
		}
	}
	return 0
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// matchAny matches a unit against patterns (shell globs, or names without the suffix).
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == name || state.UnitName(p) == name || globMatch(p, name) {
			return true
		}
	}
	return false
}

func globMatch(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(p[1:], s[1:])
	}
	return s != "" && s[0] == p[0] && globMatch(p[1:], s[1:])
}
