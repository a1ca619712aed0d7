package results

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
)

// checkState is the latest result of one enabled check of a target, as combine reads it.
type checkState = storage.CheckState

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
