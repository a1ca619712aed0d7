package discover

import (
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The two read-only commands discovery runs on a machine, through the gate like any other
// execution. Both classify as read_only in the default policy (rules systemctl-read:
// `list-*` shows unit state; ss-read: ss without -K/-D only lists sockets), so they run at
// once without an approval.
const (
	// UnitsCommand lists the running service units, one per line, without the legend
	// (UNIT LOAD ACTIVE SUB DESCRIPTION) and without the bullet a failed unit gets.
	UnitsCommand = "systemctl list-units --type=service --state=running --no-legend --plain --no-pager"
	// ListenersCommand lists the listening TCP sockets, numerically, with the process that
	// owns each (users:(("name",pid=N,fd=N))), without the header.
	ListenersCommand = "ss -Hltnp"
)

// Unit is one running service unit as systemctl lists it.
type Unit struct {
	// Name is the unit's full name (jellyfin.service, postgresql@16-main.service).
	Name        string `json:"unit"`
	Description string `json:"description"`
}

// Listener is one listening TCP socket as ss lists it.
type Listener struct {
	// Address is the local address without brackets or interface (0.0.0.0, ::, 127.0.0.1).
	Address string `json:"address"`
	Port    int    `json:"port"`
	// Process and PID are the first owner ss names; empty and 0 when ss could not tell (it
	// shows owners only to a user that may see them).
	Process string `json:"process"`
	PID     int    `json:"pid"`
}

// Loopback reports whether the socket listens on a loopback address only.
func (l Listener) Loopback() bool {
	a, err := netip.ParseAddr(l.Address)
	return err == nil && a.Unmap().IsLoopback()
}

// loadStates are the LOAD column's values: a line whose second field is not one is the
// legend, a header or a message, never a unit.
var loadStates = map[string]bool{"loaded": true, "not-found": true, "bad-setting": true, "error": true,
	"masked": true, "merged": true, "stub": true}

// ParseUnits reads `systemctl list-units` output and returns the running service units in
// the order listed. It accepts the output with or without --plain and --no-legend: the
// header, the legend and the "N loaded units listed." line are skipped, as is the bullet
// (● or *) in front of a failed unit. Units that are not .service units, or not active and
// running, are left out.
func ParseUnits(out string) []Unit {
	var units []Unit
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "●" || f[0] == "*" || f[0] == "○") {
			f = f[1:]
		}
		if len(f) < 4 || !loadStates[f[1]] {
			continue
		}
		name, active, sub := f[0], f[2], f[3]
		if !strings.HasSuffix(name, ".service") || active != "active" || sub != "running" || seen[name] {
			continue
		}
		seen[name] = true
		units = append(units, Unit{Name: name, Description: strings.Join(f[4:], " ")})
	}
	return units
}

// usersRe finds each owner in ss's process column: ("name",pid=N,fd=N). A name may hold
// escaped quotes.
var usersRe = regexp.MustCompile(`\("((?:[^"\\]|\\.)*)",pid=(\d+)`)

// ParseListeners reads `ss -ltnp` output (with or without -H) and returns one Listener per
// listening socket. A leading Netid column (when -t was not given) is accepted; the header
// and any line that is not a LISTEN socket are skipped.
func ParseListeners(out string) []Listener {
	var ls []Listener
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "tcp" || f[0] == "tcp6" || f[0] == "udp" || f[0] == "u_str") {
			if f[0] != "tcp" && f[0] != "tcp6" {
				continue
			}
			f = f[1:]
		}
		if len(f) < 5 || f[0] != "LISTEN" {
			continue
		}
		addr, port, ok := splitHostPort(f[3])
		if !ok {
			continue
		}
		l := Listener{Address: addr, Port: port}
		if len(f) > 5 {
			if m := usersRe.FindStringSubmatch(strings.Join(f[5:], " ")); m != nil {
				l.Process = strings.ReplaceAll(m[1], `\"`, `"`)
				l.PID, _ = strconv.Atoi(m[2])
			}
		}
		ls = append(ls, l)
	}
	return ls
}

// splitHostPort splits ss's local address: 0.0.0.0:22, [::]:22, *:80, 127.0.0.53%lo:53,
// [fe80::1%eth0]:8080, [::ffff:127.0.0.1]:631.
func splitHostPort(s string) (string, int, bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, false
	}
	port, err := strconv.Atoi(s[i+1:])
	if err != nil || port < 1 || port > 65535 {
		return "", 0, false
	}
	host := strings.TrimSuffix(strings.TrimPrefix(s[:i], "["), "]")
	if j := strings.IndexByte(host, '%'); j >= 0 {
		host = host[:j]
	}
	if host == "*" {
		host = "0.0.0.0"
	}
	return host, port, true
}

// Plumbing: running units that are the base operating system, not a service anyone deploys,
// so discovery never proposes them. The list is short on purpose (an operator can still
// create any service by hand):
//   - systemd-* (journald, logind, networkd, resolved, timesyncd, udevd…): systemd itself;
//   - ssh, sshd: how Oikos and the operator log in;
//   - cron, anacron: the job scheduler of every install;
//   - dbus, dbus-broker: the system bus;
//   - getty@, serial-getty@, container-getty@, console-getty: login prompts (an LXC has
//     container-getty);
//   - networking, ifup@, rsyslog: the network and log plumbing of Debian;
//   - postfix: the local mail transport Debian's and Proxmox's standard templates install;
//   - user@: a logged-in user's own systemd;
//   - qemu-guest-agent: the VM side of qm guest exec;
//   - pve* and Proxmox's companions (lxcfs, rrdcached, spiceproxy, qmeventd, watchdog-mux,
//     corosync): Proxmox VE itself, on a host.
var plumbing = map[string]bool{
	"ssh": true, "sshd": true, "cron": true, "anacron": true, "dbus": true, "dbus-broker": true,
	"getty": true, "serial-getty": true, "container-getty": true, "console-getty": true,
	"networking": true, "ifup": true, "rsyslog": true, "postfix": true, "user": true,
	"qemu-guest-agent": true, "lxcfs": true, "rrdcached": true, "spiceproxy": true, "qmeventd": true,
	"watchdog-mux": true, "corosync": true,
}

// IsPlumbing reports whether a unit is base-OS plumbing (see plumbing).
func IsPlumbing(unit string) bool {
	base := unitBase(unit)
	return strings.HasPrefix(base, "systemd-") || strings.HasPrefix(base, "pve") || plumbing[base]
}

// unitBase is a unit's name without its suffix and instance: postgresql@16-main.service →
// postgresql.
func unitBase(unit string) string {
	n := strings.TrimSuffix(unit, ".service")
	if i := strings.IndexByte(n, '@'); i >= 0 {
		n = n[:i]
	}
	return n
}

// ServiceName is the service entity name proposed for a unit: the unit without .service
// (an instance stays: postgresql@16-main).
func ServiceName(unit string) string { return strings.TrimSuffix(unit, ".service") }

// matchScore says how well a process name (ss's users column: the kernel's comm, at most 15
// characters) matches a unit: 3 when it is the unit's base name (postgresql@16-main →
// postgresql), 2 when one is a prefix of the other and the shorter has at least 3
// characters (sshd for ssh, mariadbd for mariadb, grafana for grafana-server, postgres for
// postgresql, prometheus-node for prometheus-node-exporter, cut at 15), else 0. Case is
// ignored.
func matchScore(unit, process string) int {
	u, p := strings.ToLower(unitBase(unit)), strings.ToLower(process)
	switch {
	case u == "" || p == "":
		return 0
	case u == p:
		return 3
	case min(len(u), len(p)) >= 3 && (strings.HasPrefix(u, p) || strings.HasPrefix(p, u)):
		return 2
	}
	return 0
}

// Match assigns each listener to the unit whose name best matches the process that owns it
// (matchScore; of equal scores the longer shared prefix, then the unit listed first). It
// returns the listeners of each unit and those no unit claimed.
//
// This is a heuristic: ss names the process (comm) and pid, systemctl list-units names the
// unit, and nothing in either output ties a pid to a unit. Matching pids exactly would need a
// third command per unit (systemctl show -p MainPID), and still miss worker processes; a
// process's name is its unit's name, or a prefix of it, for nearly every packaged service.
// A listener whose process matches no unit (a python3 behind home-assistant.service) is
// reported as unmatched for the operator to place.
func Match(units []Unit, listeners []Listener) (owned map[string][]Listener, unmatched []Listener) {
	owned = map[string][]Listener{}
	for _, l := range listeners {
		best, bestScore, bestLen := "", 0, 0
		for _, u := range units {
			s := matchScore(u.Name, l.Process)
			if s == 0 {
				continue
			}
			n := commonPrefix(strings.ToLower(unitBase(u.Name)), strings.ToLower(l.Process))
			if s > bestScore || (s == bestScore && n > bestLen) {
				best, bestScore, bestLen = u.Name, s, n
			}
		}
		if best == "" {
			unmatched = append(unmatched, l)
			continue
		}
		owned[best] = append(owned[best], l)
	}
	return owned, unmatched
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Ports are the distinct ports of listeners, ascending (a port bound on IPv4 and IPv6 is one
// port).
func Ports(ls []Listener) []int {
	seen := map[int]bool{}
	out := []int{}
	for _, l := range ls {
		if !seen[l.Port] {
			seen[l.Port] = true
			out = append(out, l.Port)
		}
	}
	sort.Ints(out)
	return out
}

// MainPort is the port proposed as a service's `port` attribute (its main listening port):
// the lowest of its listeners beyond loopback, else the lowest; 0 with none.
func MainPort(ls []Listener) int {
	best, bestLoop := 0, 0
	for _, l := range ls {
		if l.Loopback() {
			if bestLoop == 0 || l.Port < bestLoop {
				bestLoop = l.Port
			}
		} else if best == 0 || l.Port < best {
			best = l.Port
		}
	}
	if best == 0 {
		return bestLoop
	}
	return best
}
