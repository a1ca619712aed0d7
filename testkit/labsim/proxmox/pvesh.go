package proxmox

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// guestResource is one guest's figures for pvesh.
func (pt *Tools) guestResource(h *lab.Host, g *lab.Guest, now time.Time, clusterView bool) map[string]any {
	maxmem := int64(g.Cfg.MemoryMB) << 20
	if maxmem == 0 {
		maxmem = 512 << 20
	}
	disk := positiveOr(g.Cfg.DiskGB, 8)
	if g.Cfg.Kind == fleet.GuestVM {
		disk = vmDiskGB(g)
	}
	maxdisk := int64(disk) << 30
	cores := positiveOr(g.Cfg.Cores, 1)
	status := g.Cfg.Status
	if h.Fault.Down && clusterView {
		status = "unknown"
	}
	r := map[string]any{
		"vmid": g.Cfg.VMID, "status": status, "name": g.DisplayName(), "cpus": cores, "maxmem": maxmem,
		"maxdisk": maxdisk, "cpu": 0, "mem": 0, "disk": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0, "uptime": 0,
	}
	if g.Cfg.Kind == fleet.GuestLXC {
		r["type"] = "lxc"
		r["swap"] = 0
		r["maxswap"] = int64(512 << 20)
	}
	if g.Running() {
		up := int64(now.Sub(g.StartedAt).Seconds())
		seed := int64(g.Cfg.VMID)
		r["uptime"] = up
		r["pid"] = g.PID
		r["cpu"] = float64(5+(seed*7+up/60)%40) / 1000
		r["mem"] = maxmem * (20 + (seed*13)%30) / 100
		r["disk"] = maxdisk * (15 + (seed*11)%25) / 100
		r["netin"] = up * (1000 + seed%500)
		r["netout"] = up * (400 + seed%300)
		r["diskread"] = up * 2048
		r["diskwrite"] = up * 4096
	}
	if g.Lock != "" {
		r["lock"] = g.Lock
	}
	if clusterView && g.HAState != "" {
		r["hastate"] = g.HAState
	}
	if clusterView {
		kind := "lxc"
		if g.Cfg.Kind == fleet.GuestVM {
			kind = "qemu"
		}
		r["type"] = kind
		r["id"] = fmt.Sprintf("%s/%d", kind, g.Cfg.VMID)
		r["node"] = h.Cfg.Node
		r["maxcpu"] = cores
		r["template"] = 0
		delete(r, "cpus")
		delete(r, "pid")
		delete(r, "swap")
		delete(r, "maxswap")
	}
	return r
}

func (pt *Tools) pvesh(_ context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 2 {
		return noCommand(inv, "pvesh")
	}
	verb := inv.Args[1]
	switch verb {
	case "get", "ls", "usage":
	case "set", "create", "delete":
		if len(inv.Args) < 3 {
			fmt.Fprintf(inv.Stderr, "400 not enough arguments\npvesh %s <api_path> [OPTIONS] [FORMAT_OPTIONS]\n", verb)
			return exitPVE
		}
		p := "/" + strings.Trim(inv.Args[2], "/")
		method := map[string]string{"set": "PUT", "create": "POST", "delete": "DELETE"}[verb]
		fmt.Fprintf(inv.Stderr, "No '%s' handler defined for '%s'\n", strings.ToLower(method2verb(method)), p)
		return exitPVE
	case "help":
		io.WriteString(inv.Stdout, usageList("pvesh", []string{
			"pvesh create <api_path> [OPTIONS] [FORMAT_OPTIONS]", "pvesh delete <api_path> [OPTIONS] [FORMAT_OPTIONS]",
			"pvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]", "pvesh ls <api_path> [OPTIONS] [FORMAT_OPTIONS]",
			"pvesh set <api_path> [OPTIONS] [FORMAT_OPTIONS]", "pvesh usage <api_path> [OPTIONS]",
			"pvesh help [<extra-args>] [OPTIONS]"}))
		return 0
	default:
		return unknownCommand(inv, "pvesh", verb)
	}
	a := parsePVEArgs(inv.Args[2:], map[string]bool{"noborder": true, "noheader": true, "human-readable": true, "verbose": true, "quiet": true})
	if len(a.pos) == 0 {
		fmt.Fprintf(inv.Stderr, "400 not enough arguments\npvesh %s <api_path> [OPTIONS] [FORMAT_OPTIONS]\n", verb)
		return exitPVE
	}
	if verb != "get" {
		fmt.Fprintf(inv.Stderr, "No '%s' handler defined for '%s'\n", verb, "/"+strings.Trim(a.pos[0], "/"))
		return exitPVE
	}
	format := a.opts["output-format"]
	switch format {
	case "", "text", "json", "json-pretty", "yaml":
	default:
		fmt.Fprintf(inv.Stderr, "400 Parameter verification failed.\noutput-format: value '%s' does not have a value in the enumeration 'text, json, json-pretty, yaml'\n", format)
		return exitPVE
	}
	p, query, _ := strings.Cut(a.pos[0], "?")
	p = "/" + strings.Trim(p, "/")
	typeFilter := a.opts["type"]
	for _, kv := range strings.Split(query, "&") {
		if v, ok := strings.CutPrefix(kv, "type="); ok {
			typeFilter = v
		}
	}
	pt.lab.Mu.Lock()
	result, required, code := pt.pveshGet(inv, pt.lab.Host(host), p, typeFilter)
	pt.lab.Mu.Unlock()
	if code != 0 {
		return code
	}
	switch format {
	case "json-pretty":
		io.WriteString(inv.Stdout, perlPretty(result))
	case "json":
		out, err := compactJSON(result)
		if err != nil {
			fmt.Fprintf(inv.Stderr, "unable to render result: %v\n", err)
			return exitPVE
		}
		io.WriteString(inv.Stdout, out)
	default:
		io.WriteString(inv.Stdout, textResult(result, required, a.opts["noborder"] != "", a.opts["noheader"] != ""))
	}
	return 0
}

func method2verb(m string) string {
	return map[string]string{"PUT": "set", "POST": "create", "DELETE": "delete"}[m]
}

// pveshGet answers GET path on node h: the result, the properties its schema returns in
// the order the text table prints them (required ones sorted, then optional ones sorted) and a non-zero exit when it failed (message printed).
// The caller holds the lock.
func (pt *Tools) pveshGet(inv *shell.Invocation, h *lab.Host, p, typeFilter string) (any, []string, int) {
	now := pt.lab.Now()
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	nodeOf := func() (*lab.Host, int) {
		target := pt.nodeHost(h, parts[1])
		if target == nil {
			fmt.Fprintf(inv.Stderr, "hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known\n", parts[1], parts[1])
			return nil, exitPVE
		}
		if target != h && target.Fault.Down {
			return nil, proxyFailed(inv, target, p)
		}
		return target, 0
	}
	switch {
	case p == "/cluster/resources":
		switch typeFilter {
		case "", "vm", "node", "storage", "sdn", "pool":
		default:
			fmt.Fprintf(inv.Stderr, "400 Parameter verification failed.\ntype: value '%s' does not have a value in the enumeration 'vm, storage, node, sdn'\n", typeFilter)
			return nil, nil, exitPVE
		}
		items := []any{}
		for _, other := range pt.lab.Members(h) {
			if typeFilter == "" || typeFilter == "node" {
				status := "online"
				if other.Fault.Down {
					status = "offline"
				}
				items = append(items, map[string]any{"id": "node/" + other.Cfg.Node, "type": "node", "node": other.Cfg.Node,
					"status": status, "maxcpu": max(other.Cfg.Cores, 1), "maxmem": int64(max(other.Cfg.MemoryMB, 1024)) << 20, "level": ""})
			}
			if typeFilter == "" || typeFilter == "vm" {
				for _, g := range other.SortedGuests() {
					items = append(items, pt.guestResource(other, g, now, true))
				}
			}
			if typeFilter == "" || typeFilter == "storage" {
				for _, st := range nodeStorages(other) {
					status := "available"
					if other.Fault.Down {
						status = "unknown"
					}
					items = append(items, map[string]any{"id": "storage/" + other.Cfg.Node + "/" + st.ID, "type": "storage",
						"storage": st.ID, "node": other.Cfg.Node, "status": status, "plugintype": st.Type, "content": st.Content,
						"disk": st.Used, "maxdisk": st.Total, "shared": 0})
				}
			}
		}
		return items, []string{"id", "type", "cpu", "disk", "diskread", "diskwrite", "hastate", "level", "lock", "maxcpu", "maxdisk", "maxmem", "mem", "name", "netin", "netout", "node", "plugintype", "pool", "status", "storage", "tags", "template", "uptime", "vmid"}, 0
	case p == "/cluster/status":
		return pt.clusterStatus(h), []string{"id", "name", "type", "ip", "level", "local", "nodeid", "nodes", "online", "quorate", "version"}, 0
	case p == "/cluster/ha/resources":
		return pt.haResources(h), []string{"sid", "comment", "digest", "group", "max_relocate", "max_restart", "state", "type"}, 0
	case p == "/cluster/ha/status/current":
		return pt.haStatus(h), []string{"id", "node", "status", "type", "crm_state", "max_relocate", "max_restart", "quorate", "request_state", "sid", "state", "timestamp"}, 0
	case p == "/cluster/ha/status/manager_status":
		return pt.haManagerStatus(h), nil, 0
	case p == "/version":
		return map[string]any{"release": "8.3", "repoid": "c1689ccb1065a83b", "version": "8.3.0"}, nil, 0
	case p == "/cluster/nextid":
		// The lowest free vmid from 100 over the cluster (Proxmox answers it as a string).
		used := map[int]bool{}
		for _, other := range pt.lab.Members(h) {
			for vmid := range other.Guests {
				used[vmid] = true
			}
		}
		next := 100
		for used[next] {
			next++
		}
		return strconv.Itoa(next), nil, 0
	case p == "/nodes":
		items := []any{}
		for _, other := range pt.lab.Members(h) {
			item := map[string]any{"node": other.Cfg.Node, "status": "online", "type": "node", "id": "node/" + other.Cfg.Node,
				"level": "", "maxcpu": max(other.Cfg.Cores, 1), "maxmem": int64(max(other.Cfg.MemoryMB, 1024)) << 20}
			if other.Fault.Down {
				item["status"] = "offline"
			} else {
				item["uptime"] = int64(41*86400 + 3600*len(other.Cfg.Node))
				item["cpu"] = 0.0312
				item["mem"] = int64(max(other.Cfg.MemoryMB, 1024)) << 20 / 3
			}
			items = append(items, item)
		}
		return items, []string{"node", "status", "cpu", "level", "maxcpu", "maxmem", "mem", "ssl_fingerprint", "uptime"}, 0
	case len(parts) == 3 && parts[0] == "nodes" && parts[2] == "status":
		target, code := nodeOf()
		if target == nil {
			return nil, nil, code
		}
		return nodeStatus(target), nil, 0
	case len(parts) == 3 && parts[0] == "nodes" && parts[2] == "storage":
		target, code := nodeOf()
		if target == nil {
			return nil, nil, code
		}
		items := []any{}
		for _, st := range nodeStorages(target) {
			items = append(items, map[string]any{"storage": st.ID, "type": st.Type, "content": st.Content, "active": 1, "enabled": 1,
				"shared": 0, "total": st.Total, "used": st.Used, "avail": st.Avail, "used_fraction": float64(st.Used) / float64(st.Total)})
		}
		return items, []string{"content", "storage", "type", "active", "avail", "enabled", "shared", "total", "used", "used_fraction"}, 0
	case len(parts) == 3 && parts[0] == "nodes" && parts[2] == "tasks":
		target, code := nodeOf()
		if target == nil {
			return nil, nil, code
		}
		items := []any{}
		for i := len(pt.tasks[target.Cfg.Node]) - 1; i >= 0; i-- {
			items = append(items, pt.tasks[target.Cfg.Node][i])
		}
		return items, []string{"id", "node", "pid", "pstart", "starttime", "type", "upid", "user", "endtime", "status"}, 0
	case len(parts) == 3 && parts[0] == "nodes" && (parts[2] == "lxc" || parts[2] == "qemu"):
		target, code := nodeOf()
		if target == nil {
			return nil, nil, code
		}
		want := fleet.GuestLXC
		if parts[2] == "qemu" {
			want = fleet.GuestVM
		}
		items := []any{}
		for _, g := range target.SortedGuests() {
			if g.Cfg.Kind == want {
				items = append(items, pt.guestResource(target, g, now, false))
			}
		}
		if want == fleet.GuestVM {
			return items, []string{"status", "vmid", "cpus", "lock", "maxdisk", "maxmem", "name", "pid", "qmpstatus", "running-machine", "running-qemu", "tags", "uptime"}, 0
		}
		return items, []string{"status", "vmid", "cpus", "lock", "maxdisk", "maxmem", "maxswap", "name", "tags", "uptime"}, 0
	case len(parts) == 5 && parts[0] == "nodes" && (parts[2] == "lxc" || parts[2] == "qemu") && parts[4] == "config",
		len(parts) == 6 && parts[0] == "nodes" && (parts[2] == "lxc" || parts[2] == "qemu") && parts[4] == "status" && parts[5] == "current":
		target := pt.nodeHost(h, parts[1])
		if target != nil && target != h && target.Fault.Down {
			return nil, nil, proxyFailed(inv, target, p)
		}
		vmid, _ := strconv.Atoi(parts[3])
		var g *lab.Guest
		if target != nil {
			g = target.Guests[vmid]
		}
		want := fleet.GuestLXC
		if parts[2] == "qemu" {
			want = fleet.GuestVM
		}
		if g == nil || g.Cfg.Kind != want {
			node := parts[1]
			if target != nil {
				node = target.Cfg.Node
			}
			return nil, nil, noConfig(inv, node, vmid, want)
		}
		if parts[4] == "config" {
			kv := pt.lxcConfig(g)
			if want == fleet.GuestVM {
				kv = pt.qemuConfig(g)
			}
			out := map[string]any{"digest": fmt.Sprintf("%040x", vmid*104729)}
			for k, v := range kv {
				if n, err := strconv.Atoi(v); err == nil {
					out[k] = n
				} else {
					out[k] = v
				}
			}
			return out, nil, 0
		}
		return pt.guestResource(target, g, now, false), nil, 0
	}
	fmt.Fprintf(inv.Stderr, "No '%s' handler defined for '%s'\n", "get", p)
	return nil, nil, exitPVE
}

// proxyFailed answers a path of another node that is down: pvesh proxies it over SSH with
// the node's pinned key, ssh cannot connect and run_command reports the failed command.
func proxyFailed(inv *shell.Invocation, target *lab.Host, p string) int {
	ip, node := lab.HostIP(target.Cfg.Addr), target.Cfg.Node
	fmt.Fprintf(inv.Stderr, "ssh: connect to host %s port 22: No route to host\n", ip)
	fmt.Fprintf(inv.Stderr, "proxy handler failed: command '/usr/bin/ssh -e none -o 'BatchMode=yes' -o 'HostKeyAlias=%s' "+
		"-o 'UserKnownHostsFile=/etc/pve/nodes/%s/ssh_known_hosts' -o 'GlobalKnownHostsFile=none' root@%s -- "+
		"pvesh --noproxy get %s --output-format json' failed: exit code 255\n", node, node, ip, p)
	return exitPVE
}

// nodeStatus is GET /nodes/N/status for host h.
func nodeStatus(h *lab.Host) map[string]any {
	mem := int64(max(h.Cfg.MemoryMB, 1024)) << 20
	cores := max(h.Cfg.Cores, 1)
	root := nodeStorages(h)[0]
	return map[string]any{
		"cpu": 0.0312, "wait": 0.0004, "idle": 0, "uptime": int64(41*86400 + 3600*len(h.Cfg.Node)),
		"loadavg":    []any{"0.42", "0.37", "0.31"},
		"kversion":   "Linux 6.8.12-4-pve #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4 (2024-11-06T15:04Z)",
		"pveversion": "pve-manager/8.3.0/c1689ccb1065a83b",
		"cpuinfo": map[string]any{"cores": cores, "cpus": cores, "sockets": 1, "model": "AMD Ryzen 7 5700G with Radeon Graphics",
			"mhz": "3800.000", "hvm": "1", "flags": "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov", "user_hz": 100},
		"memory":         map[string]any{"total": mem, "used": mem / 3, "free": mem - mem/3},
		"swap":           map[string]any{"total": int64(8) << 30, "used": 0, "free": int64(8) << 30},
		"rootfs":         map[string]any{"total": root.Total, "used": root.Used, "avail": root.Avail, "free": root.Avail},
		"ksm":            map[string]any{"shared": 0},
		"boot-info":      map[string]any{"mode": "efi", "secureboot": 0},
		"current-kernel": map[string]any{"machine": "x86_64", "release": "6.8.12-4-pve", "sysname": "Linux", "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4 (2024-11-06T15:04Z)"},
	}
}

// nodeHost finds the host serving node name within h's cluster; the caller holds pt.lab.Mu.
func (pt *Tools) nodeHost(h *lab.Host, node string) *lab.Host {
	if h.Cfg.Node == node {
		return h
	}
	if h.Cfg.Cluster == "" {
		return nil
	}
	for _, other := range pt.lab.Hosts() {
		if other.Cfg.Node == node && other.Cfg.Cluster == h.Cfg.Cluster && other.Cfg.Kind == fleet.KindProxmox {
			return other
		}
	}
	return nil
}
