package notify

import (
	"slices"
)

// IsA reports whether typ is ancestor or one of its descendants (the ontology's is-a); nil
// compares names only.
type IsA func(typ, ancestor string) bool

// Matches reports whether the rule r wants n: any of its kinds, at least its min_severity,
// and it is enabled. A rule with entity types wants only notifications about an entity of
// one of them (or of a subtype, with isA); one with tags only those whose tags overlap its
// own.
func Matches(r Rule, n Notification, isA IsA) bool {
	if !r.Enabled || !slices.Contains(r.Kinds, n.Kind) || rank(n.Severity) < rank(r.MinSeverity) {
		return false
	}
	if len(r.EntityTypes) > 0 {
		if n.EntityType == "" {
			return false
		}
		ok := false
		for _, t := range r.EntityTypes {
			ok = ok || t == n.EntityType || (isA != nil && isA(n.EntityType, t))
		}
		if !ok {
			return false
		}
	}
	if len(r.Tags) > 0 {
		ok := false
		for _, t := range r.Tags {
			ok = ok || slices.Contains(n.Tags, t)
		}
		if !ok {
			return false
		}
	}
	return true
}
