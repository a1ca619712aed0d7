// Package netif simulates ip(8) (iproute2 6.1 on Debian 12): ip address, ip link and ip
// route, with -brief, -4 and -6, over the interfaces a machine of its role has (a
// container's veth, a VM's virtio NIC, a Proxmox node's NIC in the vmbr0 bridge, a host's
// NIC), addressed from labsim/system/state.
package netif

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// link is one network interface as ip(8) shows it.
type link struct {
	index           int
	name, peer      string // peer: "@if12" of a veth
	flags, state    string
	mtu             int
	kind, mac       string // "loopback" or "ether"
	master, altname string
	addr4, addr6    string // with prefix length
	brd             string
	qdisc           string
}

// Tool is ip bound to one machine.
type Tool struct{ M state.Machine }

// Program is the ip command.
func (m Tool) Program() shell.Program { return m.ip }

func (m Tool) mac(salt string) string {
	h := fnv.New32a()
	h.Write([]byte(m.M.Hostname() + salt))
	v := h.Sum32()
	return fmt.Sprintf("bc:24:11:%02x:%02x:%02x", byte(v>>16), byte(v>>8), byte(v))
}

// linkLocal is the EUI-64 fe80:: address of a MAC.
func linkLocal(mac string) string {
	var b [6]byte
	fmt.Sscanf(mac, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5])
	return fmt.Sprintf("fe80::%02x%02x:%02xff:fe%02x:%02x%02x/64", b[0]^2, b[1], b[2], b[3], b[4], b[5])
}

// links are the machine's interfaces by role: a container's veth, a VM's virtio NIC, a
// node's NIC enslaved to the vmbr0 bridge, a host's NIC.
func (m Tool) links() []link {
	addr := m.M.IPv4()
	pfx, _ := netip.ParsePrefix(addr + "/24")
	brd := pfx.Masked().Addr().As4()
	brd[3] = 255
	broadcast := netip.AddrFrom4(brd).String()
	lo := link{index: 1, name: "lo", flags: "LOOPBACK,UP,LOWER_UP", state: "UNKNOWN", mtu: 65536, kind: "loopback",
		mac: "00:00:00:00:00:00", addr4: "127.0.0.1/8", addr6: "::1/128", qdisc: "noqueue"}
	up := "BROADCAST,MULTICAST,UP,LOWER_UP"
	switch m.M.Role() {
	case state.LXC:
		mac := m.mac("eth0")
		return []link{lo, {index: 2, name: "eth0", peer: "@if" + fmt.Sprint(10+len(m.M.Hostname())), flags: up, state: "UP", mtu: 1500,
			kind: "ether", mac: mac, addr4: addr + "/24", brd: broadcast, addr6: linkLocal(mac), qdisc: "noqueue"}}
	case state.VM:
		mac := m.mac("ens18")
		return []link{lo, {index: 2, name: "ens18", altname: "enp0s18", flags: up, state: "UP", mtu: 1500, kind: "ether", mac: mac,
			addr4: addr + "/24", brd: broadcast, addr6: linkLocal(mac), qdisc: "fq_codel"}}
	case state.Proxmox:
		mac := m.mac("enp3s0")
		return []link{lo,
			{index: 2, name: "enp3s0", flags: up, state: "UP", mtu: 1500, kind: "ether", mac: mac, master: "vmbr0", qdisc: "mq"},
			{index: 3, name: "vmbr0", flags: up, state: "UP", mtu: 1500, kind: "ether", mac: mac, addr4: addr + "/24", brd: broadcast,
				addr6: linkLocal(mac), qdisc: "noqueue"}}
	}
	mac := m.mac("enp1s0")
	return []link{lo, {index: 2, name: "enp1s0", flags: up, state: "UP", mtu: 1500, kind: "ether", mac: mac, addr4: addr + "/24",
		brd: broadcast, addr6: linkLocal(mac), qdisc: "fq_codel"}}
}

// defaultDev is the interface that carries the machine's address.
func (m Tool) defaultDev() string {
	for _, l := range m.links() {
		if l.addr4 != "" && l.name != "lo" {
			return l.name
		}
	}
	return "eth0"
}

func (m Tool) ip(_ context.Context, inv *shell.Invocation) int {
	var words []string
	brief, four, six, details := false, false, false, false
	for _, a := range inv.Args[1:] {
		switch a {
		case "-br", "-brief", "--brief":
			brief = true
		case "-4":
			four = true
		case "-6":
			six = true
		case "-d", "-details", "-s", "-stats", "-c", "-color", "--color", "-o", "-oneline":
			details = details || a == "-d"
		default:
			if strings.HasPrefix(a, "-") {
				if strings.HasPrefix(a, "-c") || strings.HasPrefix(a, "--color") {
					continue
				}
				fmt.Fprintf(inv.Stderr, "Option \"%s\" is unknown, try \"ip -help\".\n", a)
				return 255
			}
			words = append(words, a)
		}
	}
	if len(words) == 0 {
		fmt.Fprintln(inv.Stderr, "Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }\n       ip [ -force ] -batch filename\nwhere  OBJECT := { address | addrlabel | amt | fou | help | ila | ioam | l2tp | link |\n                   macsec | maddress | monitor | mptcp | mroute | mrule |\n                   neighbor | neighbour | netconf | netns | nexthop | ntable |\n                   ntbl | route | rule | sr | tap | tcpmetrics |\n                   token | tunnel | tuntap | vrf | xfrm }")
		return 255
	}
	obj, rest := words[0], words[1:]
	match := func(full string) bool { return len(obj) > 0 && strings.HasPrefix(full, obj) }
	var dev string
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case "show", "list", "ls", "s", "lst", "sh":
		case "dev":
			if i+1 < len(rest) {
				i++
				dev = rest[i]
			}
		default:
			dev = rest[i]
		}
	}
	links := m.links()
	if dev != "" {
		var kept []link
		for _, l := range links {
			if l.name == dev {
				kept = append(kept, l)
			}
		}
		if len(kept) == 0 {
			fmt.Fprintf(inv.Stderr, "Device \"%s\" does not exist.\n", dev)
			return 1
		}
		links = kept
	}
	switch {
	case obj == "a" || match("address") || obj == "addr":
		m.ipAddr(inv, links, brief, four, six, true)
	case obj == "l" || match("link"):
		m.ipAddr(inv, links, brief, false, false, false)
	case obj == "r" || match("route"):
		if six {
			fmt.Fprintf(inv.Stdout, "::1 dev lo proto kernel metric 256 pref medium\nfe80::/64 dev %s proto kernel metric 256 pref medium\n", m.defaultDev())
			return 0
		}
		d := m.defaultDev()
		pfx, _ := netip.ParsePrefix(m.M.IPv4() + "/24")
		if m.M.Gateway() != "" {
			if m.M.Role() == state.Proxmox {
				fmt.Fprintf(inv.Stdout, "default via %s dev %s proto kernel onlink \n", m.M.Gateway(), d)
			} else {
				fmt.Fprintf(inv.Stdout, "default via %s dev %s proto static \n", m.M.Gateway(), d)
			}
		}
		fmt.Fprintf(inv.Stdout, "%s dev %s proto kernel scope link src %s \n", pfx.Masked(), d, m.M.IPv4())
	default:
		fmt.Fprintf(inv.Stderr, "Object \"%s\" is unknown, try \"ip help\".\n", obj)
		return 1
	}
	return 0
}

func (m Tool) ipAddr(inv *shell.Invocation, links []link, brief, four, six, addrs bool) {
	w := inv.Stdout
	for _, l := range links {
		name := l.name + l.peer
		if brief {
			if !addrs {
				fmt.Fprintf(w, "%-16s %-14s %s <%s> \n", name, l.state, l.mac, l.flags)
				continue
			}
			var as []string
			if l.addr4 != "" && !six {
				as = append(as, l.addr4)
			}
			if l.addr6 != "" && !four {
				as = append(as, l.addr6)
			}
			fmt.Fprintf(w, "%-16s %-14s %s \n", name, l.state, strings.Join(as, " "))
			continue
		}
		if (four && l.addr4 == "") || (six && l.addr6 == "") {
			continue
		}
		master := ""
		if l.master != "" {
			master = " master " + l.master
		}
		fmt.Fprintf(w, "%d: %s: <%s> mtu %d qdisc %s%s state %s group default qlen 1000\n", l.index, name, l.flags, l.mtu, l.qdisc, master, l.state)
		if !four && !six {
			extra := ""
			if l.peer != "" {
				extra = " link-netnsid 0"
			}
			fmt.Fprintf(w, "    link/%s %s brd %s%s\n", l.kind, l.mac, map[string]string{"loopback": "00:00:00:00:00:00", "ether": "ff:ff:ff:ff:ff:ff"}[l.kind], extra)
			if l.altname != "" {
				fmt.Fprintf(w, "    altname %s\n", l.altname)
			}
		}
		if !addrs {
			continue
		}
		if l.addr4 != "" && !six {
			scope, brd := "global", ""
			if l.name == "lo" {
				scope = "host"
			} else {
				brd = " brd " + l.brd
			}
			fmt.Fprintf(w, "    inet %s%s scope %s %s\n       valid_lft forever preferred_lft forever\n", l.addr4, brd, scope, l.name)
		}
		if l.addr6 != "" && !four {
			scope := "link"
			if l.name == "lo" {
				scope = "host noprefixroute"
			}
			fmt.Fprintf(w, "    inet6 %s scope %s \n       valid_lft forever preferred_lft forever\n", l.addr6, scope)
		}
	}
}
