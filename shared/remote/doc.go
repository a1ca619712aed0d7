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
//
// # Exec and Probe
//
// Exec (and Run) opens a session per command: the operator's and the agent's
// commands get a clean login environment, their own exit status and streamed
// output. For every session sshd forks and execs the user's login shell, which
// on a small machine costs more CPU than the SSH traffic and the command
// together. The scheduler's probes run every minute on every machine, so
// Probe runs them instead as lines of a long-lived shell: each pooled
// connection keeps a few sessions (PoolOptions.ProbeShellsPerConn, default 2)
// whose command is `exec /bin/sh`, each running one probe at a time, re-created
// lazily when they die (with their connection, on a timeout, or when a command
// exits the shell). A probe then costs the target no process of its own.
//
// The shell's stdout and stderr are streams with no message boundaries, so
// each command is framed with a fresh 128-bit nonce from crypto/rand:
//
//	{ eval '<command>' </dev/null; }; printf '\n%s %d\n' NONCE "$?"; printf '\n%s\n' NONCE >&2
//
// The command travels as one single-quoted word: whatever it contains
// (quotes, newlines, a heredoc, text that looks like a trailer) cannot end the
// line early or be read as a second command, and eval parses it only once the
// whole line has arrived. Its stdin is /dev/null so it can never swallow the
// lines sent after it. The client reads stdout up to "\nNONCE <status>\n" and
// stderr up to "\nNONCE\n", and strips exactly the newline the trailer added
// (output without a final newline comes back without one). The nonce is new
// for every command and never visible to it, so output cannot forge the end
// of a command. Before sending, a command is parsed with
// mvdan.cc/sh/v3/syntax: a POSIX sh exits on a syntax error inside eval, and
// reads bash's $'…' quoting differently, so both are refused. When the context
// ends, what arrived is kept, the shell is sent SIGKILL and closed, and it is
// never reused; as OpenSSH ignores that signal for root, the shell's process
// group (its pid, learnt from `echo $$` when it starts) is also killed through
// a session of its own. See docs/adr/0006-probe-shell.md.
package remote
