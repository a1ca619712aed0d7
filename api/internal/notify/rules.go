package notify

import (
	"slices"
	"time"
)

// Rule says which notifications go to its channel: any of its kinds, at least min_severity,
// and, when they are not empty, an entity type among entity_types and a tag among tags.
type Rule struct {
	ID          string    `json:"id"`
	ChannelID   string    `json:"channel_id"`
	Channel     string    `json:"channel"`
	Kinds       []string  `json:"kinds"`
	MinSeverity string    `json:"min_severity"`
	EntityTypes []string  `json:"entity_types"`
	Tags        []string  `json:"tags"`
	Enabled     bool      `json:"enabled"`
	CreatedAt   time.Time `json:"created_at"`
}

// IsA reports whether typ is ancestor or one of its descendants (the ontology's is-a); nil
// compares names only.
type IsA func(typ, ancestor string) bool

// Matches reports whether the rule wants n. A rule with entity types wants only
// notifications about an entity of one of them (or of a subtype, with isA); one with tags
// only those whose tags overlap its own.
func (r Rule) Matches(n Notification, isA IsA) bool {
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
