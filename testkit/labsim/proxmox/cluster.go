package proxmox

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// This file is the cluster side of a node: pvecm status and pvecm nodes (pve-cluster's
// pvecm.pm, which prints its own "Cluster information" block and then becomes
// corosync-quorumtool), pvesh get /cluster/status (pve-manager's API2/Cluster.pm), and the
// files pmxcfs shares between the members (/etc/pve/corosync.conf, the merged
// /etc/pve/priv/known_hosts and each node's /etc/pve/nodes/NAME/ssh_known_hosts).

const corosyncMissing = "Error: Corosync config '/etc/pve/corosync.conf' does not exist - is this node part of a cluster?\n"

// ctime is Perl's scalar(localtime) and C's ctime: "Mon Dec  7 02:25:28 2026".
const ctime = "Mon Jan _2 15:04:05 2006"

func (pt *Tools) pvecm(_ context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 2 {
		return noCommand(inv, "pvecm")
	}
	sub := inv.Args[1]
	switch sub {
	case "status", "nodes":
	case "help":
		io.WriteString(inv.Stdout, usageList("pvecm", pvecmUsage))
		return 0
	default:
		return unknownCommand(inv, "pvecm", sub)
	}
	if len(inv.Args) > 2 {
		fmt.Fprintf(inv.Stderr, "400 too many arguments\npvecm %s\n", sub)
		return exitPVE
	}
	pt.lab.Mu.Lock()
	defer pt.lab.Mu.Unlock()
	h := pt.lab.Host(host)
	if h.Cfg.Cluster == "" {
		// check_conf_exists dies after its -f set errno to ENOENT: Perl exits 2.
		io.WriteString(inv.Stderr, corosyncMissing)
		return exitNoConfig
	}
	members := pt.lab.Members(h)
	var online []*lab.Host
	for _, m := range members {
		if !m.Fault.Down {
			online = append(online, m)
		}
	}
	quorate := pt.lab.Quorate(h)
	quorum := len(members)/2 + 1
	var b strings.Builder
	if sub == "status" {
		b.WriteString("Cluster information\n-------------------\n")
		fmt.Fprintf(&b, "%-17s %s\n", "Name:", h.Cfg.Cluster)
		fmt.Fprintf(&b, "%-17s %d\n", "Config Version:", len(members))
		fmt.Fprintf(&b, "%-17s %s\n", "Transport:", "knet")
		fmt.Fprintf(&b, "%-17s %s\n\n", "Secure auth:", "on")
		b.WriteString("Quorum information\n------------------\n")
		fmt.Fprintf(&b, "Date:             %s\n", pt.lab.Now().Format(ctime))
		b.WriteString("Quorum provider:  corosync_votequorum\n")
		fmt.Fprintf(&b, "Nodes:            %d\n", len(online))
		fmt.Fprintf(&b, "Node ID:          0x%08x\n", pt.lab.NodeID(h))
		fmt.Fprintf(&b, "Ring ID:          %d.%x\n", pt.lab.NodeID(online[0]), 0x20+4*(len(members)-len(online)))
		fmt.Fprintf(&b, "Quorate:          %s\n\n", map[bool]string{true: "Yes", false: "No"}[quorate])
		b.WriteString("Votequorum information\n----------------------\n")
		fmt.Fprintf(&b, "Expected votes:   %d\n", len(members))
		fmt.Fprintf(&b, "Highest expected: %d\n", len(members))
		fmt.Fprintf(&b, "Total votes:      %d\n", len(online))
		if quorate {
			fmt.Fprintf(&b, "Quorum:           %d  \n", quorum)
			b.WriteString("Flags:            Quorate \n\n")
		} else {
			fmt.Fprintf(&b, "Quorum:           %d Activity blocked\n", quorum)
			b.WriteString("Flags:            \n\n")
		}
	}
	b.WriteString("Membership information\n----------------------\n")
	fmt.Fprintf(&b, "%10s %10s %s\n", "Nodeid", "Votes", "Name")
	for _, m := range online {
		id := strconv.Itoa(pt.lab.NodeID(m))
		name := m.Cfg.Node
		if sub == "status" {
			// pvecm status runs corosync-quorumtool -siH: hex ids, addresses for names.
			id, name = fmt.Sprintf("0x%08x", pt.lab.NodeID(m)), lab.HostIP(m.Cfg.Addr)
		}
		if m == h {
			name += " (local)"
		}
		fmt.Fprintf(&b, "%10s %10d %s\n", id, 1, name)
	}
	io.WriteString(inv.Stdout, b.String())
	return 0
}

var pvecmUsage = []string{
	"pvecm add <hostname> [OPTIONS]",
	"pvecm addnode <node> [OPTIONS]",
	"pvecm apiver",
	"pvecm create <clustername> [OPTIONS]",
	"pvecm delnode <node>",
	"pvecm expected <expected>",
	"pvecm keygen <filename>",
	"pvecm mtunnel [<extra-args>] [OPTIONS]",
	"pvecm nodes",
	"pvecm qdevice remove",
	"pvecm qdevice setup <address> [OPTIONS]",
	"pvecm status",
	"pvecm updatecerts  [OPTIONS]",
	"pvecm help [<extra-args>] [OPTIONS]",
}

// usageList is what pve-common's CLI handler prints after "USAGE: tool <COMMAND> [ARGS]
// [OPTIONS]": every command's short synopsis, indented by seven spaces.
func usageList(tool string, cmds []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "USAGE: %s <COMMAND> [ARGS] [OPTIONS]\n\n", tool)
	for _, c := range cmds {
		b.WriteString("       " + c + "\n")
	}
	return b.String()
}

// clusterStatus is GET /cluster/status as node h answers it; the caller holds the lock.
func (pt *Tools) clusterStatus(h *lab.Host) []any {
	if h.Cfg.Cluster == "" {
		// A node in no cluster answers one entry for itself, with nodeid 0.
		return []any{map[string]any{"type": "node", "id": "node/" + h.Cfg.Node, "name": h.Cfg.Node, "ip": lab.HostIP(h.Cfg.Addr),
			"local": 1, "nodeid": 0, "online": 1, "level": ""}}
	}
	members := pt.lab.Members(h)
	out := []any{map[string]any{"type": "cluster", "id": "cluster", "name": h.Cfg.Cluster, "nodes": len(members),
		"quorate": boolInt(pt.lab.Quorate(h)), "version": len(members)}}
	for _, m := range members {
		out = append(out, map[string]any{"type": "node", "id": "node/" + m.Cfg.Node, "name": m.Cfg.Node, "ip": lab.HostIP(m.Cfg.Addr),
			"nodeid": pt.lab.NodeID(m), "online": boolInt(!m.Fault.Down), "local": boolInt(m == h), "level": ""})
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// KnownHostsAddr is how known_hosts names a node by address: the IP alone for port 22,
// "[ip]:port" otherwise (OpenSSH's form for a non-standard port).
func KnownHostsAddr(addr string) string {
	ip, port, err := net.SplitHostPort(addr)
	if err != nil || port == "22" {
		return ip
	}
	return "[" + ip + "]:" + port
}

// ClusterFiles are the files pmxcfs shows under /etc/pve on every member of h's cluster,
// given each host's SSH host key as "TYPE BASE64" (keys by host name). Every node has its
// own /etc/pve/nodes/NAME/ssh_known_hosts ("NAME TYPE BASE64", no newline, as pvecm
// updatecerts writes it and PVE 8.1+ pins it with HostKeyAlias); the merged
// /etc/pve/priv/known_hosts lists each member by lower-cased name and by address, as
// ssh_merge_known_hosts left it on every join; corosync.conf exists only in a cluster. The
// keys are the nodes' original host keys whatever faults they have. The caller holds the
// lock.
func (pt *Tools) ClusterFiles(h *lab.Host, keys map[string]string) map[string][]byte {
	files := map[string][]byte{}
	members := pt.lab.Members(h)
	var merged strings.Builder
	for _, m := range members {
		key := keys[m.Cfg.Name]
		if key == "" {
			continue
		}
		files["/etc/pve/nodes/"+m.Cfg.Node+"/ssh_known_hosts"] = []byte(m.Cfg.Node + " " + key)
		fmt.Fprintf(&merged, "%s %s\n%s %s\n", strings.ToLower(m.Cfg.Node), key, KnownHostsAddr(m.Cfg.Addr), key)
	}
	files["/etc/pve/priv/known_hosts"] = []byte(merged.String())
	if h.Cfg.Cluster != "" {
		files["/etc/pve/corosync.conf"] = []byte(corosyncConf(h.Cfg.Cluster, members, pt.lab))
	}
	return files
}

// corosyncConf renders the corosync.conf pvecm create and pvecm add write.
func corosyncConf(cluster string, members []*lab.Host, l *lab.Lab) string {
	var b strings.Builder
	b.WriteString("logging {\n  debug: off\n  to_syslog: yes\n}\n\nnodelist {\n")
	sorted := append([]*lab.Host(nil), members...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Cfg.Node < sorted[j].Cfg.Node })
	for _, m := range sorted {
		fmt.Fprintf(&b, "  node {\n    name: %s\n    nodeid: %d\n    quorum_votes: 1\n    ring0_addr: %s\n  }\n",
			m.Cfg.Node, l.NodeID(m), lab.HostIP(m.Cfg.Addr))
	}
	b.WriteString("}\n\nquorum {\n  provider: corosync_votequorum\n}\n\ntotem {\n")
	fmt.Fprintf(&b, "  cluster_name: %s\n  config_version: %d\n", cluster, len(members))
	b.WriteString("  interface {\n    linknumber: 0\n  }\n  ip_version: ipv4-6\n  link_mode: passive\n  secauth: on\n  version: 2\n}\n\n")
	return b.String()
}
