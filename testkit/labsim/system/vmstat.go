package system

import (
	"context"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// vmstat prints one report of vmstat(8) (procps 4.0.2 on Debian 12; Debian 13's 4.0.4 adds
// the gu column); -s the event counters, -S M/-w the usual variants.
func (m *Machine) vmstat(_ context.Context, inv *shell.Invocation) int {
	unit := int64(1)
	wide := false
	for i := 1; i < len(inv.Args); i++ {
		a := inv.Args[i]
		switch {
		case a == "-S" && i+1 < len(inv.Args):
			i++
			unit = map[string]int64{"k": 1, "K": 1, "m": 1000, "M": 1024}[inv.Args[i]]
			if unit == 0 {
				fmt.Fprintf(inv.Stderr, "vmstat: -S requires k, K, m or M (default is KiB)\n")
				return 1
			}
		case a == "-w" || a == "--wide":
			wide = true
		case a == "-a" || a == "-n" || a == "-t" || a == "--one-header" || a == "--timestamp":
		case strings.HasPrefix(a, "--"):
			fmt.Fprintf(inv.Stderr, "vmstat: unrecognized option '%s'\nTry 'vmstat --help' for more information.\n", a)
			return 1
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(inv.Stderr, "vmstat: invalid option -- '%c'\nTry 'vmstat --help' for more information.\n", a[1])
			return 1
		}
	}
	mem := m.readMemory()
	us, sy, id, wa := m.cpuSplit()
	gu := m.cfg.Distro == "debian-13"
	cpuHead, cpuCols := "------cpu-----", "us sy id wa st"
	if gu {
		cpuHead, cpuCols = "-------cpu-------", "us sy id wa st gu"
	}
	w := 6
	if wide {
		w = 10
	}
	fmt.Fprintf(inv.Stdout, "procs %s ---swap-- -----io---- -system-- %s\n", centre("memory", 4*w+3), cpuHead)
	fmt.Fprintf(inv.Stdout, " r  b %*s %*s %*s %*s   si   so    bi    bo   in   cs %s\n", w, "swpd", w, "free", w, "buff", w, "cache", cpuCols)
	row := fmt.Sprintf("%2d %2d %*d %*d %*d %*d %4d %4d %5d %5d %4d %4d %2.0f %2.0f %2.0f %2.0f %2d", 1, 0,
		w, (mem.swapTotal-mem.swapFree)/unit, w, mem.free/unit, w, mem.buffers/unit, w, mem.cached/unit, 0, 0, 3, 12, 45, 78, us, sy, id, wa, 0)
	if gu {
		row += "  0"
	}
	fmt.Fprintln(inv.Stdout, row)
	return 0
}

func centre(s string, w int) string {
	d := w - len(s)
	if d <= 0 {
		return s
	}
	return strings.Repeat("-", d-d/2) + s + strings.Repeat("-", d/2)
}
