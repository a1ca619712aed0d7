// Package remote is the one way Oikos runs a command on a machine.
//
// It has three parts that the scheduler's executor and checks share, so the
// host-hop, the quoting and the timeouts can never drift apart between
// copies (the original system had two diverging sshExec implementations, one
// with no timeout at all):
//
//   - Pool keeps one SSH connection per host and multiplexes many sessions on
//     it, with keepalives, reconnect on demand, a dial timeout and a
//     per-command timeout taken from the context. Output streams to the
//     caller as it arrives and is kept when a command times out.
//   - HostKeyStore pins every host key on first use; a changed key refuses the
//     connection and raises a signal through the store.
//   - Resolver turns a graph entity into a Target: LXCs run through
//     `pct exec` and VMs through `qm guest exec` on their owning Proxmox host,
//     machines are reached directly. The command crosses the hop as a single
//     quoted argument of `sh -c`, so it never changes meaning on the way.
package remote
