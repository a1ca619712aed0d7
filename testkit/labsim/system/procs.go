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
