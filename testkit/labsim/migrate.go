package labsim

import (
	"errors"
	"fmt"

	"github.com/oikos-hq/oikos/testkit/labsim/proxmox"
)

// Placement is where a guest is: its host and Proxmox node, vmid, name, kind and status.
type Placement = proxmox.Placement

// ErrBadTarget means a migration's target is not another node of the guest's cluster.
var ErrBadTarget = errors.New("labsim: bad migration target")

// ErrTargetDown means a migration's target node is down.
var ErrTargetDown = errors.New("labsim: migration target is down")

// MigrateGuest moves guest vmid of host to the node target (a node or host name of the same
// cluster), as `qm migrate --online` or `pct migrate --restart` would: the vmid, name,
// machine and address stay, the node changes, a running guest keeps running. Errors wrap
// ErrUnknownHost, ErrUnknownGuest, ErrBadTarget or ErrTargetDown.
func (s *Sim) MigrateGuest(host string, vmid int, target string) (Placement, error) {
	h, err := s.host(host)
	if err != nil {
		return Placement{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := h.Guests[vmid]
	if !ok {
		return Placement{}, fmt.Errorf("%w: %s/%d", ErrUnknownGuest, host, vmid)
	}
	// A host name is accepted where the node name differs.
	if t, ok := s.hosts[target]; ok && t.Cfg.Node != target {
		target = t.Cfg.Node
	}
	to, msg := s.pve.CheckTarget(h.Host, target)
	if to == nil {
		return Placement{}, fmt.Errorf("%w: %s", ErrBadTarget, msg)
	}
	if to.Fault.Down {
		return Placement{}, fmt.Errorf("%w: node '%s' is offline", ErrTargetDown, to.Cfg.Node)
	}
	running := g.Running()
	s.lab.Migrate(g, to)
	if running && g.Cfg.Kind == GuestLXC {
		// A container moves by restart.
		now := s.opts.Clock()
		g.SetRunning(false, now)
		g.SetRunning(true, now)
	}
	return proxmox.PlacementOf(g), nil
}

// GuestPlacement finds guest vmid on any node of host's cluster.
func (s *Sim) GuestPlacement(host string, vmid int) (Placement, error) {
	h, err := s.host(host)
	if err != nil {
		return Placement{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, g := s.lab.FindGuest(h.Host, vmid)
	if g == nil {
		return Placement{}, fmt.Errorf("%w: %s/%d", ErrUnknownGuest, host, vmid)
	}
	return proxmox.PlacementOf(g), nil
}
