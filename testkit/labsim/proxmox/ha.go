package proxmox

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// This file is ha-manager (pve-ha-manager's CLI/ha_manager.pm and API2/HA/Status.pm, in
// the PVE 8 format) and the HA API paths pvesh reads.

// haSID is a guest's HA service id: ct:VMID or vm:VMID.
func haSID(g *lab.Guest) string {
	if g.Cfg.Kind == fleet.GuestLXC {
		return fmt.Sprintf("ct:%d", g.Cfg.VMID)
	}
	return fmt.Sprintf("vm:%d", g.Cfg.VMID)
}

var haUsage = []string{
	"ha-manager add <sid> [OPTIONS]",
	"ha-manager config [OPTIONS]",
	"ha-manager crm-command migrate <sid> <node>",
	"ha-manager crm-command node-maintenance disable <node>",
	"ha-manager crm-command node-maintenance enable <node>",
	"ha-manager crm-command relocate <sid> <node>",
	"ha-manager crm-command stop <sid> <timeout>",
	"ha-manager groupadd <group> --nodes <string> [OPTIONS]",
	"ha-manager groupconfig",
	"ha-manager groupremove <group>",
	"ha-manager groupset <group> [OPTIONS]",
	"ha-manager migrate",
	"ha-manager relocate",
	"ha-manager remove <sid>",
	"ha-manager set <sid> [OPTIONS]",
	"ha-manager status  [OPTIONS]",
	"ha-manager help [<extra-args>] [OPTIONS]",
}

func (pt *Tools) haManager(_ context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 2 {
		return noCommand(inv, "ha-manager")
	}
	sub := inv.Args[1]
	a := parsePVEArgs(inv.Args[2:], map[string]bool{"verbose": true})
	pt.lab.Mu.Lock()
	defer pt.lab.Mu.Unlock()
	h := pt.lab.Host(host)
	switch sub {
	case "status":
		io.WriteString(inv.Stdout, pt.haStatusText(h))
		if optBool(a, "verbose") {
			io.WriteString(inv.Stdout, "full cluster state:\n"+perlPretty(pt.haManagerStatus(h)))
		}
		return 0
	case "config":
		var b strings.Builder
		for _, r := range pt.haResources(h) {
			m := r.(map[string]any)
			fmt.Fprintf(&b, "%s\n", m["sid"])
			fmt.Fprintf(&b, "\tstate %s\n\n", m["state"])
		}
		io.WriteString(inv.Stdout, b.String())
		return 0
	case "groupconfig":
		return 0
	case "help":
		io.WriteString(inv.Stdout, usageList("ha-manager", haUsage))
		return 0
	}
	return unknownCommand(inv, "ha-manager", sub)
}

// haMaster is the node whose CRM is master: the first member that is up.
func (pt *Tools) haMaster(h *lab.Host) *lab.Host {
	for _, m := range pt.lab.Members(h) {
		if !m.Fault.Down {
			return m
		}
	}
	return h
}

// haStatusText is `ha-manager status`: one "TYPE STATUS" line per entry of
// /cluster/ha/status/current. The caller holds the lock.
func (pt *Tools) haStatusText(h *lab.Host) string {
	var b strings.Builder
	for _, e := range pt.haStatus(h) {
		m := e.(map[string]any)
		fmt.Fprintf(&b, "%s %s\n", m["type"], m["status"])
	}
	return b.String()
}

// haStatus is GET /cluster/ha/status/current. The caller holds the lock.
func (pt *Tools) haStatus(h *lab.Host) []any {
	now := pt.lab.Now()
	quorate := pt.lab.Quorate(h)
	q := "OK"
	if !quorate {
		q = fmt.Sprintf("No quorum on node '%s'!", h.Cfg.Node)
	}
	out := []any{map[string]any{"id": "quorum", "type": "quorum", "node": h.Cfg.Node, "status": q, "quorate": boolInt(quorate)}}
	guests := pt.lab.HAGuests(h)
	if len(guests) == 0 {
		return out
	}
	master := pt.haMaster(h)
	out = append(out, map[string]any{"id": "master", "type": "master", "node": master.Cfg.Node,
		"status": fmt.Sprintf("%s (active, %s)", master.Cfg.Node, now.Format(ctime)), "timestamp": now.Unix()})
	members := append([]*lab.Host(nil), pt.lab.Members(h)...)
	sort.Slice(members, func(i, j int) bool { return members[i].Cfg.Node < members[j].Cfg.Node })
	for _, m := range members {
		state, at := "idle", now
		for _, g := range guests {
			if g.Host() == m && g.HAState == "started" {
				state = "active"
			}
		}
		if m.Fault.Down {
			state, at = "old timestamp - dead?", m.DownAt
		}
		out = append(out, map[string]any{"id": "lrm:" + m.Cfg.Node, "type": "lrm", "node": m.Cfg.Node,
			"status": fmt.Sprintf("%s (%s, %s)", m.Cfg.Node, state, at.Format(ctime)), "timestamp": at.Unix()})
	}
	sort.Slice(guests, func(i, j int) bool { return haSID(guests[i]) < haSID(guests[j]) })
	for _, g := range guests {
		sid, node := haSID(g), g.Host().Cfg.Node
		out = append(out, map[string]any{"id": "service:" + sid, "type": "service", "sid": sid, "node": node,
			"crm_state": g.HAState, "state": g.HAState, "request_state": g.HAReq,
			"status": fmt.Sprintf("%s (%s, %s)", sid, node, g.HAState)})
	}
	return out
}

// haManagerStatus is what ha-manager status --verbose dumps after "full cluster state:".
func (pt *Tools) haManagerStatus(h *lab.Host) map[string]any {
	now := pt.lab.Now()
	nodes := map[string]any{}
	for _, m := range pt.lab.Members(h) {
		nodes[m.Cfg.Node] = map[bool]string{true: "fence", false: "online"}[m.Fault.Down]
	}
	services := map[string]any{}
	for _, g := range pt.lab.HAGuests(h) {
		services[haSID(g)] = map[string]any{"node": g.Host().Cfg.Node, "state": g.HAState}
	}
	return map[string]any{"manager_status": map[string]any{"master_node": pt.haMaster(h).Cfg.Node, "node_status": nodes,
		"service_status": services, "timestamp": now.Unix()}, "quorum": map[string]any{"node": h.Cfg.Node, "quorate": boolInt(pt.lab.Quorate(h))}}
}

// haResources is GET /cluster/ha/resources. The caller holds the lock.
func (pt *Tools) haResources(h *lab.Host) []any {
	guests := pt.lab.HAGuests(h)
	sort.Slice(guests, func(i, j int) bool { return haSID(guests[i]) < haSID(guests[j]) })
	out := []any{}
	for _, g := range guests {
		sid := haSID(g)
		typ, _, _ := strings.Cut(sid, ":")
		out = append(out, map[string]any{"sid": sid, "type": typ, "state": g.HAReq, "digest": fmt.Sprintf("%040x", g.Cfg.VMID*7919)})
	}
	return out
}
