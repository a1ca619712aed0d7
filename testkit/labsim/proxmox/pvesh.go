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
	if len(inv.Args) < 3 || inv.Args[1] != "get" {
		if len(inv.Args) >= 2 && inv.Args[1] != "get" {
			fmt.Fprintf(inv.Stderr, "ERROR: the lab only supports 'pvesh get'\n")
			return exitPVE
		}
		fmt.Fprint(inv.Stderr, "400 not enough arguments\npvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]\n")
		return exitPVE
	}
	a := parsePVEArgs(inv.Args[2:], map[string]bool{"noborder": true, "noheader": true, "human-readable": true})
	if len(a.pos) == 0 {
		fmt.Fprint(inv.Stderr, "400 not enough arguments\npvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]\n")
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
	now := pt.lab.Now()
	h := pt.lab.Host(host)
	var result any
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	pt.lab.Mu.Lock()
	switch {
	case p == "/cluster/resources":
		var items []any
		for _, other := range pt.lab.Hosts() {
			if !h.SameCluster(other) || other.Cfg.Kind != fleet.KindProxmox {
				continue
			}
			if typeFilter == "" || typeFilter == "node" {
				status := "online"
				if other.Fault.Down {
					status = "offline"
				}
				items = append(items, map[string]any{"id": "node/" + other.Cfg.Node, "type": "node", "node": other.Cfg.Node,
					"status": status, "maxcpu": max(other.Cfg.Cores, 1), "maxmem": int64(max(other.Cfg.MemoryMB, 1024)) << 20})
			}
			if typeFilter == "" || typeFilter == "vm" {
				for _, g := range other.SortedGuests() {
					items = append(items, pt.guestResource(other, g, now, true))
				}
			}
		}
		if items == nil {
			items = []any{}
		}
		result = items
	case len(parts) == 3 && parts[0] == "nodes" && (parts[2] == "lxc" || parts[2] == "qemu"):
		target := pt.nodeHost(h, parts[1])
		if target == nil {
			pt.lab.Mu.Unlock()
			fmt.Fprintf(inv.Stderr, "hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known\n", parts[1], parts[1])
			return exitPVE
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
		result = items
	case len(parts) == 6 && parts[0] == "nodes" && (parts[2] == "lxc" || parts[2] == "qemu") && parts[4] == "status" && parts[5] == "current":
		target := pt.nodeHost(h, parts[1])
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
			pt.lab.Mu.Unlock()
			node := parts[1]
			if target != nil {
				node = target.Cfg.Node
			}
			return noConfig(inv, node, vmid, want)
		}
		result = pt.guestResource(target, g, now, false)
	case p == "/cluster/nextid":
		// The lowest free vmid from 100 over the cluster (Proxmox answers it as a string).
		used := map[int]bool{}
		for _, other := range pt.lab.Hosts() {
			if other.Cfg.Kind == fleet.KindProxmox && h.SameCluster(other) {
				for vmid := range other.Guests {
					used[vmid] = true
				}
			}
		}
		next := 100
		for used[next] {
			next++
		}
		result = strconv.Itoa(next)
	case p == "/nodes":
		items := []any{}
		for _, other := range pt.lab.Hosts() {
			if other.Cfg.Kind == fleet.KindProxmox && h.SameCluster(other) {
				items = append(items, map[string]any{"node": other.Cfg.Node, "status": map[bool]string{true: "offline", false: "online"}[other.Fault.Down], "type": "node"})
			}
		}
		result = items
	default:
		pt.lab.Mu.Unlock()
		fmt.Fprintf(inv.Stderr, "No '%s' handler defined for '%s'\n", "get", p)
		return exitPVE
	}
	pt.lab.Mu.Unlock()
	switch a.opts["output-format"] {
	case "json-pretty":
		io.WriteString(inv.Stdout, perlPretty(result))
	default:
		// The lab renders the default text format as JSON as well: its consumers parse JSON.
		out, err := compactJSON(result)
		if err != nil {
			fmt.Fprintf(inv.Stderr, "unable to render result: %v\n", err)
			return exitPVE
		}
		io.WriteString(inv.Stdout, out)
	}
	return 0
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
