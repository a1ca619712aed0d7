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

// ss answers ss(8) for TCP sockets: the listeners of the running units and the operator's
// own SSH connection; -l listening only, -a both, neither: connected only.
func (m *Machine) ss(_ context.Context, inv *shell.Invocation) int {
	var tcp, udp, listen, all, proc, noHeader, summary bool
	for _, a := range inv.Args[1:] {
		switch {
		case strings.HasPrefix(a, "--"):
			switch a {
			case "--tcp":
				tcp = true
			case "--udp":
				udp = true
			case "--listening":
				listen = true
			case "--all":
				all = true
			case "--processes":
				proc = true
			case "--no-header":
				noHeader = true
			case "--summary":
				summary = true
			case "--numeric", "--ipv4", "--ipv6", "--extended", "--options", "--resolve":
			default:
				fmt.Fprintf(inv.Stderr, "ss: unrecognized option '%s'\nUsage: ss [ OPTIONS ]\n       ss [ OPTIONS ] [ FILTER ]\n", a)
				return 255
			}
		case strings.HasPrefix(a, "-"):
			for _, c := range a[1:] {
				switch c {
				case 't':
					tcp = true
				case 'u':
					udp = true
				case 'l':
					listen = true
				case 'a':
					all = true
				case 'p':
					proc = true
				case 'H':
					noHeader = true
				case 's':
					summary = true
				case 'n', '4', '6', 'e', 'o', 'r', 'i', 'm', 'w', 'x':
				default:
					fmt.Fprintf(inv.Stderr, "ss: invalid option -- '%c'\nUsage: ss [ OPTIONS ]\n       ss [ OPTIONS ] [ FILTER ]\n", c)
					return 255
				}
			}
		}
	}
	if !tcp && !udp {
		tcp = true
	}
	type row struct{ netid, state, local, peer, proc string }
	var rows []row
	units := m.sortedUnits()
	pidOf := func(unit string) (int, bool) {
		for _, u := range units {
			if u.name == unit {
				return u.pid, u.active
			}
		}
		return 0, false
	}
	users := func(name string, pid, fd int) string {
		if !proc {
			return ""
		}
		return fmt.Sprintf("users:((\"%s\",pid=%d,fd=%d))", name, pid, fd)
	}
	seen := map[int]bool{}
	add := func(port int, name string, pid int) {
		if seen[port] {
			return
		}
		seen[port] = true
		rows = append(rows, row{"tcp", "LISTEN", "0.0.0.0:" + strconv.Itoa(port), "0.0.0.0:*", users(name, pid, 3)})
	}
	sshPID, sshOn := pidOf("ssh.service")
	if sshOn {
		add(22, "sshd", sshPID)
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
	var shown []row
	for _, r := range rows {
		if tcp && (listen || all) {
			shown = append(shown, r)
		}
	}
	if tcp && !listen && sshOn {
		peer := "192.0.2.1"
		if m.cfg.Gateway != "" {
			peer = m.cfg.Gateway
		}
		shown = append(shown, row{"tcp", "ESTAB", m.IPv4() + ":22", peer + ":52814", users("sshd", m.nextPID+100, 4)})
	}
	if summary {
		fmt.Fprintf(inv.Stdout, "Total: %d\nTCP:   %d (estab 1, closed 0, orphaned 0, timewait 0)\n\nTransport Total     IP        IPv6\nRAW	  0         0         0        \nUDP	  0         0         0        \nTCP	  %d         %d         0        \nINET	  %d         %d         0        \nFRAG	  0         0         0        \n\n",
			90+len(shown), len(rows)+1, len(rows)+1, len(rows)+1, len(rows)+1, len(rows)+1)
		return 0
	}
	netid := tcp && udp
	if !noHeader {
		if netid {
			fmt.Fprintf(inv.Stdout, "%-5s %-6s %-6s %-6s %20s %20s %s\n", "Netid", "State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port", "Process")
		} else {
			fmt.Fprintf(inv.Stdout, "%-6s %-6s %-6s %20s %20s%s\n", "State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port", "Process")
		}
	}
	for _, r := range shown {
		q := "4096"
		if r.state == "ESTAB" {
			q = "0"
		}
		if r.local == "0.0.0.0:22" {
			q = "128"
		}
		if netid {
			fmt.Fprintf(inv.Stdout, "%-5s %-6s %-6s %-6s %20s %20s %s\n", r.netid, r.state, "0", q, r.local, r.peer, r.proc)
		} else {
			fmt.Fprintf(inv.Stdout, "%-6s %-6s %-6s %20s %20s %s\n", r.state, "0", q, r.local, r.peer, r.proc)
		}
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
