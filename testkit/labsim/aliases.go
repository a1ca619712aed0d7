package labsim

import (
	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
)

// The fleet's description lives in labsim/fleet and the fault model in labsim/lab; these names keep the simulator's API in one
// import for its callers.
type (
	// Fleet is the simulated homelab (fleet.Fleet).
	Fleet = fleet.Fleet
	// Host is one machine with its own SSH listener (fleet.Host).
	Host = fleet.Host
	// Guest is an LXC container or a QEMU VM on a Proxmox host (fleet.Guest).
	Guest = fleet.Guest
	// Listener is a TCP port a machine listens on (fleet.Listener).
	Listener = fleet.Listener
	// RouteTarget is what serves an HTTP route (fleet.RouteTarget).
	RouteTarget = fleet.RouteTarget
	// Fault is what can go wrong with a host or a guest (lab.Fault).
	Fault = lab.Fault
)

// Machine kinds, guest kinds, guest statuses and the default ingress addresses (see
// labsim/fleet).
const (
	KindProxmox, KindLinux, KindDarwin = fleet.KindProxmox, fleet.KindLinux, fleet.KindDarwin
	GuestLXC, GuestVM                  = fleet.GuestLXC, fleet.GuestVM
	StatusRunning, StatusStopped       = fleet.StatusRunning, fleet.StatusStopped
	DefaultHTTPAddr, DefaultHTTPSAddr  = fleet.DefaultHTTPAddr, fleet.DefaultHTTPSAddr
)

// ErrInventory is wrapped by every inventory parsing error.
var ErrInventory = fleet.ErrInventory

// FleetFromInventory builds a fleet from an inventory file (fleet.FromInventory).
func FleetFromInventory(inv []byte) (Fleet, error) { return fleet.FromInventory(inv) }
