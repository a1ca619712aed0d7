package remote

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on them with errors.Is: a resolution error
// is a broken configuration (S8), an unreachable host is an outage, and a
// changed host key is a security event — three different things an operator
// must be able to tell apart.
var (
	// ErrResolution means an entity could not be turned into a Target
	// because the graph lacks something (an address, a vmid, an owning host).
	ErrResolution = errors.New("target resolution failed")
	// ErrNotFound is what a Graph returns (wrapped) when an entity or edge
	// does not exist, so the Resolver can tell "missing" from "lookup failed".
	ErrNotFound = errors.New("not found")
	// ErrNotRunnable: the entity is not a machine, LXC or VM (a service, a route, ...), so
	// commands run on what it runs on, if anything. With ErrResolution. Callers decide
	// whether that is a fault (a command aimed at it) or a question answered (a check
	// following runs-on edges), so Resolver does not log it.
	ErrNotRunnable = errors.New("not a machine, lxc or vm")
	// ErrNoGuestAgent means a VM has no usable QEMU guest agent, so
	// `qm guest exec` cannot reach it.
	ErrNoGuestAgent = errors.New("no QEMU guest agent")
	// ErrHostKeyChanged means a host offered a key different from the one
	// pinned on first use; the connection is refused.
	ErrHostKeyChanged = errors.New("host key changed")
	// ErrUnreachable means the TCP connection or the SSH handshake failed or
	// did not finish within the dial timeout.
	ErrUnreachable = errors.New("host unreachable")
	// ErrAuthFailed means the host rejected our key.
	ErrAuthFailed = errors.New("ssh authentication failed")
	// ErrPoolClosed is returned by a Pool after Close.
	ErrPoolClosed = errors.New("ssh pool closed")
	// ErrInvalidCommand means a command cannot be sent at all (it contains a
	// NUL byte, which no shell argument can carry).
	ErrInvalidCommand = errors.New("invalid command")
	// ErrGuestExec means `qm guest exec` itself failed (as opposed to the
	// command inside the guest exiting non-zero), or its answer was not the
	// JSON Proxmox documents.
	ErrGuestExec = errors.New("qm guest exec failed")
	// ErrGuestTimeout means `qm guest exec` gave up waiting and returned only
	// the guest pid. It also matches context.DeadlineExceeded, so an executor
	// records it as a timeout like any other.
	ErrGuestTimeout = errors.New("guest command timed out")
	// ErrProbeShell means a probe shell (see Pool.Probe) ended or broke the
	// framing before the command's status was read, so the command's outcome
	// is unknown; the shell is discarded and the next probe starts a new one.
	ErrProbeShell = errors.New("probe shell failed")
)

// ResolutionError says which entity could not be resolved and why. It
// matches ErrResolution and, when set, the more specific Err (for example
// ErrNoGuestAgent).
type ResolutionError struct {
	Entity string // slug of the entity being resolved
	Reason string // what is missing, in words an operator can act on
	Err    error  // optional more specific sentinel
}

// Error names the entity and what is missing.
func (e *ResolutionError) Error() string {
	return fmt.Sprintf("resolve %s: %s", e.Entity, e.Reason)
}

// Unwrap exposes ErrResolution and the specific cause to errors.Is/As.
func (e *ResolutionError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrResolution, e.Err}
	}
	return []error{ErrResolution}
}

// guestTimeoutError is the `{"pid": N}` answer of qm guest exec.
type guestTimeoutError struct{ pid int }

// Error reports the pid qm returned instead of a result.
func (e *guestTimeoutError) Error() string {
	return fmt.Sprintf("guest command timed out: qm guest exec returned only pid %d (the command may still be running in the guest)", e.pid)
}

// Unwrap makes the timeout match ErrGuestTimeout and context.DeadlineExceeded.
func (e *guestTimeoutError) Unwrap() []error {
	return []error{ErrGuestTimeout, context.DeadlineExceeded}
}
