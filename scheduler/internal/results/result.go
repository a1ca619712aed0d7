package results

import "fmt"

// Health values a check result can carry. Stale is set only by the staleness sweep, on the
// target's entity_status.
const (
	HealthUp       = "up"
	HealthDegraded = "degraded"
	HealthDown     = "down"
	HealthUnknown  = "unknown"
	HealthStale    = "stale"
)

// Error classes of a result that could not observe its target.
const (
	ClassResolution  = "resolution"  // the graph lacks a fact: a configuration problem
	ClassUnreachable = "unreachable" // no SSH connection to the machine or the hop
	ClassAuth        = "auth"        // the key was refused
	ClassHostKey     = "hostkey"     // the host offered a key other than the pinned one
	ClassGuestAgent  = "guest-agent" // a VM's QEMU guest agent is not there
	ClassTimeout     = "timeout"     // the probe did not finish within the check's timeout
	ClassExec        = "exec"        // the command could not be run (transport failure)
	ClassProbe       = "probe"       // the probe command failed on the target
	ClassParse       = "parse"       // its output was not what the probe expects
	ClassConfig      = "config"      // the check's own config is unusable
)

// Classes lists every error class, in the order reports list them.
var Classes = []string{ClassResolution, ClassUnreachable, ClassAuth, ClassHostKey, ClassGuestAgent,
	ClassTimeout, ClassExec, ClassProbe, ClassParse, ClassConfig}

// rank orders health for combining: higher is worse.
func rank(h string) int {
	switch h {
	case HealthDown:
		return 4
	case HealthDegraded:
		return 3
	case HealthUnknown:
		return 2
	case HealthUp:
		return 1
	default:
		return 0
	}
}

// Metric is one sample a check produced.
type Metric struct {
	Name  string
	Value float64
}

// Result is what one run of a check found.
type Result struct {
	Health string
	Reason string
	// Class is set when the check could not observe its target (see the Class* constants).
	Class string
	// Observed is true when the run saw the target itself: up, degraded and down findings,
	// including a machine found unreachable. A guest behind an unreachable host, a
	// resolution failure or a timeout are not observations.
	Observed bool
	// Placement names where a guest that moved was found ("" while it is where the graph
	// says): a result whose placement changed is written in full even when its health
	// repeats, so the move it notes (Summary "moved") is stored.
	Placement string
	Summary   map[string]any
	Metrics   []Metric
}

// Unknown is a result that could not observe its target, for the reason class.
func Unknown(class, format string, args ...any) Result {
	return Result{Health: HealthUnknown, Class: class, Reason: fmt.Sprintf(format, args...)}
}

// Observed is a finding about the target itself.
func Observed(health, format string, args ...any) Result {
	return Result{Health: health, Observed: true, Reason: fmt.Sprintf(format, args...)}
}
