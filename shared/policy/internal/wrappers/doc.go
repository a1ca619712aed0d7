// Package wrappers is the principle that a wrapper is classified by what it
// runs: the one table of wrappers (wraptable.go, each entry with the manual it
// follows) and how each finds its inner command — privilege and environment
// (sudo, env), scheduling and limits (nice, timeout, xargs, systemd-run),
// isolation (chroot, nsenter), the shell itself (bash -c, eval, source,
// interpreters' -c code) and transports (ssh, pct exec, qm guest exec,
// docker exec, kubectl exec).
package wrappers
