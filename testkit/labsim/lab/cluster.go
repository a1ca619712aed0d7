package lab

import (
	"sort"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
)

// DefaultHARecoveryDelay is how long the lab waits after a node goes down before it
// recovers the node's HA-managed guests elsewhere: about what ha-manager takes (the node's
// LRM lock expires after 120 s, then the CRM fences it and recovers its services).
const DefaultHARecoveryDelay = 2 * time.Minute

// Members lists the Proxmox nodes of h's cluster in fleet order (h alone when it is in no
// cluster); the caller holds Mu.
func (l *Lab) Members(h *Host) []*Host {
	var out []*Host
	for _, n := range l.order {
		other := l.hosts[n]
		if other.Cfg.Kind == fleet.KindProxmox && h.SameCluster(other) {
			out = append(out, other)
		}
	}
	return out
}

// NodeID is h's corosync node id: its place among its cluster's members (1, 2, …); the
// caller holds Mu.
func (l *Lab) NodeID(h *Host) int {
	for i, m := range l.Members(h) {
		if m == h {
			return i + 1
		}
	}
	return 0
}

// Quorate reports whether more than half of h's cluster is up (always true for a node in
// no cluster); the caller holds Mu.
func (l *Lab) Quorate(h *Host) bool {
	members := l.Members(h)
	up := 0
	for _, m := range members {
		if !m.Fault.Down {
			up++
		}
	}
	return up*2 > len(members)
}

// FindGuest finds vmid on any node of h's cluster; the caller holds Mu.
func (l *Lab) FindGuest(h *Host, vmid int) (*Host, *Guest) {
	for _, m := range l.Members(h) {
		if g, ok := m.Guests[vmid]; ok {
			return m, g
		}
	}
	return nil, nil
}

// Migrate moves guest g from its node to target, keeping its vmid, name, machine and
// address; the caller has checked that target is another node of the same cluster and
// holds Mu.
func (l *Lab) Migrate(g *Guest, target *Host) {
	from := g.host
	if from == target {
		return
	}
	if from != nil {
		delete(from.Guests, g.Cfg.VMID)
	}
	target.Guests[g.Cfg.VMID] = g
	g.host = target
	g.flaps = nil
	l.log.Info().Int("vmid", g.Cfg.VMID).Str("from", nameOf(from)).Str("to", target.Cfg.Name).Msg("guest migrated")
}

func nameOf(h *Host) string {
	if h == nil {
		return ""
	}
	return h.Cfg.Name
}

// Fence marks the HA-managed guests of a node that went down as being fenced (ha-manager's
// "fence" state until they are recovered); Unfence puts them back to their requested state
// when the node came back first. The caller holds Mu.
func (l *Lab) Fence(h *Host) {
	h.DownAt = l.clock()
	for _, g := range h.Guests {
		if g.HAReq != "" {
			g.HAState = "fence"
		}
	}
}

// Unfence ends the fencing of h's HA-managed guests (h is up again); the caller holds Mu.
func (l *Lab) Unfence(h *Host) {
	for _, g := range h.Guests {
		if g.HAReq != "" {
			g.HAState = g.HAReq
		}
	}
}

// RecoverHA moves the HA-managed guests of down node h to the surviving members of its
// cluster, as ha-manager's CRM does once the node is fenced: each guest goes to the online
// node holding the fewest guests (ties by fleet order) and is started there when its
// requested state is started. Nothing moves while the rest of the cluster has no quorum,
// or when h is up again. It returns the guests moved; the caller holds Mu.
func (l *Lab) RecoverHA(h *Host) []*Guest {
	if !h.Fault.Down || !l.Quorate(h) {
		return nil
	}
	var moved []*Guest
	for _, g := range h.SortedGuests() {
		if g.HAReq == "" {
			continue
		}
		var best *Host
		for _, m := range l.Members(h) {
			if m == h || m.Fault.Down {
				continue
			}
			if best == nil || len(m.Guests) < len(best.Guests) {
				best = m
			}
		}
		if best == nil {
			return moved
		}
		l.Migrate(g, best)
		// The guest died with its node; the CRM starts it afresh on the new one.
		g.SetRunning(false, l.clock())
		if g.HAReq == "started" {
			g.SetRunning(true, l.clock())
		}
		g.HAState = g.HAReq
		moved = append(moved, g)
	}
	return moved
}

// HAGuests lists the HA-managed guests of h's cluster by vmid; the caller holds Mu.
func (l *Lab) HAGuests(h *Host) []*Guest {
	var out []*Guest
	for _, m := range l.Members(h) {
		for _, g := range m.Guests {
			if g.HAState != "" {
				out = append(out, g)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cfg.VMID < out[j].Cfg.VMID })
	return out
}
