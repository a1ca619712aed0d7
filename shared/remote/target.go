package remote

import (
	"fmt"
	"math"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// Target kinds.
const (
	KindMachine = "machine" // reached directly over SSH
	KindLXC     = "lxc"     // pct exec on the owning Proxmox host
	KindVM      = "vm"      // qm guest exec on the owning Proxmox host
)

// DefaultGuestExecTimeout is how long `qm guest exec` waits for a guest
// command. It matches the executor's default command timeout; qm's own
// default (30 s) would cut long commands short.
const DefaultGuestExecTimeout = 10 * time.Minute

// Target says where and how a command runs. For guests, Addr and User are
// those of the owning Proxmox host, and Wrap turns a command into the
// `pct exec` / `qm guest exec` line that runs it inside the guest.
type Target struct {
	Slug string // the entity the command is for, e.g. lxc:jellyfin
	Addr string // "ip:port" to dial
	User string // SSH user
	// Wrap turns a command into what is sent over SSH. It fails only for a
	// command no shell argument can carry (a NUL byte).
	Wrap func(cmd string) (string, error)
	Kind string // KindMachine, KindLXC or KindVM
	VMID int    // guests only
	Host string // owning Proxmox host's slug, guests only
	OS   string // linux or darwin
	// StoppedOnPurpose: the graph says this guest is meant to be stopped (attribute
	// expected_status: stopped), so "not running" is its expected state, not a failure.
	StoppedOnPurpose bool
}

// ExpectedStatusAttr is the guest attribute that says a guest is meant to be stopped
// ("stopped"; anything else, or none, means running).
const ExpectedStatusAttr = "expected_status"

// StoppedOnPurpose reports whether a guest's attributes say it is meant to be stopped.
func StoppedOnPurpose(attrs map[string]any) bool {
	s, _ := attrs[ExpectedStatusAttr].(string)
	return strings.EqualFold(strings.TrimSpace(s), "stopped")
}

// QuoteArg quotes s as one shell word whose value is exactly s. POSIX quoting
// is used when it can represent s; it refuses control characters and invalid
// UTF-8, and then bash's $'…' form is used instead — the word is parsed by
// the Proxmox host's login shell, which is bash (root's shell on Proxmox VE).
// A NUL byte cannot be carried by any shell argument and is refused.
func QuoteArg(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("%w: command contains a NUL byte", ErrInvalidCommand)
	}
	if q, err := syntax.Quote(s, syntax.LangPOSIX); err == nil {
		return q, nil
	}
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidCommand, err)
	}
	return q, nil
}

// directWrap sends a command unchanged: the machine's own login shell runs it.
func directWrap(cmd string) (string, error) {
	if strings.IndexByte(cmd, 0) >= 0 {
		return "", fmt.Errorf("%w: command contains a NUL byte", ErrInvalidCommand)
	}
	return cmd, nil
}

// PctExecCommand is the host-side line that runs cmd inside container vmid.
// `sh -c` rather than bash: a container is only guaranteed a POSIX sh in its
// PATH (/sbin:/bin:/usr/sbin:/usr/bin inside pct exec).
func PctExecCommand(vmid int, cmd string) (string, error) {
	q, err := QuoteArg(cmd)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("pct exec %d -- sh -c %s", vmid, q), nil
}

// GuestExecCommand is the host-side line that runs cmd inside VM vmid
// through the QEMU guest agent, letting qm wait up to timeout.
func GuestExecCommand(vmid int, timeout time.Duration, cmd string) (string, error) {
	q, err := QuoteArg(cmd)
	if err != nil {
		return "", err
	}
	secs := int(math.Ceil(timeout.Seconds()))
	if secs < 1 {
		secs = 1
	}
	return fmt.Sprintf("qm guest exec %d --timeout %d -- sh -c %s", vmid, secs, q), nil
}

// MachineTarget is a machine reached directly at addr ("ip:port") as user, before the graph
// knows it well enough to resolve it (a host being added to the fleet).
func MachineTarget(slug, addr, user, os string) Target {
	if os == "" {
		os = "linux"
	}
	return Target{Slug: slug, Addr: addr, User: user, Wrap: directWrap, Kind: KindMachine, OS: os}
}
