package checks

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

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
	Summary  map[string]any
	Metrics  []Metric
}

func unknown(class, format string, args ...any) Result {
	return Result{Health: HealthUnknown, Class: class, Reason: fmt.Sprintf(format, args...)}
}

func observed(health, format string, args ...any) Result {
	return Result{Health: health, Observed: true, Reason: fmt.Sprintf(format, args...)}
}

// checkState is the latest result of one enabled check of a target, as combine reads it.
type checkState struct {
	Slug       string
	Kind       string
	Health     string
	Reason     string
	Class      string
	Summary    map[string]any
	At         time.Time
	ObservedAt *time.Time
}

// combined is a target's health computed from its checks.
type combined struct {
	Health      string
	Reason      string
	Summary     map[string]any
	LastCheckAt *time.Time
}

// combine computes a target's health from the latest results of its enabled checks: the
// worst of them (down > degraded > unknown > up). The reason lists the checks that set it;
// last_check_at is the newest observation of any check.
func combine(states []checkState) combined {
	sort.Slice(states, func(i, j int) bool { return states[i].Slug < states[j].Slug })
	out := combined{Health: HealthUnknown}
	checks := make(map[string]any, len(states))
	worst := 0
	for _, s := range states {
		if r := rank(s.Health); r > worst {
			worst = r
			out.Health = s.Health
		}
		entry := map[string]any{"kind": s.Kind, "health": s.Health, "at": s.At.UTC().Format(time.RFC3339Nano)}
		if s.Reason != "" {
			entry["reason"] = s.Reason
		}
		if s.Class != "" {
			entry["error_class"] = s.Class
		}
		if s.ObservedAt != nil {
			entry["observed_at"] = s.ObservedAt.UTC().Format(time.RFC3339Nano)
			if out.LastCheckAt == nil || s.ObservedAt.After(*out.LastCheckAt) {
				t := *s.ObservedAt
				out.LastCheckAt = &t
			}
		}
		for k, v := range s.Summary {
			if _, taken := entry[k]; !taken {
				entry[k] = v
			}
		}
		checks[s.Slug] = entry
	}
	var reasons, setBy []string
	for _, s := range states {
		if s.Health != out.Health {
			continue
		}
		setBy = append(setBy, s.Slug)
		if s.Reason != "" {
			reasons = append(reasons, shortCheck(s.Slug)+": "+s.Reason)
		}
	}
	switch {
	case len(states) == 0:
		out.Reason = "no enabled check has reported"
	case out.Health == HealthUp:
		out.Reason = fmt.Sprintf("all %d checks up", len(states))
	default:
		out.Reason = strings.Join(reasons, "; ")
	}
	out.Summary = map[string]any{
		"rule":   "worst of the target's enabled checks (down > degraded > unknown > up)",
		"checks": checks,
		"set_by": setBy,
	}
	return out
}

// shortCheck trims "check:<type>.<name>." from a check slug, leaving kind[.script].
func shortCheck(slug string) string {
	name := strings.TrimPrefix(slug, "check:")
	for _, k := range []string{".ssh-script", ".http", ".tcp", ".backup-freshness", ".proxmox-guest"} {
		if i := strings.LastIndex(name, k); i >= 0 {
			return name[i+1:]
		}
	}
	return name
}
