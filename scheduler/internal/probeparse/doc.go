// Package probeparse holds what the scheduler's probes run on a target and how their output
// is read: for each ssh-script probe (cpu, memory, disk, load, process, on Linux and macOS)
// the command and its parser side by side, since the command fixes the format the parser
// reads, and the parser of a Proxmox host's `pct status` / `qm status` answer. Parsers turn
// output into a results.Result; they never run anything (the runner, checkrun, does, through
// remote.Pool.Probe).
//
// Commands are plain reads that exist on a stock Debian, Proxmox or macOS install (/proc,
// df -P, systemctl is-active, sysctl, vm_stat, top -l), so nothing is deployed on a target.
// They run as lines of the connection's long-lived probe shell (ADR 0006), and on Linux cpu,
// memory and load are shell builtins only (read loops over /proc): a check on a machine then
// starts no process there at all. Linux cpu is the busy share of /proc/stat since the
// previous run of the check (since boot on its first run, kept in State); macOS cpu is the
// last sample of `top -l 2`.
package probeparse
