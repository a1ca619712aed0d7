// Package checks is the scheduler's check runner (BEHAVIOURS S1–S3, S8): it loads the enabled
// check definitions the api derived (check_defs: kind + config; the runner never derives),
// runs each at start and then on its interval with jitter, and writes what it finds onto the
// entity the check observes.
//
// # Scheduling
//
// One goroutine keeps every check in a heap ordered by due time. A check's first run falls
// at a random phase within min(interval, InitialSpread) of the load, so a restart does not
// fire two thousand probes in the same millisecond; later runs keep that phase (an anchored
// schedule, each run jittered by at most min(interval/20, 2s) around it), so the rate stays
// steady. When the loop wakes for a due check it also starts those due within their slack
// (half that jitter bound, at most 50 ms), so one wake-up serves several checks. Runs go to
// at most Concurrency long-lived workers (no goroutine per run); a check that is due while
// its previous run is still running is skipped and counted in
// oikos_scheduler_checks_overrun_total — never dropped silently. Lag (start − due) is
// measured for every run and exported as p50/p99.
// Definitions are reloaded on NOTIFY oikos_checks, on every reconnect of the notifier and on
// a slow safety-net poll.
//
// # Kinds
//
//   - ssh-script (cpu, memory, disk, load, process <unit>) for Linux and macOS (config `os`):
//     the command runs on the target through the host-hop (pct exec for LXCs, qm guest exec
//     for VMs, SSH for machines) on the SSH pool shared with the executor, one connection per
//     host. Commands are plain reads (/proc, df -P, systemctl is-active, sysctl, vm_stat,
//     top -l); parsing happens here, so no probe script needs deploying on any target. They
//     run as lines of the connection's long-lived probe shell (remote.Pool.Probe, ADR 0006),
//     not as sessions, and on Linux cpu, memory and load are shell builtins only (read
//     loops over /proc): a check on a machine then starts no process there at all.
//     Linux cpu is the busy share of /proc/stat since the previous run of the check (since
//     boot on its first run); macOS cpu is the last sample of `top -l 2`.
//   - http: GET with status, latency and optional body match, as a plain HTTP/1.1 exchange
//     on a kept connection per route (TLS included), written and read by the probe's own
//     goroutine (keptClient: no Transport goroutines to hand off to). Its dialer maps names
//     through NameMap and refuses non-loopback addresses unless AllowNonLoopback is set:
//     nothing resolves a public name.
//   - tcp: a connect through the same dialer.
//   - backup-freshness: `find <path> -type f -mmin -<max>` on the machine holding the backup
//     (portable: the first backup target is on macOS).
//   - proxmox-guest: `pct status` / `qm status` on the owning Proxmox host, through its
//     probe shell too.
//
// # Health on the target
//
// Every result is keyed by the check definition's target_id — the entity being observed —
// never by the check's own bookkeeping entity (the original system wrote every result onto
// the probe and left the whole fleet `unknown`). Results are written in batches about once a
// second, one transaction of four round trips: the latest result per check into
// check_results and the metric samples in one statement, then the target's entity_status
// is recomputed from all of its enabled checks' latest results:
//
//	health = the worst of them, in the order down > degraded > unknown > up
//
// A definite finding outranks the absence of one: a stopped container is down even while its
// cpu probe cannot say anything, and a target whose checks are all up but one that cannot
// observe it is unknown, not up. The reason names the checks that set the health. A
// health.changed event is appended only when the combined health changes.
//
// A machine that its own probes cannot reach over SSH is down — but only when two
// consecutive runs agree; a single failed dial is unknown, because a busy host that misses
// one handshake is not a dead one.
//
// last_check_at advances only when a check actually observed the target. A guest whose
// Proxmox host is unreachable is `unknown` with a reason naming that host (not `down`) and
// is not observed, so it turns `stale` once the staleness sweep finds its last observation
// older than 3× its fastest interval; an `unknown` result never overwrites `stale`.
//
// # Errors are classified, never swallowed (S8)
//
// A check that cannot observe its target says why in check_results.error_class and in
// oikos_scheduler_check_failures_total{reason}: resolution (the graph lacks a fact: a broken
// configuration, logged as such), unreachable, auth, hostkey, guest-agent, timeout, exec,
// probe, parse, config.
package checks
