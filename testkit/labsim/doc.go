// Package labsim is a fake homelab that speaks real SSH. Each machine of a Fleet — Proxmox
// hosts with their LXCs and VMs, plain Linux hosts, a macOS-like workstation — gets its own
// SSH listener (golang.org/x/crypto/ssh), its own persistent host key and its own directory
// under the state directory. Commands are never run on the real machine: they are
// interpreted by labsim/shell, every path is mapped into the machine's sandbox (labsim/sandbox)
// and only simulated programs written in Go run (labsim/coreutils, labsim/system and the
// Proxmox tools pct, qm, pveam, pvesh, pvesm, pvecm, ha-manager and pveversion in
// labsim/proxmox, which print exactly what docs/proxmox.md describes). Tests can therefore
// send `rm -rf /` safely.
//
// Proxmox hosts of one Cluster share a vmid namespace, answer pvecm and /cluster/status as
// members, and show the cluster's /etc/pve (corosync.conf, priv/known_hosts and every
// node's ssh_known_hosts with the nodes' original host keys). Guests move between members
// (qm migrate, pct migrate, MigrateGuest or the control API's migrate), keeping their
// machine, address and routes; HA-managed guests (fleet.Guest.HA) are recovered on a
// surviving member after their node goes down (Options.HARecoveryDelay).
//
// The packages, each importing only those after it: labsim (this one: the SSH and HTTP
// listeners, faults set from outside, the control API), labsim/proxmox (the Proxmox tools),
// labsim/lab (the hosts and guests with their machines and faults, under one lock),
// labsim/fleet (the fleet's description and inventory parsing), and per machine
// labsim/system, labsim/coreutils, labsim/shell and labsim/sandbox.
//
// Faults can be injected per host or guest while the simulator runs — down, refusing
// authentication, slow, hanging commands, disconnecting mid-output, a changed host key, a
// guest agent that does not answer — in process or through a loopback control API. An HTTP
// listener answers ingress routes by Host header so HTTP checks have something to probe.
package labsim
