package system

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// processes lists (pid, command) pairs of the running units.
func (m *Machine) processes() [][2]string {
	out := [][2]string{{"1", "systemd"}}
	if m.IsDarwin() {
		out = [][2]string{{"1", "launchd"}}
	}
	for _, u := range m.sortedUnits() {
		if u.active && state.IsService(u.name) {
			out = append(out, [2]string{strconv.Itoa(u.pid), state.ProcessName(u.name)})
		}
	}
	return out
}

func (m *Machine) ps(_ context.Context, inv *shell.Invocation) int {
	procs := m.processes()
	long := false
	for _, a := range inv.Args[1:] {
		if strings.Contains(a, "u") || strings.Contains(a, "f") || strings.Contains(a, "e") {
			long = true
		}
	}
	if !long {
		fmt.Fprintf(inv.Stdout, "    PID TTY          TIME CMD\n%7d ?        00:00:00 bash\n%7d ?        00:00:00 ps\n", 4100, 4101)
		return 0
	}
	fmt.Fprintln(inv.Stdout, "USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND")
	for _, p := range procs {
		fmt.Fprintf(inv.Stdout, "%-8s %7s  0.0  0.2  98304  8192 ?        Ss   %s   0:01 %s\n", "root", p[0], m.boot.Format("Jan02"), p[1])
	}
	return 0
}

func (m *Machine) pgrep(_ context.Context, inv *shell.Invocation) int {
	var pattern string
	exact, list := false, false
	for _, a := range inv.Args[1:] {
		switch a {
		case "-x":
			exact = true
		case "-l", "-a":
			list = true
		case "-f":
		default:
			if !strings.HasPrefix(a, "-") {
				pattern = a
			}
		}
	}
	found := false
	for _, p := range m.processes() {
		if (exact && p[1] == pattern) || (!exact && strings.Contains(p[1], pattern)) {
			found = true
			if list {
				fmt.Fprintf(inv.Stdout, "%s %s\n", p[0], p[1])
			} else {
				fmt.Fprintln(inv.Stdout, p[0])
			}
		}
	}
	if !found {
		return 1
	}
	return 0
}

func (m *Machine) pidof(_ context.Context, inv *shell.Invocation) int {
	var pids []string
	for _, name := range inv.Args[1:] {
		for _, p := range m.processes() {
			if p[1] == name {
				pids = append(pids, p[0])
			}
		}
	}
	if len(pids) == 0 {
		return 1
	}
	fmt.Fprintln(inv.Stdout, strings.Join(pids, " "))
	return 0
}
