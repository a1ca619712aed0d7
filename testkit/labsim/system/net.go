package system

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

func (m *Machine) networkDown() bool {
	return m.cfg.NetworkDown != nil && m.cfg.NetworkDown()
}

// hang blocks until ctx ends, as a call over a black-holed network does.
func hang(ctx context.Context) int {
	<-ctx.Done()
	return 143
}

func (m *Machine) resolve(name string) (string, bool) {
	if _, err := netip.ParseAddr(name); err == nil {
		return name, true
	}
	switch name {
	case "localhost":
		return "127.0.0.1", true
	case m.cfg.Hostname:
		if m.cfg.IPv4 != "" {
			return m.cfg.IPv4, true
		}
		return "127.0.1.1", true
	}
	if m.cfg.Resolve != nil {
		return m.cfg.Resolve(name)
	}
	return "", false
}

func (m *Machine) getent(ctx context.Context, inv *shell.Invocation) int {
	if len(inv.Args) < 2 {
		fmt.Fprintln(inv.Stderr, "Usage: getent [OPTION...] database [key ...]")
		return 1
	}
	switch inv.Args[1] {
	case "hosts", "ahosts", "ahostsv4":
	case "passwd":
		return m.getentDB(inv, m.passwd(), inv.Args[2:])
	case "group":
		return m.getentDB(inv, m.groups(), inv.Args[2:])
	default:
		fmt.Fprintf(inv.Stderr, "Unknown database: %s\n", inv.Args[1])
		return 1
	}
	code := 0
	for _, name := range inv.Args[2:] {
		addr, ok := m.resolve(name)
		local := ok && (name == "localhost" || name == m.cfg.Hostname || addr == name)
		if !local && m.networkDown() {
			return hang(ctx)
		}
		if !ok {
			code = 2
			continue
		}
		if inv.Args[1] == "hosts" {
			fmt.Fprintf(inv.Stdout, "%-15s %s\n", addr, name)
		} else {
			fmt.Fprintf(inv.Stdout, "%-15s STREAM %s\n%-15s DGRAM  \n%-15s RAW    \n", addr, name, addr, addr)
		}
	}
	return code
}

func (m *Machine) ping(ctx context.Context, inv *shell.Invocation) int {
	count, wait, interval := -1, 10*time.Second, time.Second
	quiet := false
	var target string
	args := inv.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string { return optValue(args, &i) }
		switch {
		case strings.HasPrefix(a, "-c"):
			count, _ = strconv.Atoi(next())
		case strings.HasPrefix(a, "-W"):
			if f, err := strconv.ParseFloat(next(), 64); err == nil {
				wait = time.Duration(f * float64(time.Second))
			}
		case strings.HasPrefix(a, "-t") && m.IsDarwin():
			if f, err := strconv.ParseFloat(next(), 64); err == nil {
				wait = time.Duration(f * float64(time.Second))
			}
		case strings.HasPrefix(a, "-w") || strings.HasPrefix(a, "-t"):
			next()
		case strings.HasPrefix(a, "-i"):
			if f, err := strconv.ParseFloat(next(), 64); err == nil {
				interval = time.Duration(f * float64(time.Second))
			}
		case a == "-q":
			quiet = true
		case a == "-n" || a == "-4" || a == "-6":
		case strings.HasPrefix(a, "-"):
		default:
			target = a
		}
	}
	if target == "" {
		fmt.Fprintln(inv.Stderr, "ping: usage error: Destination address required")
		return 2
	}
	if count <= 0 {
		// Without -c ping runs until interrupted; the session's context is the interrupt.
		count = 1 << 30
	}
	addr, ok := m.resolve(target)
	if !ok {
		if m.networkDown() {
			return hang(ctx)
		}
		fmt.Fprintf(inv.Stderr, "ping: %s: Name or service not known\n", target)
		return 2
	}
	reachable := addr == "127.0.0.1" || addr == m.cfg.IPv4 || (m.cfg.Reachable != nil && m.cfg.Reachable(addr))
	fmt.Fprintf(inv.Stdout, "PING %s (%s) 56(84) bytes of data.\n", target, addr)
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	start := time.Now()
	var rtts []float64
	sent := 0
	for sent < count {
		sent++
		if reachable {
			rtt := m.jitter(0.35, 0.3)
			rtts = append(rtts, rtt)
			if !quiet {
				fmt.Fprintf(inv.Stdout, "64 bytes from %s: icmp_seq=%d ttl=64 time=%.3f ms\n", addr, sent, rtt)
			}
		}
		if sent < count {
			if !sleep(interval) {
				break
			}
		}
	}
	if !reachable && ctx.Err() == nil {
		sleep(wait)
	}
	if ctx.Err() != nil && sent >= 1<<30 {
		return 0
	}
	elapsed := time.Since(start).Milliseconds()
	loss := 100 - len(rtts)*100/max(sent, 1)
	fmt.Fprintf(inv.Stdout, "\n--- %s ping statistics ---\n%d packets transmitted, %d received, %d%% packet loss, time %dms\n", target, sent, len(rtts), loss, elapsed)
	if len(rtts) == 0 {
		fmt.Fprintln(inv.Stdout)
		return 1
	}
	lo, hi, sum := rtts[0], rtts[0], 0.0
	for _, r := range rtts {
		lo, hi, sum = min(lo, r), max(hi, r), sum+r
	}
	fmt.Fprintf(inv.Stdout, "rtt min/avg/max/mdev = %.3f/%.3f/%.3f/%.3f ms\n", lo, sum/float64(len(rtts)), hi, (hi-lo)/2)
	return 0
}

func (m *Machine) ss(_ context.Context, inv *shell.Invocation) int {
	showProc, header := false, true
	for _, a := range inv.Args[1:] {
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "p") {
			showProc = true
		}
		if a == "--no-header" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "H")) {
			header = false
		}
	}
	type row struct {
		local, proc string
	}
	rows := []row{}
	seen := map[int]bool{}
	add := func(port int, proc string, pid int) {
		if seen[port] {
			return
		}
		seen[port] = true
		p := ""
		if showProc {
			p = fmt.Sprintf("users:((\"%s\",pid=%d,fd=3))", proc, pid)
		}
		rows = append(rows, row{local: "0.0.0.0:" + strconv.Itoa(port), proc: p})
	}
	units := m.sortedUnits()
	pidOf := func(unit string) (int, bool) {
		for _, u := range units {
			if u.name == unit {
				return u.pid, u.active
			}
		}
		return 0, false
	}
	if pid, ok := pidOf("ssh.service"); ok {
		add(22, "sshd", pid)
	}
	if pid, ok := pidOf("pveproxy.service"); ok {
		add(8006, "pveproxy", pid)
	}
	for _, l := range m.cfg.Listeners {
		pid, active := pidOf(UnitName(l.Process))
		if l.Process != "" && !active {
			if _, exists := m.UnitActive(l.Process); exists {
				continue
			}
		}
		add(l.Port, state.ProcessName(UnitName(l.Process)), max(pid, 100))
	}
	if header {
		fmt.Fprintf(inv.Stdout, "%-6s %-6s %-6s %20s %20s%s\n", "State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port", "Process")
	}
	for _, r := range rows {
		fmt.Fprintf(inv.Stdout, "%-6s %-6s %-6s %20s %20s %s\n", "LISTEN", "0", "4096", r.local, "0.0.0.0:*", r.proc)
	}
	return 0
}

func (m *Machine) hostnameProg(_ context.Context, inv *shell.Invocation) int {
	mode := ""
	if len(inv.Args) > 1 {
		mode = inv.Args[1]
	}
	switch mode {
	case "-I", "--all-ip-addresses":
		addr := m.cfg.IPv4
		if addr == "" {
			addr = "192.0.2.10"
		}
		fmt.Fprintf(inv.Stdout, "%s \n", addr)
	case "-i", "--ip-address":
		fmt.Fprintln(inv.Stdout, "127.0.1.1")
	case "-f", "--fqdn", "--long":
		fmt.Fprintln(inv.Stdout, m.cfg.Hostname+".lab.example")
	case "-s", "--short":
		short, _, _ := strings.Cut(m.cfg.Hostname, ".")
		fmt.Fprintln(inv.Stdout, short)
	case "":
		fmt.Fprintln(inv.Stdout, m.cfg.Hostname)
	default:
		if strings.HasPrefix(mode, "-") {
			fmt.Fprintln(inv.Stdout, m.cfg.Hostname)
			return 0
		}
		fmt.Fprintln(inv.Stderr, "hostname: you must be root to change the host name")
		return 1
	}
	return 0
}
