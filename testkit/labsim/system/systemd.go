package system

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

func describeUnit(name string) string {
	known := map[string]string{
		"ssh.service":              "OpenBSD Secure Shell server",
		"cron.service":             "Regular background program processing daemon",
		"systemd-journald.service": "Journal Service",
		"postfix.service":          "Postfix Mail Transport Agent",
		"pve-cluster.service":      "The Proxmox VE cluster filesystem",
		"pvedaemon.service":        "PVE API Daemon",
		"pveproxy.service":         "PVE API Proxy Server",
		"pvestatd.service":         "PVE Status Daemon",
		"docker.service":           "Docker Application Container Engine",
	}
	if d, ok := known[name]; ok {
		return d
	}
	base := strings.TrimSuffix(name, ".service")
	if base == "" {
		return name
	}
	return strings.ToUpper(base[:1]) + base[1:]
}

// durationAgo renders systemd's "2h 3min ago" style.
func durationAgo(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dmin %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dmin", int(d.Hours()), int(d.Minutes())%60)
	case d < 7*24*time.Hour:
		return fmt.Sprintf("%d days %dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	return fmt.Sprintf("%d weeks %d days", int(d.Hours())/24/7, int(d.Hours())/24%7)
}

func (m *Machine) systemctl(_ context.Context, inv *shell.Invocation) int {
	var verb string
	var names []string
	flags := map[string]string{}
	for _, a := range inv.Args[1:] {
		switch {
		case strings.HasPrefix(a, "--"):
			k, v, _ := strings.Cut(a[2:], "=")
			flags[k] = v
		case strings.HasPrefix(a, "-"):
			for _, c := range a[1:] {
				flags[string(c)] = ""
			}
		case verb == "":
			verb = a
		default:
			names = append(names, a)
		}
	}
	if verb == "" {
		verb = "list-units"
	}
	quiet := hasKey(flags, "quiet", "q")
	switch verb {
	case "list-units", "list-unit-files":
		return m.listUnits(inv, flags, verb == "list-unit-files")
	case "is-active", "is-enabled", "is-failed":
		code := 3
		if verb == "is-enabled" {
			code = 1
		}
		worst := 0
		for _, n := range names {
			name := UnitName(n)
			st, ok := m.unit(name)
			active, enabled := st.active, st.enabled
			var word string
			okState := false
			switch verb {
			case "is-active":
				word, okState = "inactive", active
				if active {
					word = "active"
				}
			case "is-failed":
				word, okState = "inactive", false
				if active {
					word = "active"
				}
			case "is-enabled":
				if !ok {
					fmt.Fprintf(inv.Stderr, "Failed to get unit file state for %s: No such file or directory\n", name)
					worst = 1
					continue
				}
				word, okState = "disabled", enabled
				if enabled {
					word = "enabled"
				}
			}
			if !quiet {
				fmt.Fprintln(inv.Stdout, word)
			}
			if !okState {
				worst = code
				if verb == "is-failed" {
					worst = 1
				}
			}
		}
		if len(names) == 0 {
			fmt.Fprintln(inv.Stderr, "Too few arguments.")
			return 1
		}
		return worst
	case "status":
		if len(names) == 0 {
			fmt.Fprintf(inv.Stdout, "● %s\n    State: running\n    Units: %d loaded (incl. loaded aliases)\n     Jobs: 0 queued\n   Failed: 0 units\n    Since: %s; %s ago\n",
				m.cfg.Hostname, len(m.units), m.boot.Format("Mon 2006-01-02 15:04:05 MST"), durationAgo(m.now().Sub(m.boot)))
			return 0
		}
		worst := 0
		for i, n := range names {
			if i > 0 {
				fmt.Fprintln(inv.Stdout)
			}
			if c := m.unitStatus(inv, UnitName(n)); c > worst {
				worst = c
			}
		}
		return worst
	case "start", "stop", "restart", "reload", "try-restart", "reload-or-restart", "enable", "disable", "kill":
		if len(names) == 0 {
			fmt.Fprintln(inv.Stderr, "Too few arguments.")
			return 1
		}
		for _, n := range names {
			if n == "--now" {
				continue
			}
			name := UnitName(n)
			m.mu.Lock()
			u, ok := m.units[name]
			if ok {
				switch verb {
				case "start":
					m.setActive(u, true)
				case "stop", "kill":
					m.setActive(u, false)
				case "restart", "reload-or-restart":
					u.active = false
					m.setActive(u, true)
				case "try-restart":
					if u.active {
						u.active = false
						m.setActive(u, true)
					}
				case "enable":
					u.enabled = true
					if hasKey(flags, "now") {
						m.setActive(u, true)
					}
				case "disable":
					u.enabled = false
					if hasKey(flags, "now") {
						m.setActive(u, false)
					}
				}
			}
			m.mu.Unlock()
			if !ok {
				if verb == "enable" || verb == "disable" {
					fmt.Fprintf(inv.Stderr, "Failed to %s unit: Unit file %s does not exist.\n", verb, name)
					return 1
				}
				fmt.Fprintf(inv.Stderr, "Failed to %s %s: Unit %s not found.\n", verb, name, name)
				return 5
			}
			if verb == "enable" && !quiet {
				fmt.Fprintf(inv.Stderr, "Created symlink /etc/systemd/system/multi-user.target.wants/%s → /lib/systemd/system/%s.\n", name, name)
			}
		}
		return 0
	case "daemon-reload", "reset-failed":
		return 0
	case "show":
		for _, n := range names {
			name := UnitName(n)
			st, ok := m.unit(name)
			active, sub, pid := "inactive", "dead", 0
			if ok && st.active {
				active, sub, pid = "active", "running", st.pid
			}
			load := "loaded"
			if !ok {
				load = "not-found"
			}
			props := map[string]string{"Id": name, "LoadState": load, "ActiveState": active, "SubState": sub, "MainPID": strconv.Itoa(pid), "Description": describeUnit(name)}
			if p, ok := flags["property"]; ok {
				for _, k := range strings.Split(p, ",") {
					if hasKey(flags, "value") {
						fmt.Fprintln(inv.Stdout, props[k])
					} else {
						fmt.Fprintf(inv.Stdout, "%s=%s\n", k, props[k])
					}
				}
				continue
			}
			for _, k := range []string{"Id", "Description", "LoadState", "ActiveState", "SubState", "MainPID"} {
				fmt.Fprintf(inv.Stdout, "%s=%s\n", k, props[k])
			}
		}
		return 0
	}
	fmt.Fprintf(inv.Stderr, "Unknown command verb '%s'.\n", verb)
	return 1
}

// unit is a copy of the unit's state (ok false when the machine has no such unit).
func (m *Machine) unit(name string) (unitState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.units[name]
	if !ok {
		return unitState{}, false
	}
	return *u, true
}

// optValue is the value of the option at args[*i]: after "=" in --name=value, attached to
// a short option (-n5), or else the next argument, which it consumes.
func optValue(args []string, i *int) string {
	a := args[*i]
	if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
		return v
	}
	if len(a) > 2 && a[0] == '-' && a[1] != '-' {
		return a[2:]
	}
	if *i+1 < len(args) {
		*i++
		return args[*i]
	}
	return ""
}

func hasKey(m map[string]string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

func (m *Machine) unitStatus(inv *shell.Invocation, name string) int {
	st, ok := m.unit(name)
	if !ok {
		fmt.Fprintf(inv.Stderr, "Unit %s could not be found.\n", name)
		return 4
	}
	now := m.now()
	dot, active := "○", "inactive (dead)"
	if st.active {
		dot, active = "●", "active (running)"
	}
	enabled := "disabled"
	if st.enabled {
		enabled = "enabled"
	}
	since := fmt.Sprintf("since %s; %s ago", st.since.Format("Mon 2006-01-02 15:04:05 MST"), durationAgo(now.Sub(st.since)))
	fmt.Fprintf(inv.Stdout, "%s %s - %s\n", dot, name, describeUnit(name))
	fmt.Fprintf(inv.Stdout, "     Loaded: loaded (/lib/systemd/system/%s; %s; preset: enabled)\n", name, enabled)
	fmt.Fprintf(inv.Stdout, "     Active: %s %s\n", active, since)
	if st.active {
		proc := processName(name)
		fmt.Fprintf(inv.Stdout, "   Main PID: %d (%s)\n      Tasks: %d (limit: 4915)\n     Memory: %.1fM\n        CPU: %s\n     CGroup: /system.slice/%s\n             └─%d /usr/sbin/%s\n",
			st.pid, proc, 3+st.pid%17, m.jitter(48, 0.1), "1min 2.345s", name, st.pid, proc)
	}
	fmt.Fprintln(inv.Stdout)
	for _, l := range m.journalFor(name, st, 3) {
		fmt.Fprintln(inv.Stdout, l)
	}
	if !st.active {
		return 3
	}
	return 0
}

func (m *Machine) listUnits(inv *shell.Invocation, flags map[string]string, files bool) int {
	state := flags["state"]
	units := m.sortedUnits()
	plain := hasKey(flags, "plain")
	legend := !hasKey(flags, "no-legend")
	if v, ok := flags["legend"]; ok && (v == "false" || v == "no" || v == "0") {
		legend = false
	}
	if hasKey(flags, "failed") {
		state = "failed"
	}
	if files {
		if legend {
			fmt.Fprintf(inv.Stdout, "%-40s %-15s %s\n", "UNIT FILE", "STATE", "PRESET")
		}
		for _, u := range units {
			st := "disabled"
			if u.enabled {
				st = "enabled"
			}
			fmt.Fprintf(inv.Stdout, "%-40s %-15s %s\n", u.name, st, "enabled")
		}
		if legend {
			fmt.Fprintf(inv.Stdout, "\n%d unit files listed.\n", len(units))
		}
		return 0
	}
	type row struct{ unit, load, active, sub, desc string }
	var rows []row
	for _, u := range units {
		r := row{u.name, "loaded", "inactive", "dead", describeUnit(u.name)}
		if u.active {
			r.active, r.sub = "active", "running"
		}
		switch state {
		case "", r.active, r.sub:
		default:
			continue
		}
		if !u.active && state == "" && !hasKey(flags, "all", "a") {
			continue
		}
		rows = append(rows, r)
	}
	w := [4]int{len("UNIT"), len("LOAD"), len("ACTIVE"), len("SUB")}
	for _, r := range rows {
		w[0], w[1], w[2], w[3] = max(w[0], len(r.unit)), max(w[1], len(r.load)), max(w[2], len(r.active)), max(w[3], len(r.sub))
	}
	lead := "  "
	if plain {
		lead = ""
	}
	if legend {
		fmt.Fprintf(inv.Stdout, "%s%-*s %-*s %-*s %-*s %s\n", lead, w[0], "UNIT", w[1], "LOAD", w[2], "ACTIVE", w[3], "SUB", "DESCRIPTION")
	}
	for _, r := range rows {
		fmt.Fprintf(inv.Stdout, "%s%-*s %-*s %-*s %-*s %s\n", lead, w[0], r.unit, w[1], r.load, w[2], r.active, w[3], r.sub, r.desc)
	}
	if legend {
		fmt.Fprintf(inv.Stdout, "\nLOAD   = Reflects whether the unit definition was properly loaded.\nACTIVE = The high-level unit activation state, i.e. generalization of SUB.\nSUB    = The low-level unit activation state, values depend on unit type.\n%d loaded units listed.\n", len(rows))
	}
	return 0
}

// journalFor fabricates the last n journal lines of a unit from its state.
func (m *Machine) journalFor(name string, st unitState, n int) []string {
	host := m.cfg.Hostname
	stamp := func(t time.Time) string { return t.Format("Jan 02 15:04:05") }
	proc := processName(name)
	desc := describeUnit(name)
	var lines []string
	t := st.since
	if st.active {
		lines = append(lines,
			fmt.Sprintf("%s %s systemd[1]: Starting %s - %s...", stamp(t.Add(-time.Second)), host, name, desc),
			fmt.Sprintf("%s %s systemd[1]: Started %s - %s.", stamp(t), host, name, desc),
			fmt.Sprintf("%s %s %s[%d]: listening, ready", stamp(t.Add(2*time.Second)), host, proc, st.pid),
		)
		// Periodic lines on the hour, the latest ones before now.
		now := m.now()
		for k := n; k >= 1; k-- {
			at := now.Truncate(time.Hour).Add(-time.Duration(k-1) * time.Hour)
			if at.After(t.Add(2 * time.Second)) {
				lines = append(lines, fmt.Sprintf("%s %s %s[%d]: health check ok", stamp(at), host, proc, st.pid))
			}
		}
	} else {
		lines = append(lines,
			fmt.Sprintf("%s %s systemd[1]: Stopping %s - %s...", stamp(t.Add(-time.Second)), host, name, desc),
			fmt.Sprintf("%s %s systemd[1]: %s: Deactivated successfully.", stamp(t), host, name),
			fmt.Sprintf("%s %s systemd[1]: Stopped %s - %s.", stamp(t), host, name, desc),
		)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func (m *Machine) journalctl(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	n := 10
	var units []string
	catOutput := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func() string { return optValue(args, &i) }
		switch {
		case a == "-u" || strings.HasPrefix(a, "--unit") || (strings.HasPrefix(a, "-u") && len(a) > 2):
			units = append(units, UnitName(val()))
		case a == "-n" || strings.HasPrefix(a, "--lines") || (strings.HasPrefix(a, "-n") && len(a) > 2):
			if v, err := strconv.Atoi(val()); err == nil {
				n = v
			}
		case a == "-o" || strings.HasPrefix(a, "--output"):
			catOutput = val() == "cat"
		case a == "-p" || a == "--since" || a == "--until" || a == "-S" || a == "-U" || a == "--priority":
			val()
		}
	}
	var lines []string
	if len(units) == 0 {
		for _, u := range m.sortedUnits() {
			lines = append(lines, m.journalFor(u.name, u, 2)...)
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
	} else {
		for _, name := range units {
			st, ok := m.unit(name)
			if ok {
				lines = append(lines, m.journalFor(name, st, n)...)
			}
		}
	}
	if len(lines) == 0 {
		fmt.Fprintln(inv.Stdout, "-- No entries --")
		return 0
	}
	for _, l := range lines {
		if catOutput {
			if i := strings.Index(l, "]: "); i >= 0 {
				l = l[i+3:]
			}
		}
		fmt.Fprintln(inv.Stdout, l)
	}
	return 0
}
