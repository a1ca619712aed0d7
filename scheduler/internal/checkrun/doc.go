// Package checkrun is the scheduler's check runner (docs/behaviours.md S1–S3, S8): it loads the
// enabled check definitions the api derived (check_defs: kind + config; the runner never
// derives), runs each at start and then on its interval with jitter, and hands what it
// finds to the result writer (package results), which stores it on the entity the check
// observes. It serves its own self-report at /status (StatusHandler).
//
// # Scheduling
//
// One goroutine keeps every check in a heap ordered by due time. A check's first run falls
// at a random phase within min(interval, InitialSpread) of the load, so a restart does not
// fire two thousand probes in the same millisecond; later runs keep that phase (an anchored
// schedule, each run jittered by at most min(interval/20, 2s) around it), so the rate stays
// steady. When the loop wakes for a due check it also starts those due within their slack
// (half that jitter bound, at most 500 ms), so one wake-up serves several checks. Runs go to
// at most Concurrency long-lived workers (no goroutine per run); a check that is due while
// its previous run is still running is skipped and counted in
// oikos_scheduler_checks_overrun_total — never dropped silently. Lag (start − due) is
// measured for every run and exported as p50/p99.
// Definitions are reloaded on NOTIFY oikos_checks, on every reconnect of the notifier and on
// a slow safety-net poll; a target whose set of checks changed gets its health recomputed
// at its next result (results.Writer.ForgetTargets).
//
// # Kinds
//
//   - ssh-script (cpu, memory, disk, load, process <unit>) for Linux and macOS (config `os`):
//     the command (package probeparse, with its parser) runs on the target through the
//     host-hop (pct exec for LXCs, qm guest exec for VMs, SSH for machines) on the SSH pool
//     shared with the executor, one connection per host, as a line of the connection's
//     long-lived probe shell (remote.Pool.Probe, ADR 0006), not as a session. A target that
//     is not a machine runs it on what it runs on (fleet.Graph.ResolveRunsOn).
//   - http: GET with status, latency and optional body match through httpprobe.Client: a
//     plain HTTP/1.1 exchange on kept connections (TLS included), as many kept per
//     host:port as checks may run at once. Its dialer maps names through the name map and
//     refuses non-loopback addresses unless AllowNonLoopback is set: nothing resolves a
//     public name.
//   - tcp: a connect through the same dialer.
//   - backup-freshness: `find <path> -type f -mmin -<max>` on the machine holding the backup
//     (portable: the first backup target is on macOS).
//   - proxmox-guest: `pct status` / `qm status` on the owning Proxmox host, through its
//     probe shell too.
//
// # Guests that moved
//
// A guest's node may no longer be its node: Proxmox migrates guests, and ha-manager recovers
// a dead node's HA guests elsewhere, before the graph learns of it. A check of a guest (its
// ssh-script probes through pct exec / qm guest exec, its proxmox-guest status) that finds
// it gone from its node, or its node unreachable, asks the node's cluster where it runs —
// `pvesh get /cluster/resources` through a live member, one question per cluster shared by
// all its checks for min(ClusterTTL, interval) — and runs through that node's hop, noting the
// move in the result (Summary "moved", the reason's "(moved: atlas → boreas)"); later runs go
// there directly until the graph follows. The first answer that shows a move sends NOTIFY
// oikos_drift, so a discovery lists it and the api moves the hosts edge (moved.go).
//
// A machine that its own probes cannot reach over SSH is down — but only when two
// consecutive runs agree; a single failed dial is unknown, because a busy host that misses
// one handshake is not a dead one.
//
// # Errors are classified, never swallowed (S8)
//
// A check that cannot observe its target says why in check_results.error_class and in
// oikos_scheduler_check_failures_total{reason}: resolution (the graph lacks a fact: a broken
// configuration, logged as such), unreachable, auth, hostkey, guest-agent, timeout, exec,
// probe, parse, config.
package checkrun
